"""A run reference means one run or none: each form (whole id, id prefix, hex tail) matches
only its own part of a run id, in a real runs dir made in tmp_path; a tail or prefix that
matches more than one entry, or a tail that matches a run by its control name instead, is
ambiguous (exit 2, the candidates listed, bounded); a symlink or file named like a run is a
candidate that is never resolved to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.measure.runfolder.refs import MAX_CANDIDATES, find_run

STAMP, LATER = "20261201T201825Z", "20261202T010000Z"
TAIL_A = f"gate0-{STAMP}-c0ffee12"  # ends in the tail c0ffee12
TAIL_B = f"compute-{LATER}-c0ffee34"  # shares the tail prefix c0ffee
NAMED = f"c0ffee-{STAMP}-11111111"  # its control name starts like those tails
SHORT = f"c0f-{STAMP}-22222222"  # a control name a 3-digit tail prefix starts
LONG = f"c0ffee123-{STAMP}-33333333"  # nine hex digits: more than a tail, an id prefix
GATE = f"rehearsal-gate0-{STAMP}-8684abca"
INPROC = f"rehearsal-gate0-inproc-{LATER}-1234abcd"
WHOLE = f"a-{STAMP}-44444444"  # a whole id that is also a prefix of the next one
LONGER = f"a-{STAMP}-44444444-{LATER}-55555555"
LINK = f"linked-{LATER}-c0ffee77"  # a symlink named like a run
FILE = f"plain-{LATER}-c0ffee88"  # a file named like a run

# (what the runs dir holds, the reference, the run it names, or the text its refusal holds)
CASES = [
    # by tail: unique, ambiguous, a 4- or 6-digit prefix, either case
    ([TAIL_A], "c0ffee12", TAIL_A, None),
    ([TAIL_A, TAIL_B], "c0ffee12", TAIL_A, None),
    ([TAIL_A, TAIL_B], "c0ffee", None, f"2 runs match ({TAIL_B} (by its tail), {TAIL_A}"),
    ([TAIL_A, TAIL_B], "c0ff", None, "2 runs match"),
    ([TAIL_A], "C0FFEE12", TAIL_A, None),
    # a tail never reaches a run by its control name
    ([NAMED], "c0ffee", None, f"1 run matches, not by its tail ({NAMED} (by its control name"),
    ([NAMED, TAIL_A], "c0ffee", None, f"{NAMED} (by its control name, not its tail)"),
    ([NAMED, TAIL_A], "c0ffee", None, f"2 runs match ({TAIL_A} (by its tail)"),
    ([NAMED, TAIL_A], "c0ffee1", TAIL_A, None),  # NAMED is c0ffee-: not started by c0ffee1
    ([NAMED, TAIL_A], "c0ffee12", TAIL_A, None),  # only TAIL_A's tail; NAMED is c0ffee-
    ([NAMED, TAIL_A], "c0ffee-", NAMED, None),  # a `-`: an id prefix, by its control name
    ([NAMED], "11111111", NAMED, None),
    ([SHORT], "c0f", None, "a tail needs at least 4 of its 8 hex digits"),
    ([SHORT], "c0f-", SHORT, None),
    ([LONG, TAIL_A], "c0ffee123", LONG, None),  # nine hex digits are no tail
    # by id prefix: unique, ambiguous, and a whole id always wins exactly
    ([GATE, INPROC], "rehearsal-gate0-i", INPROC, None),
    ([GATE, INPROC], "rehearsal-gate0", None, "harness ls --control rehearsal-gate0"),
    ([WHOLE, LONGER], WHOLE, WHOLE, None),
    ([WHOLE, LONGER], f"a-{STAMP}-4444", None, "2 runs match"),
    # a symlink or a file named like a run: a candidate, never the answer
    ([TAIL_A, LINK], "c0ffee77", None, f"is {LINK}: a symlink, not a run folder"),
    ([TAIL_A, LINK], LINK, None, "a symlink, not a run folder, never followed"),
    ([TAIL_A, LINK], "c0ffee", None, f"{LINK} (by its tail; a symlink, never followed)"),
    ([TAIL_A, LINK], "linked", None, "a symlink, not a run folder"),
    ([TAIL_A, FILE], "c0ffee", None, f"{FILE} (by its tail; not a folder, never followed)"),
    ([TAIL_A, FILE], "c0ffee88", None, f"is {FILE}: not a folder"),
    ([TAIL_A, FILE], "c0ffee1", TAIL_A, None),
    # no match at all
    ([TAIL_A], "deadbeef", None, "no run 'deadbeef'"),
]


def _runs_dir(tmp_path: Path, names: list[str]) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in names:
        if name == LINK:
            os.symlink(elsewhere, runs / name)
        elif name == FILE:
            (runs / name).write_text("not a run")
        else:
            (runs / name).mkdir()
    return runs


@pytest.mark.parametrize(("names", "ref", "want", "refusal"), CASES)
def test_a_reference_matches_only_its_own_part_of_a_run_id(
        tmp_path: Path, names: list[str], ref: str, want: str | None,
        refusal: str | None) -> None:
    runs = _runs_dir(tmp_path, names)
    if want is not None:
        assert find_run(ref, runs, "R") == runs / want
        return
    with pytest.raises(InvalidInput) as e:
        find_run(ref, runs, "R")
    assert refusal is not None and refusal in e.value.message
    assert "\n" not in e.value.message


def test_an_ambiguous_reference_lists_a_bounded_inert_list(tmp_path: Path) -> None:
    names = [f"c{i:02d}-{STAMP}-c0ffee{i:02x}" for i in range(MAX_CANDIDATES + 5)]
    runs = _runs_dir(tmp_path, names)
    (runs / f"evil\x1b[31m-{STAMP}-c0ffee99").mkdir()  # outside the name alphabet: ignored
    with pytest.raises(InvalidInput) as e:
        find_run("c0ffee", runs, "R")
    message = e.value.message
    assert f"{MAX_CANDIDATES + 5} runs match" in message and "and 5 more" in message
    assert sum(n in message for n in names) == MAX_CANDIDATES
    assert "\x1b" not in message and "evil" not in message


@pytest.mark.parametrize("command", [["show", "c0ffee"], ["diff", "c0ffee", "c0ffee12"],
                                     ["verify", "c0ffee"]])
def test_the_commands_refuse_an_ambiguous_reference_with_exit_2(
        tmp_path: Path, command: list[str]) -> None:
    runs = _runs_dir(tmp_path, [NAMED, TAIL_A])
    env = {**os.environ, "HARNESS_RUNS_DIR": str(runs)}
    r = subprocess.run([sys.executable, "-m", "harness", *command], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "ambiguous" in r.stderr and NAMED in r.stderr and TAIL_A in r.stderr
    assert "Traceback" not in r.stderr
