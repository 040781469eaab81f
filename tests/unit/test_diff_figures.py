"""`harness diff` compares the runs' own figures: in the regression judge's names, units and
directions, the changes first, nulls never "the same"; and two nights per control, the run
each judged a control by, through the command over night folders built here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.diff import figure_words, render
from harness.cli.main import main
from harness.judge.difference import compare
from harness.judge.nightpairs import night_document, night_exit_status, pick_runs
from harness.judge.runfigures import MAX_TELEMETRY, compare_figure, figures_topic, run_figures
from harness.measure.runfolder.manifest import write_manifest

T0 = "2026-12-06T10:00:00.000000Z"


def times(seconds: float) -> dict:
    return {"times": {"started": T0, "ended": f"2026-12-06T10:00:{seconds:09.6f}Z"}}


def record(seconds: float | None = None, **kw) -> dict:
    doc = {"schema": "harness.run/v2", "run_id": "k-1", "attempt": 1, "status": "accepted",
           "reasons": [], "rules": [], "seal": "sha256:s", "image": {"id": "sha256:i"},
           "model_hashes": {}, "campaign": {"name": "c"}, "control": {"name": "k"},
           **(times(seconds) if seconds is not None else {})}
    return {**doc, **kw}


def words(name: str, a: float | int | None, b: float | int | None) -> str:
    return figure_words(compare_figure(name, a, b))


# ---- one figure ------------------------------------------------------------------------------

def test_a_figure_reads_in_the_judges_name_and_unit_with_its_move_and_which_way() -> None:
    assert words("duration_s", 1.31, 2.84) == "duration_s 1.31 s -> 2.84 s (+117 %, worse)"
    assert words("kv_cache_gib", 20.0, 10.0) == "kv_cache_gib 20.00 GiB -> 10.00 GiB (-50 %, worse)"
    assert words("lock_hold_s", 3.0, 1.5) == "lock_hold_s 3.00 s -> 1.50 s (-50 %, better)"
    assert words("memory_peak_bytes", 1 << 20, 3 << 20) == \
        "memory_peak_bytes 1.00 MiB -> 3.00 MiB (+200 %, worse)"
    assert words("generated_tokens", 100, 120) == \
        "generated_tokens 100 tokens -> 120 tokens (+20 %)"
    assert words("exit_code", 0, 1) == "exit_code 0 -> 1 (from 0)"
    assert words("energy_j", None, 5.0) == "energy_j — -> 5.00 J (not recorded in a)"


def test_a_move_under_the_judges_effect_floor_is_within_and_equal_is_same() -> None:
    small = compare_figure("lock_wait_s", 1.0, 1.02)
    assert small["change"] == "within" and small["way"] == "worse"
    assert compare_figure("lock_wait_s", 1.0, 1.05)["change"] == "moved"
    assert compare_figure("kv_tokens", 7, 7)["change"] == "same"
    assert compare_figure("kv_tokens", None, None)["change"] == "not recorded"
    assert compare_figure("x", 1e-300, 1e300)["shift"] is None  # overflow: no ratio


# ---- the figures topic -----------------------------------------------------------------------

def side(seconds: float | None, metrics: dict | None = None, **kw) -> dict:
    return {"record": record(seconds, **kw), "metrics": {"metrics": metrics or {}}}


def test_changes_come_first_then_within_same_and_unrecorded_in_the_judges_order() -> None:
    lock = {"wait_s": 0.5, "hold_s": 2.0}
    a = side(1.31, {"kv_cache_gib": 19.0, "kv_tokens": 100, "model_load_s": None},
             lock=lock, outcome={"exit_code": 0})
    b = side(2.84, {"kv_cache_gib": 19.1, "kv_tokens": 100, "model_load_s": None},
             lock={**lock, "hold_s": 3.5}, outcome={"exit_code": 0})
    t = figures_topic(a, b)
    order = [(f["figure"], f["change"]) for f in t["figures"]]
    assert order[:4] == [("duration_s", "moved"), ("lock_hold_s", "moved"),
                         ("kv_cache_gib", "within"), ("lock_wait_s", "same")]
    assert ("model_load_s", "not recorded") in order[5:] and t["same"] is False
    text = render(compare(a, b))
    head = text.index("figures: 2 changed by 5 % or more, 1 within 5 %, 3 same, 13 not "
                      "recorded")
    assert text[head + 1:head + 3] == ["    duration_s 1.31 s -> 2.84 s (+117 %, worse)",
                                       "    lock_hold_s 2.00 s -> 3.50 s (+75 %, worse)"]
    assert text[head + 3] == "    within 5 %: kv_cache_gib +0.5 %"
    assert text[head + 4] == "    same: lock_wait_s, exit_code, kv_tokens"
    assert text[head + 5].startswith("    not recorded in either run: max_concurrency, ")
    assert head < text.index("status: same accepted")  # the figures before every section
    assert compare(a, b)["differs"][0] == "figures"


def test_null_figures_are_never_the_same_entries() -> None:
    nulls = {m: None for m in ("kv_cache_gib", "kv_tokens", "model_load_s")}
    doc = compare(side(None, nulls), side(None, nulls))
    assert doc["topics"]["figures"]["same"] is None and "figures" not in doc["differs"]
    assert "figures: none recorded in either run" in render(doc)
    one = compare(side(None, nulls), side(None, {**nulls, "kv_tokens": 5}))
    assert one["topics"]["figures"]["same"] is False and one["differs"] == ["figures"]
    assert "    kv_tokens — -> 5 tokens (not recorded in a)" in render(one)


def test_telemetry_peaks_and_means_of_known_quantities_only_and_bounded() -> None:
    figures = {"container": {"memory_bytes": {"peak": 10.0, "mean": 5.0},
                             "memory_peak_bytes": {"peak": 10.0, "mean": 8.0},
                             "cpu_s": {"peak": 3.0, "mean": None}, "rogue": {"peak": 1}},
               "gpu0": {"power_w": {"peak": "300", "mean": 200.0}},
               "x" * 65: {"power_w": {"peak": 1.0}}, **{f"s{i:03d}": {"power_w": {}}
                                                          for i in range(100)}}
    found = run_figures({"telemetry": {"figures": figures, "cpu_pct_mean": 12.5}}, None)
    assert found["container.memory_bytes.peak"] == 10.0 and found["cpu_pct_mean"] == 12.5
    assert found["container.memory_bytes.mean"] == 5.0 and found["memory_peak_bytes"] == 10.0
    assert "container.cpu_s.mean" not in found and found["container.cpu_s.peak"] == 3.0
    assert "container.memory_peak_bytes.peak" not in found  # it is memory_peak_bytes
    assert found["gpu0.power_w.peak"] is None and found["gpu0.power_w.mean"] == 200.0
    assert not any("rogue" in n or "x" * 65 in n for n in found)
    assert len([n for n in found if n.count(".") == 2]) <= 2 * MAX_TELEMETRY
    assert compare_figure("gpu0.power_w.mean", 200.0, 260.0)["unit"] == "W"


# ---- two nights ------------------------------------------------------------------------------

def entry(control: object, run_id: str, status: str, sealed: str, **kw) -> dict:
    return {"control": control, "run_id": run_id, "status": status, "sealed": sealed,
            "run_dir": f"/runs/{run_id}", "superseded_by": None, **kw}


def test_each_control_is_judged_by_its_newest_accepted_run_else_its_final_one() -> None:
    picked = pick_runs([
        entry("k", "k-1", "accepted", "2026-01-01"),
        entry("k", "k-2", "accepted", "2026-01-03"),
        entry("k", "k-3", "refused", "2026-01-04"),
        entry("j", "j-1", "refused", "2026-01-01", superseded_by="j-2"),
        entry("j", "j-2", "failed", "2026-01-02"),
        entry("j", "j-0", "refused", "2026-01-05", superseded_by="j-9"),
        5, entry(["x"], "z", "accepted", "2026"), {"control": "n", "status": "accepted"},
    ])
    assert {c: p["run_id"] for c, p in picked.items()} == {"j": "j-2", "k": "k-2"}
    assert pick_runs("junk") == {} and picked["k"]["run_dir"] == "/runs/k-2"


def test_two_nights_name_the_controls_in_one_only_and_exit_as_documented() -> None:
    run = {"run_id": "k-1", "status": "accepted", "run_dir": "/r"}
    a = {"dir": "/n/a", "runs": {"k": run, "old": run}}
    b = {"dir": "/n/b", "runs": {"k": run, "new": run}}
    same = {"a": {}, "b": {}, "repeat": {}, "differs": [], "topics": {
        "status": {"same": True}, "figures": {"same": True}}}
    doc = night_document(a, b, {"k": same})
    assert (doc["only_a"], doc["only_b"], list(doc["controls"])) == (["old"], ["new"], ["k"])
    assert night_exit_status(doc, False) == 0 and night_exit_status(doc, True) == 1
    moved = {**same, "differs": ["figures", "seal"]}
    doc = night_document({**a, "runs": {"k": run}}, {**b, "runs": {"k": run}}, {"k": moved})
    assert doc["controls"]["k"]["differs"] == ["figures"] and night_exit_status(doc, True) == 1
    broken = night_document(a, b, {"k": {"error": "not sealed"}})
    assert night_exit_status(broken, False) == 1


# ---- the command over night folders ----------------------------------------------------------

def sealed_run(root: Path, run_id: str, seconds: float, status: str = "accepted") -> Path:
    folder = root / run_id
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(record(seconds, run_id=run_id, status=status)))
    write_manifest(folder)
    return folder


def night(root: Path, name: str, runs: list[tuple[str, Path | str, str]]) -> Path:
    folder = root / "nights" / name
    folder.mkdir(parents=True)
    (folder / "journal.sqlite").write_bytes(b"")
    (folder / "summary.json").write_text(json.dumps({"schema": "harness.summary/v1", "runs": [
        entry(c, Path(p).name, s, "2026-01-01", run_dir=str(p)) for c, p, s in runs]}))
    return folder


def _exit(args: list[object], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(["diff", *(str(x) for x in args)])
    got = capsys.readouterr()
    return e.value.code, got.out, got.err


def test_two_night_folders_are_compared_per_control(tmp_path: Path, capsys) -> None:
    fast, slow = sealed_run(tmp_path, "k-fast", 1.31), sealed_run(tmp_path, "k-slow", 2.84)
    other = sealed_run(tmp_path, "j-1", 1.0)
    na = night(tmp_path, "c-20260101T000000Z", [("k", fast, "accepted"),
                                                ("j\x1b[31m", other, "accepted")])
    nb = night(tmp_path, "c-20260102T000000Z", [("k", "k-slow", "accepted")])  # relative
    code, out, err = _exit([na, nb], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert "only in a: j\\x1b[31m" in lines and "controls that differ: k" in lines
    at = lines.index("k: k-fast (accepted) -> k-slow (accepted)")
    assert lines[at + 1:at + 4] == ["    status: same accepted",
                                    "    figures: 1 changed by 5 % or more, 18 not recorded",
                                    "        duration_s 1.31 s -> 2.84 s (+117 %, worse)"]
    assert _exit([na, nb, "--exit-code"], capsys)[0] == 1
    code, out, _ = _exit([na, na, "--exit-code", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "harness.diff-nights/v1"
    assert doc["controls"]["k"]["differs"] == [] and doc["only_a"] == doc["only_b"] == []
    assert slow.is_dir()


def test_a_night_against_a_run_a_night_without_summary_and_a_broken_run(tmp_path: Path,
                                                                       capsys) -> None:
    run = sealed_run(tmp_path, "k-1", 1.0)
    good = night(tmp_path, "c-20260101T000000Z", [("k", run, "accepted")])
    code, _, err = _exit([good, run], capsys)
    assert code == 2 and "is a night folder and" in err and "Traceback" not in err
    bare = tmp_path / "nights" / "c-20260103T000000Z"
    bare.mkdir()
    (bare / "journal.sqlite").write_bytes(b"")
    code, _, err = _exit([good, bare], capsys)
    assert code == 2 and "no readable night summary" in err
    (bare / "summary.json").write_text('{"schema": "other"}')
    assert _exit([good, bare], capsys)[0] == 2
    unsealed = tmp_path / "k-2"
    unsealed.mkdir()
    (unsealed / "run.json").write_text(json.dumps(record(1.0)))
    broken = night(tmp_path, "c-20260104T000000Z", [("k", unsealed, "accepted")])
    code, out, _ = _exit([good, broken], capsys)
    assert code == 1 and "    not compared: " in out
