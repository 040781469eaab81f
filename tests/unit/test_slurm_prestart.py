"""The pure decisions of a prestarting Slurm night: which runs a job carries, who owns a
run's claim, when the run before stops the night, and which seals mean "never launched"."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from harness.base.catalogue import SLURM_NIGHT_STOPPED, SLURM_NOT_CLAIMED, SLURM_NOT_INTACT
from harness.base.errors import InvalidInput
from harness.base.reason import Reason
from harness.base.states import Status
from harness.base.stoprule import stops
from harness.driver.drive import next_launch, wants_more
from harness.driver.plan import LaunchRequest, Outcome
from harness.driver.policy import stop_reason
from harness.driver.slurmjobs import claim_decision, never_launched
from harness.measure.slurm import claim

RUNS = Path("/r")


class Source:
    """A plan of launches (a group is one launch): gives each once, skipping busy slots."""

    def __init__(self, launches: list[tuple[int, ...]]) -> None:
        self.launches = launches
        self.asked: list[frozenset[int]] = []

    def next_launches(self, busy=frozenset(), *, together=False):
        self.asked.append(busy)
        for launch in self.launches:
            if not set(launch) & busy:
                self.launches.remove(launch)
                return tuple(LaunchRequest(f"c{i}", RUNS / f"c{i}-x", plan_index=i)
                             for i in launch)
        return "done"


def _indexes(launches) -> list[list[int]]:
    assert not isinstance(launches, str), launches
    return [[r.plan_index for r in launch] for launch in launches]


@pytest.mark.parametrize("taken, per_job, more", [(1, 1, False), (1, 4, True), (3, 4, True),
                                                  (4, 4, False), (9, 4, False)])
def test_a_job_takes_launches_up_to_its_bound(taken, per_job, more) -> None:
    assert wants_more(taken, per_job) is more


def test_a_job_carries_the_next_controls_and_never_splits_a_group() -> None:
    source = Source([(0,), (1, 2, 3), (4,), (5,)])
    got = next_launch(source, frozenset(), together=True, per_job=2)
    assert _indexes(got) == [[0], [1, 2, 3]]  # the group came whole
    assert source.asked[1] == {0}  # a launch taken is busy for the next ask
    assert _indexes(next_launch(source, frozenset(), together=True, per_job=2)) == [[4], [5]]


def test_one_run_per_job_asks_the_source_once() -> None:
    source = Source([(0,), (1,)])
    assert _indexes(next_launch(source, frozenset(), together=True, per_job=1)) == [[0]]
    assert len(source.asked) == 1


def test_a_plan_that_ends_ends_the_job_and_why_is_kept_for_the_next_ask() -> None:
    source = Source([(0,)])
    assert _indexes(next_launch(source, frozenset(), together=True, per_job=4)) == [[0]]
    assert next_launch(source, frozenset(), together=True, per_job=4) == "done"


@pytest.mark.parametrize("made, withdraws", [(claim.Claim.MADE, True),
                                             (claim.Claim.TAKEN, False),
                                             (claim.Claim.FAILED, False)])
def test_the_controller_withdraws_only_a_run_whose_claim_it_made(made, withdraws) -> None:
    assert claim_decision(made) is withdraws


def test_exactly_one_side_makes_a_claim(tmp_path) -> None:
    claims = str(tmp_path / "drop" / "claims")
    assert claim.take(claims, "ctl-1")[0] is claim.Claim.MADE  # parents made too
    assert claim.take(claims, "ctl-1")[0] is claim.Claim.TAKEN
    assert claim.take(claims, "ctl-2")[0] is claim.Claim.MADE


def test_a_claim_the_drop_cannot_hold_is_failed_not_raised(tmp_path) -> None:
    (tmp_path / "drop").write_text("a file where the drop should be")
    assert claim.take(str(tmp_path / "drop" / "claims"), "ctl-1")[0] is claim.Claim.FAILED


@pytest.mark.parametrize("run_id", ["..", "a/b", "", "a\nb", "x" * 101, "/etc"])
def test_a_claim_path_is_built_from_checked_ids_only(run_id) -> None:
    with pytest.raises(InvalidInput):
        claim.claim_path("/drop/claims", run_id)


def test_a_claim_is_never_made_through_a_symlinked_claims_folder(tmp_path) -> None:
    """A claims folder pointing at a host's own disk would let the controller and the host
    each make "the" claim: both sides fail alike, and nothing is made where it points."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "drop").mkdir()
    (tmp_path / "drop" / "claims").symlink_to(elsewhere)
    made, why = claim.take(str(tmp_path / "drop" / "claims"), "ctl-1")
    assert made is claim.Claim.FAILED and "symlink" in why
    assert not any(elsewhere.iterdir())


def test_a_file_where_the_claims_folder_should_be_is_failed_not_taken(tmp_path) -> None:
    """Taken would tell the controller the host launched it, and the host that the night
    stopped: neither is known."""
    (tmp_path / "drop").mkdir()
    (tmp_path / "drop" / "claims").write_text("")
    assert claim.take(str(tmp_path / "drop" / "claims"), "ctl-1")[0] is claim.Claim.FAILED


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_claims_folder_of_another_user_is_failed(tmp_path) -> None:
    """Its owner could remove the controller's claim, and the run would launch after a
    stop; root's is trusted as root is."""
    claims = tmp_path / "drop" / "claims"
    claims.mkdir(parents=True)
    os.chown(claims, 4242, 4242)
    made, why = claim.take(str(claims), "ctl-1")
    assert made is claim.Claim.FAILED and "uid 4242" in why and not any(claims.iterdir())
    os.chown(claims, 0, 0)
    assert claim.take(str(claims), "ctl-1")[0] is claim.Claim.MADE


def test_the_host_stops_where_the_controller_would() -> None:
    """The host asks `base.stoprule.stops` of the run before (tested there); for a remote
    run the controller's `stop_reason` agrees with it."""
    for policy, status, code in [("stop-on-refusal", Status.REFUSED, 1),
                                 ("continue", Status.FAILED, 3),
                                 ("stop-on-failure", Status.REFUSED, 1),
                                 ("stop-on-failure", Status.ACCEPTED, 0)]:
        outcome = Outcome(RUNS / "r", status, code, remote=True)
        assert (stops(policy, status, code) is None) is (stop_reason(policy, outcome) is None)
    with pytest.raises(InvalidInput):
        stops("sometimes", Status.ACCEPTED, 0)


def _env(**extra: str) -> dict[str, str]:
    return {claim.CLAIMS_ENV: "/drop/claims", claim.POLICY_ENV: "stop-on-refusal", **extra}


def test_the_handover_names_the_run_before_in_the_same_runs_folder() -> None:
    got = claim.handover_of(_env(**{claim.AFTER_RUN_ENV: "/runs/a-1",
                                 claim.AFTER_DONE_ENV: "/tmp/x/0.done"}), Path("/runs/b-2"))
    assert got is not None and got.waits
    assert got.after_run == Path("/runs/a-1") and got.after_done == Path("/tmp/x/0.done")
    assert claim.handover_of({}, Path("/runs/b-2")) is None  # not a claiming job
    first = claim.handover_of(_env(), Path("/runs/b-2"))
    assert first is not None and not first.waits
    cont = claim.handover_of(_env(**{claim.POLICY_ENV: "continue",
                                  claim.AFTER_RUN_ENV: "/runs/a-1"}), Path("/runs/b-2"))
    assert cont is not None and not cont.waits  # under continue no verdict is awaited


def test_a_run_holding_the_lock_says_so_with_an_empty_file(tmp_path) -> None:
    """The job's shell starts the next member once this file exists: a mark, never a line
    of the run's output to parse, and one that cannot be made never fails the run."""
    mark = tmp_path / "0.locked"
    got = claim.handover_of(_env(**{claim.LOCKED_ENV: str(mark)}), Path("/runs/b-2"))
    assert got is not None and got.locked == mark and not mark.exists()
    claim.say_locked(got)
    assert mark.is_file() and mark.stat().st_size == 0
    claim.say_locked(claim.Handover("/drop/claims", "continue",
                                    locked=tmp_path / "no-such" / "x.locked"))  # no raise
    with pytest.raises(InvalidInput):
        claim.handover_of(_env(**{claim.LOCKED_ENV: "relative/0.locked"}), Path("/runs/b-2"))


@pytest.mark.parametrize("planted", ["fifo", "symlink"])
def test_a_mark_is_made_only_where_nothing_is(tmp_path, planted) -> None:
    """A FIFO planted at the mark would block its open with the GPU lock held; a symlink
    would make a file where it points. Neither is opened: the mark is best effort."""
    mark, target = tmp_path / "0.locked", tmp_path / "target"
    if planted == "fifo":
        os.mkfifo(mark)
    else:
        mark.symlink_to(target)
    said = threading.Thread(target=claim.say_locked,
                            args=(claim.Handover("/drop/claims", "continue", locked=mark),),
                            daemon=True)
    said.start()
    said.join(5)
    if said.is_alive():  # blocked on the FIFO: give it a reader, then fail
        os.close(os.open(mark, os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("say_locked blocked on a planted FIFO")
    assert not target.exists()


def _waits(done: Path) -> bool:
    """Whether wait_done(done) still waits after a moment."""
    waiting = threading.Thread(target=claim.wait_done, args=(done, 0.01), daemon=True)
    waiting.start()
    waiting.join(1)
    return waiting.is_alive()


def test_the_wait_for_the_run_before_ends_where_its_mark_can_never_be_made(tmp_path) -> None:
    """A done file in no folder (the shell gone, or a hostile value), or one no lookup can
    reach, ends the wait rather than holding the GPU lock until the job's time limit; what
    comes next is the seal of the run before, and none launches nothing."""
    (tmp_path / "file").write_text("")
    for done in (tmp_path / "gone" / "0.done", tmp_path / "file" / "0.done",
                 tmp_path / ("x" * 300) / "0.done"):
        assert not _waits(done), done
    os.mkfifo(tmp_path / "fifo.done")  # there: never opened
    assert not _waits(tmp_path / "fifo.done")


def test_the_wait_for_the_run_before_lasts_until_the_shell_makes_its_mark(tmp_path) -> None:
    done = tmp_path / "0.done"
    waiting = threading.Thread(target=claim.wait_done, args=(done, 0.01), daemon=True)
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive()
    done.touch()
    waiting.join(5)
    assert not waiting.is_alive()


@pytest.mark.parametrize("extra", [
    {claim.AFTER_RUN_ENV: "/elsewhere/a-1"}, {claim.AFTER_RUN_ENV: "/runs/../etc"},
    {claim.AFTER_RUN_ENV: "/runs/b-2"}, {claim.AFTER_RUN_ENV: "/runs/a b"},
    {claim.POLICY_ENV: "stop-on-everything"}, {claim.CLAIMS_ENV: "relative/claims"},
    {claim.CLAIMS_ENV: "/etc"}, {claim.CLAIMS_ENV: "/drop/claims/../x/claims"},
    {claim.LOCKED_ENV: "/home/u/.profile"}, {claim.LOCKED_ENV: "/tmp/x/0.locked\n"},
    {claim.LOCKED_ENV: "/tmp/x/-1.locked"},
], ids=["other-folder", "dotdot", "itself", "bad-name", "policy", "relative-claims",
        "claims-any-folder", "claims-dotdot", "mark-any-file", "mark-control",
        "mark-not-member"])
def test_a_hostile_handover_is_refused(extra) -> None:
    with pytest.raises(InvalidInput):
        claim.handover_of(_env(**extra), Path("/runs/b-2"))


@pytest.mark.parametrize("status, rules, never", [
    (Status.REFUSED, [SLURM_NOT_CLAIMED], True),
    (Status.REFUSED, [SLURM_NIGHT_STOPPED], True),
    (Status.REFUSED, [SLURM_NOT_CLAIMED, SLURM_NOT_INTACT], False),  # also judged: launched
    (Status.REFUSED, [], False),
    (Status.ACCEPTED, [SLURM_NOT_CLAIMED], False),
], ids=["claim-taken", "night-stopped", "mixed", "no-reason", "accepted"])
def test_only_a_seal_that_launched_nothing_is_not_run(status, rules, never) -> None:
    outcome = Outcome.of(RUNS / "r", status, [Reason(r, "x") for r in rules])
    assert never_launched(outcome) is never
