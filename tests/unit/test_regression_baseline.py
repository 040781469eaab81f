"""The regression baseline is chosen from folders that verify, never from names
(harness.driver.regress.choose, harness.judge.comparable.select/fill).

A runs folder is hostile: folders named like runs of a control (empty, unsealed, forged,
another control's, a link, a file), dated later than every real run, must be counted as
junk and skipped; none may push a verified run out of its baseline, so a real slowdown
is still called. Every folder here is real, sealed by the project's own sealing code
(`write_manifest`, through regression_helpers.sealed_run), in tmp_path.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from regression_helpers import HOST, T0, sealed_run

from harness.driver.regress import call_run, choose, read_candidate, seal
from harness.judge.comparable import MAX_NAMED, Junk, fill, select
from harness.judge.regressionfile import read_sealed
from harness.measure.runfolder.manifest import verify_folder, write_manifest

REAL = 20  # real earlier runs: one more than a run alone needs to be called
SLOW = 60  # the called run, the n-th minute's: every real run is sealed before it
CROWD = 850  # look-alikes: more than the 800 names the baseline was once cut at


def later_name(k: int, control: str = "c") -> str:
    """A run id dated after every real run (and after the called run)."""
    return f"{control}-20991231T{k // 3600 % 24:02d}{k // 60 % 60:02d}{k % 60:02d}Z-{k:08x}"


def resealed(folder: Path, **record: object) -> Path:
    """The sealed folder with run.json edited and sealed again by the project's sealing
    code: a folder whose seal is consistent, whatever it claims."""
    doc = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**doc, **record}))
    (folder / "SHA256SUMS").unlink()
    write_manifest(folder)
    return folder


def template(runs: Path, name: str, **kwargs: object) -> Path:
    """A sealed run kept outside the runs folder, to copy junk from."""
    return sealed_run(runs.parent / "templates", SLOW - 1, folder=runs.parent / "templates"
                      / name, **kwargs)


# ---- how each look-alike is made: (runs folder, a real run, its index) -> None -----------

def empty(runs: Path, real: Path, k: int) -> None:
    (runs / later_name(k)).mkdir()


def unsealed(runs: Path, real: Path, k: int) -> None:
    folder = runs / later_name(k)
    folder.mkdir()
    (folder / "run.json").write_text((real / "run.json").read_text())


def a_file(runs: Path, real: Path, k: int) -> None:
    (runs / later_name(k)).write_text("{}")


def a_symlink(runs: Path, real: Path, k: int) -> None:
    (runs / later_name(k)).symlink_to(real)


def forged_accepted(runs: Path, real: Path, k: int) -> None:
    """A refused run's folder, its run.json edited to accepted after the seal, copied."""
    source = runs.parent / "templates" / "forged"
    if not source.exists():
        folder = template(runs, "forged", status="refused")
        text = (folder / "run.json").read_text().replace('"refused"', '"accepted"')
        (folder / "run.json").write_text(text)
    shutil.copytree(source, runs / later_name(k), symlinks=True)


def copy_of_a_run(runs: Path, real: Path, k: int) -> None:
    """A real run's sealed folder copied under a later name: its record names another run."""
    shutil.copytree(real, runs / later_name(k), symlinks=True)


def seal_is_a_folder(runs: Path, real: Path, k: int) -> None:
    folder = runs / later_name(k)
    folder.mkdir()
    (folder / "run.json").write_text((real / "run.json").read_text())
    (folder / "SHA256SUMS").mkdir()


def another_control(runs: Path, real: Path, k: int) -> None:
    """Named as a run of c, sealed consistently, its record says c-b."""
    folder = sealed_run(runs, SLOW - 1, folder=runs / later_name(k))
    resealed(folder, control={"name": "c-b", "file": "/x/c-b.yaml", "device": "cpu"})


def whole_check_fails(runs: Path, real: Path, k: int) -> None:
    """run.json and host-before.json as sealed, sealed after every real run; another file
    changed after the seal: only the whole check finds it."""
    folder = sealed_run(runs, SLOW - 1, folder=runs / later_name(k))
    (folder / "metrics.json").write_text('{"metrics": {"kv_cache_gib": 1.0}}')


def another_image(runs: Path, real: Path, k: int) -> None:
    sealed_run(runs, SLOW - 1, image="sha256:bb", folder=runs / later_name(k))


def another_host(runs: Path, real: Path, k: int) -> None:
    sealed_run(runs, SLOW - 1, host={**HOST, "kernel": {"release": "7.0"}},
               folder=runs / later_name(k))


def sealed_after_the_run(runs: Path, real: Path, k: int) -> None:
    sealed_run(runs, SLOW + 10, folder=runs / later_name(k))


def a_longer_controls_run(runs: Path, real: Path, k: int) -> None:
    """A real run of control c-b, whose name begins with c's: no run of c at all."""
    folder = sealed_run(runs, SLOW - 1, folder=runs / later_name(k, "c-b"))
    resealed(folder, control={"name": "c-b", "file": "/x/c-b.yaml", "device": "cpu"})


Make = Callable[[Path, Path, int], None]
# (how, how many, what it counts as: a Junk kind, "other" for a run that is not
# comparable, None for a folder that is no run of the control at all)
VARIANTS: list[tuple[Make, int, str | None]] = [
    (empty, CROWD, Junk.EMPTY),
    (unsealed, CROWD, Junk.UNSEALED),
    (a_file, CROWD, Junk.NOT_A_FOLDER),
    (a_symlink, CROWD, Junk.NOT_A_FOLDER),
    (forged_accepted, CROWD, Junk.SEAL_FAILS),
    (copy_of_a_run, CROWD, Junk.UNREADABLE),
    (seal_is_a_folder, CROWD, Junk.SEAL_FAILS),
    (another_control, 40, Junk.ANOTHER_CONTROL),
    (whole_check_fails, 40, Junk.SEAL_FAILS),
    (another_image, 40, "other"),
    (another_host, 40, "other"),
    (sealed_after_the_run, 40, "other"),
    (a_longer_controls_run, 40, None),
]


def history(runs: Path) -> tuple[list[Path], Path]:
    """REAL steady runs of c, then the called run, twice as slow: a regression."""
    runs.mkdir()
    real = [sealed_run(runs, i, duration=1.0 + (i % 4) / 100) for i in range(REAL)]
    return real, sealed_run(runs, SLOW, duration=2.0)


def expected_baseline(real: list[Path]) -> list[str]:
    return [p.name for p in reversed(real)]


@pytest.mark.parametrize(("make", "count", "counted"), VARIANTS,
                         ids=[v[0].__name__ for v in VARIANTS])
def test_look_alikes_are_counted_and_never_displace_a_verified_run(
        tmp_path, make: Make, count: int, counted: str | None) -> None:
    runs = tmp_path / "runs"
    real, slow = history(runs)
    for k in range(count):
        make(runs, real[0], k)
    called = call_run(slow, runs)
    assert [c.run_id for c in called.selection.baseline] == expected_baseline(real)
    assert called.regressions == ["duration_s", "lock_hold_s"]
    got = called.selection
    if counted in (None, "other"):
        assert got.skipped == {} and got.left_out == ()
        assert got.other == (count if counted == "other" else 0)
    else:
        assert got.skipped == {str(counted): count} and got.other == 0
        assert len(got.left_out) == min(count, MAX_NAMED)
        assert all(u.kind == counted for u in got.left_out)
    assert got.unexamined == 0 and got.stopped is None


def test_a_crowd_of_every_kind_is_said_in_the_sealed_call(tmp_path) -> None:
    """All the look-alikes at once, dated after every real run: the call is still made on
    the real runs, and the addendum counts each kind and names the first few."""
    runs = tmp_path / "runs"
    real, slow = history(runs)
    k = 0
    for make, count, _ in VARIANTS:
        for _ in range(min(count, CROWD // len(VARIANTS) + 1)):
            make(runs, real[0], k)
            k += 1
    called = call_run(slow, runs)
    assert called.regressions == ["duration_s", "lock_hold_s"]
    seal(called, slow, T0 + timedelta(hours=3), rerun={"scheduled": False, "why": "test"})
    assert verify_folder(slow) == []
    doc = read_sealed(slow)
    assert [b["run_id"] for b in doc["baseline"]] == expected_baseline(real)
    kinds = {str(kind) for _, _, kind in VARIANTS if kind not in (None, "other")}
    assert set(doc["skipped"]) == kinds and sum(doc["skipped"].values()) > 400
    assert len(doc["left_out"]) == MAX_NAMED and doc["unexamined"] == 0
    assert doc["figures"]["duration_s"]["baseline"] == REAL


# ---- the caps: bounded work, said when reached, never spent by cheap junk ----------------


def test_junk_seen_without_a_read_spends_no_cap(tmp_path) -> None:
    """Empty, unsealed and linked look-alikes cost an lstat each: a cap of one more read
    than there are real runs still fills the baseline."""
    runs = tmp_path / "runs"
    real, slow = history(runs)
    for k in range(300):
        (empty, a_symlink, seal_is_a_folder)[k % 3](runs, real[0], k)
    got = choose(read_candidate(slow), runs, max_read=REAL + 1, max_failed=1)
    assert [c.run_id for c in got.baseline] == expected_baseline(real)
    assert sum(got.skipped.values()) == 300 and got.unexamined == 0 and got.stopped is None


def test_large_look_alikes_are_read_last_and_what_the_budget_left_is_said(tmp_path) -> None:
    """The byte budget is spent smallest first: look-alikes with a large record cannot use
    it up before the real runs are read; those it did not reach are said."""
    runs = tmp_path / "runs"
    real, slow = history(runs)
    real_size = sum((real[0] / f).stat().st_size
                    for f in ("SHA256SUMS", "run.json", "host-before.json"))
    for k in range(5):
        forged_accepted(runs, real[0], k)
        folder = runs / later_name(k)
        (folder / "run.json").write_text(" " * 1_000_000)
    got = choose(read_candidate(slow), runs, max_read_bytes=(REAL + 2) * real_size + 1_000_000)
    assert [c.run_id for c in got.baseline] == expected_baseline(real)
    assert got.skipped == {"seal fails": 1} and got.unexamined == 4
    assert got.stopped and "cap" in got.stopped and "4 folders" in got.stopped


def test_the_read_cap_when_reached_is_said(tmp_path) -> None:
    runs = tmp_path / "runs"
    _, slow = history(runs)
    got = choose(read_candidate(slow), runs, max_read=10)
    assert got.unexamined == REAL + 1 - 10 and "cap of 10 folders" in got.stopped


def test_the_verification_cap_stops_and_says_so(tmp_path) -> None:
    """Folders whose seal vouches for their record yet fail the whole check cost a
    whole re-hash each: after `max_failed` of them verification stops, and says so."""
    runs = tmp_path / "runs"
    real, slow = history(runs)
    for k in range(5):
        whole_check_fails(runs, real[0], k)
    got = choose(read_candidate(slow), runs, max_failed=3)
    assert got.skipped == {"seal fails": 3}
    assert got.unexamined == 2 + REAL and "after 3 folders" in got.stopped
    full = choose(read_candidate(slow), runs)
    assert [c.run_id for c in full.baseline] == expected_baseline(real)


def test_a_full_baseline_stops_the_verification(tmp_path) -> None:
    """Newest first by their own sealed time, verification stops once the baseline is
    full: the older runs are counted with the other runs, never verified."""
    runs = tmp_path / "runs"
    real, slow = history(runs)
    run = read_candidate(slow)
    reads = [read_candidate(p) for p in real]
    seen = []

    def verified():
        for c in sorted(reads, key=lambda c: c.sealed, reverse=True):
            seen.append(c.run_id)
            yield c

    got = fill(run, verified(), select(run, reads, limit=REAL), limit=5, max_failed=1)
    assert [c.run_id for c in got.baseline] == expected_baseline(real)[:5]
    assert seen == expected_baseline(real)[:5] and got.other == REAL - 5
