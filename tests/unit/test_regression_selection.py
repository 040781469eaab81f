"""Which runs a regression call compares (harness.judge.comparable), which figures and
which way each gets worse, and the confirmation decision: pure, on made-up candidates;
then the same selection through real sealed folders on disk (harness.driver.regress),
where a folder whose seal does not verify is left out and named."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from regression_helpers import HOST, T0, sealed_run

from harness.base.states import Status
from harness.config.references import NAMES
from harness.driver.regress import choose, read_candidate, scan, seal
from harness.judge.comparable import (
    DIRECTIONS,
    HOST_VOLATILE,
    NOT_CALLED,
    Candidate,
    Confirmation,
    Junk,
    Unverified,
    confirmation,
    confirmations,
    figure_calls,
    host_identity,
    regressed,
    select,
    uncalled,
)
from harness.judge.regression import MIN_BASELINE, Movement, Worse
from harness.judge.regressionfile import read_sealed
from harness.measure.runfolder.manifest import verify_folder


def cand(n: int, *, control: str = "c", status: Status | None = Status.ACCEPTED,
         image: str | None = "sha256:aa", host: str | None = "h1",
         duration: float = 100.0, **figures: float) -> Candidate:
    return Candidate(f"{control}-{n:03d}", control, status, image, host,
                     T0 + timedelta(minutes=n), f"{n:064x}",
                     {"duration_s": duration, **figures})


# ---- the figure table --------------------------------------------------------------------


def test_every_figure_the_perflog_keeps_has_a_direction_or_is_no_measure() -> None:
    """A new figure in harness.config.references must get its direction here, or it would
    silently never be called."""
    assert set(NAMES) == set(DIRECTIONS) | set(NOT_CALLED)
    assert not set(DIRECTIONS) & set(NOT_CALLED)


@pytest.mark.parametrize(("figure", "worse"), [
    ("duration_s", Worse.HIGHER), ("lock_wait_s", Worse.HIGHER),
    ("lock_hold_s", Worse.HIGHER), ("model_load_s", Worse.HIGHER),
    ("model_load_gib", Worse.HIGHER), ("graph_capture_gib", Worse.HIGHER),
    ("kv_cache_gib", Worse.LOWER), ("kv_tokens", Worse.LOWER),
    ("max_concurrency", Worse.LOWER), ("max_model_len", Worse.LOWER),
    ("energy_j", Worse.HIGHER), ("memory_peak_bytes", Worse.HIGHER),
])
def test_the_table_says_which_way_a_figure_gets_worse(figure, worse) -> None:
    assert DIRECTIONS[figure] == worse


def test_a_smaller_kv_cache_is_a_regression_and_a_longer_run_too() -> None:
    baseline = [cand(i, duration=100.0 + i % 3, kv_cache_gib=10.0 + (i % 3) / 100)
                for i in range(20)]
    now = cand(30, duration=150.0, kv_cache_gib=8.0)
    calls = {c.figure: c for c in figure_calls([now], baseline)}
    assert calls["duration_s"].result.movement == Movement.REGRESSION
    assert calls["kv_cache_gib"].result.movement == Movement.REGRESSION
    assert calls["kv_cache_gib"].recent_median == 8.0
    assert calls["kv_cache_gib"].baseline_median == pytest.approx(10.01)
    better = cand(31, duration=50.0, kv_cache_gib=12.0)
    assert regressed(figure_calls([better], baseline)) == []


def test_figures_without_a_direction_are_named_not_called() -> None:
    run = cand(1, exit_code=0.0, cpu_pct_mean=40.0, new_figure=0.3)
    assert uncalled(run.figures) == {
        "cpu_pct_mean": NOT_CALLED["cpu_pct_mean"], "exit_code": "an outcome, not a measure",
        "new_figure": "no direction in harness.judge.comparable.DIRECTIONS"}
    assert [c.figure for c in figure_calls([run], [cand(2)])] == ["duration_s"]


# ---- the host identity ---------------------------------------------------------------------


def test_one_host_has_one_identity_across_runs_and_reboots() -> None:
    later = {**HOST, "boot_id": "b2", "taken_at": "2026-12-02T01:00:00Z", "uptime_s": 99.0}
    assert host_identity(HOST) == host_identity(later)
    assert {"taken_at", "uptime_s", "boot_id"} == HOST_VOLATILE


def test_another_kernel_or_engine_is_another_host() -> None:
    assert host_identity(HOST) != host_identity({**HOST, "kernel": {"release": "6.19"}})
    assert host_identity(HOST) != host_identity({**HOST, "docker": {"version": "27.0"}})
    assert host_identity(HOST) != host_identity({**HOST, "hostname": "other"})


@pytest.mark.parametrize("bad", [None, [], {}, "host", 3])
def test_what_is_no_snapshot_has_no_identity(bad) -> None:
    assert host_identity(bad) is None


# ---- the comparable runs -------------------------------------------------------------------


def test_only_earlier_accepted_runs_of_the_same_control_image_and_host_count() -> None:
    run = cand(50)
    found = [
        cand(1), cand(2),
        cand(3, status=Status.REFUSED), cand(4, status=Status.FAILED), cand(5, status=None),
        cand(6, image="sha256:bb"), cand(7, host="h2"),
        cand(8, control="d"),  # named like a run of c, its record says d: junk
        cand(60),  # sealed after the run: never its baseline
        Unverified("c-009", "its seal does not verify (run.json: changed)"),
        run,
    ]
    got = select(run, found)
    assert [c.run_id for c in got.baseline] == ["c-002", "c-001"]  # newest first
    assert [(u.run_id, u.kind) for u in got.left_out] == [
        ("d-008", Junk.ANOTHER_CONTROL), ("c-009", Junk.SEAL_FAILS)]
    assert got.other == 6 and got.skipped == {"another control": 1, "seal fails": 1}


def test_a_run_of_unknown_image_or_host_is_compared_with_nothing() -> None:
    for run in (cand(50, image=None), cand(50, host=None)):
        assert select(run, [cand(1, image=None, host=None), cand(2)]).baseline == ()


def test_the_baseline_is_the_newest_runs_and_a_rerun_uses_its_originals() -> None:
    found = [cand(i) for i in range(30)]
    assert [c.run_id for c in select(cand(40), found, limit=3).baseline] == [
        "c-029", "c-028", "c-027"]
    original, rerun = cand(20), cand(45)
    got = select(original, [*found, rerun], exclude=[rerun.run_id])
    assert len(got.baseline) == 20 and got.baseline[0].run_id == "c-019"


# ---- the confirmation ----------------------------------------------------------------------


R, N, UP, S = (Movement.REGRESSION, Movement.NO_CHANGE, Movement.IMPROVEMENT,
               Movement.INSUFFICIENT)


@pytest.mark.parametrize(("first", "pair", "rerun", "expected"), [
    (R, R, R, Confirmation.CONFIRMED),
    (R, R, N, Confirmation.UNCONFIRMED),  # one extreme run carried the pair: a one-off
    (R, N, R, Confirmation.UNCONFIRMED),
    (R, N, N, Confirmation.UNCONFIRMED),
    (R, UP, UP, Confirmation.UNCONFIRMED),
    (R, S, S, Confirmation.UNCONFIRMED),
    (N, R, R, None),
    (S, S, S, None),
    (UP, R, R, None),
])
def test_the_confirmation_decision(first, pair, rerun, expected) -> None:
    assert confirmation(first, pair, rerun) == expected


def noisy_baseline(n: int) -> list[Candidate]:
    return [cand(i, duration=100.0 + (i * 7) % 5) for i in range(n)]


def test_a_slow_run_confirmed_by_a_slow_rerun_and_not_by_a_normal_one() -> None:
    """Against 20 earlier runs a run alone above them all is p = 1/21 <= 0.05; with its
    rerun above them too p = 1/231, and with a normal rerun it is no call at all."""
    baseline = noisy_baseline(20)
    slow, slow_again, normal = cand(30, duration=150.0), cand(31, duration=149.0), \
        cand(32, duration=101.0)
    alone = figure_calls([slow], baseline)
    assert regressed(alone) == ["duration_s"]
    assert alone[0].result.p_value == pytest.approx(1 / 21)

    def confirmed(rerun: Candidate) -> dict:
        return confirmations(alone, figure_calls([slow, rerun], baseline),
                             figure_calls([rerun], baseline))

    assert confirmed(slow_again) == {"duration_s": Confirmation.CONFIRMED}
    assert confirmed(normal) == {"duration_s": Confirmation.UNCONFIRMED}


def test_an_extreme_run_with_a_high_normal_rerun_is_no_confirmation() -> None:
    """As a real night had it (tests/integration/test_night_regression.py): one run 17x
    slower, its rerun normal but above 17 of 21 earlier runs. The pair alone is called a
    regression (p = 0.04); the rerun alone is not, so nothing is confirmed."""
    durations = [0.279, 0.24, 0.224, 0.24, 0.246, 0.223, 0.243, 0.212, 0.253, 0.23, 0.275,
                 0.235, 0.241, 0.257, 0.25, 0.245, 0.239, 0.237, 0.236, 1.753, 1.739]
    baseline = [cand(i, duration=d) for i, d in enumerate(durations)][::-1]  # newest first
    slow, normal = cand(40, duration=4.237), cand(41, duration=0.266)
    alone = figure_calls([slow], baseline)
    pair = figure_calls([slow, normal], baseline)
    assert regressed(alone) == regressed(pair) == ["duration_s"]
    assert confirmations(alone, pair, figure_calls([normal], baseline)) == {
        "duration_s": Confirmation.UNCONFIRMED}


def test_a_run_alone_is_never_called_below_nineteen_earlier_runs() -> None:
    """One recent run against n earlier ones can reach no p below 1/(n+1): with the
    minimum baseline of 9 the answer is no change, however slow; below 9, insufficient
    data, and then nothing is scheduled."""
    slow = cand(99, duration=10_000.0)
    for n, movement in [(MIN_BASELINE - 1, Movement.INSUFFICIENT),
                        (MIN_BASELINE, Movement.NO_CHANGE), (18, Movement.NO_CHANGE),
                        (19, Movement.REGRESSION)]:
        [got] = figure_calls([slow], noisy_baseline(n))
        assert got.result.movement == movement, (n, got)
    assert confirmations(figure_calls([slow], noisy_baseline(5)), [], []) == {}


# ---- through sealed folders on disk ----------------------------------------------------------


def test_a_sealed_folder_is_read_as_its_seal_vouches(tmp_path) -> None:
    folder = sealed_run(tmp_path, 1, duration=2.5)
    got = read_candidate(folder)
    assert isinstance(got, Candidate), got
    assert (got.control, got.status, got.image_id) == ("c", Status.ACCEPTED, "sha256:aa")
    assert got.host == host_identity(HOST)
    assert got.figures["duration_s"] == 2.5 and got.figures["lock_hold_s"] == 2.6
    assert "kv_cache_gib" not in got.figures  # no value: no figure
    assert got.digest == hashlib.sha256((folder / "SHA256SUMS").read_bytes()).hexdigest()


def test_a_folder_whose_seal_fails_is_left_out_and_named(tmp_path) -> None:
    good = [sealed_run(tmp_path, i) for i in range(3)]
    bad = sealed_run(tmp_path, 3)
    (bad / "run.json").chmod(0o644)
    (bad / "run.json").write_text((bad / "run.json").read_text().replace('"c"', '"c" '))
    never = sealed_run(tmp_path, 4)
    (never / "SHA256SUMS").unlink()
    (tmp_path / "c-20261201T230000Z-deadbeef").symlink_to(good[0])  # a link: no run folder
    listing = scan(tmp_path, "c")
    assert [u.run_id for u in listing.junk] == ["c-20261201T230000Z-deadbeef"]
    found = [read_candidate(p) for p in listing.folders]
    assert [f.run_id for f in found] == [p.name for p in (never, bad, *good[::-1])]
    assert isinstance(found[0], Unverified) and "SHA256SUMS: no-manifest" in found[0].why
    assert found[0].kind == Junk.UNSEALED
    assert isinstance(found[1], Unverified) and "run.json: changed" in found[1].why
    got = choose(read_candidate(sealed_run(tmp_path, 9)), tmp_path)
    assert [c.run_id for c in got.baseline] == [p.name for p in good[::-1]]
    assert [u.run_id for u in got.left_out] == [
        "c-20261201T230000Z-deadbeef", never.name, bad.name]
    assert got.skipped == {"not a folder": 1, "seal fails": 1, "unsealed": 1}


def test_another_host_on_disk_is_not_comparable(tmp_path) -> None:
    sealed_run(tmp_path, 1, host={**HOST, "kernel": {"release": "7.0"}})
    sealed_run(tmp_path, 2, image="sha256:bb")
    sealed_run(tmp_path, 3, status="refused")
    kept = sealed_run(tmp_path, 4, host={**HOST, "boot_id": "after-a-reboot"})
    run = read_candidate(sealed_run(tmp_path, 9))
    got = choose(run, tmp_path)
    assert [c.run_id for c in got.baseline] == [kept.name] and got.other == 3
    assert got.skipped == {}


def test_the_addendum_is_sealed_verifies_and_a_changed_byte_fails(tmp_path) -> None:
    from harness.driver.regress import call_run

    for i in range(20):
        sealed_run(tmp_path, i, duration=1.0 + (i % 4) / 100)
    slow = sealed_run(tmp_path, 30, duration=2.0)
    called = call_run(slow, tmp_path)
    assert called.regressions == ["duration_s", "lock_hold_s"]
    folder = seal(called, slow, T0 + timedelta(hours=3), rerun={"scheduled": False,
                                                              "why": "test"})
    assert folder.parent.name == "addenda" and folder.name.endswith("-regression")
    assert verify_folder(slow) == []
    doc = read_sealed(slow)
    assert doc["schema"] == "harness.regression/v1" and doc["run_id"] == slow.name
    assert doc["recent"] == [{"run_id": slow.name, "seal_digest": hashlib.sha256(
        (slow / "SHA256SUMS").read_bytes()).hexdigest()}]
    assert len(doc["baseline"]) == 20 and doc["regressions"] == ["duration_s", "lock_hold_s"]
    duration = doc["figures"]["duration_s"]
    assert duration["movement"] == "regression" and duration["recent_median"] == 2.0
    assert duration["baseline"] == 20 and duration["recent"] == 1
    assert duration["p_value"] == pytest.approx(1 / 21) and duration["shift"] > 0.9
    target = folder / "regression.json"
    folder.chmod(0o755)
    target.chmod(0o644)
    target.write_bytes(target.read_bytes().replace(b'"regression"', b'"regressioN"', 1))
    assert [p.kind for p in verify_folder(slow)] == ["changed"]
    assert read_sealed(slow) is None  # a changed addendum is no call
