"""One stop, delivered twice (Slurm signals every process of a job, and the job script
forwards its own TERM too), must not cut short the stop and seal the first one started;
a second Ctrl-C, a person insisting, hurries it. SIGHUP stops a run as SIGTERM does."""

from __future__ import annotations

import os
import signal

import pytest

from harness.base.signals import (
    Interrupted,
    exit_code,
    install,
    on_second_interrupt,
    pending_signal,
    received,
    signals_deferred,
    signals_interrupt,
)


def test_only_the_first_signal_of_a_scope_raises():
    with signals_interrupt():
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # the repeat: kept, not raised
        assert pending_signal() == "SIGTERM"
        with signals_deferred():
            assert pending_signal() is None
    with signals_interrupt(), pytest.raises(Interrupted):  # a new scope raises again
        os.kill(os.getpid(), signal.SIGTERM)


def test_an_inner_scope_leaves_the_outer_one_as_it_was():
    with signals_interrupt():
        with signals_interrupt(), pytest.raises(Interrupted):  # one run of a night
            os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(Interrupted):  # the night itself can still be stopped
            os.kill(os.getpid(), signal.SIGINT)


def test_a_hang_up_stops_a_run_as_sigterm_does():
    with signals_interrupt(), pytest.raises(Interrupted, match="SIGHUP"):
        os.kill(os.getpid(), signal.SIGHUP)


def test_a_hang_up_ignored_by_nohup_stays_ignored():
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with signals_interrupt():
            os.kill(os.getpid(), signal.SIGHUP)  # nothing raised: the operator asked for it
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_a_second_ctrl_c_runs_the_hurry_action_and_a_repeated_term_does_not():
    hurried: list[str] = []
    with signals_interrupt():
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
        with on_second_interrupt(lambda: hurried.append("kill")):
            os.kill(os.getpid(), signal.SIGTERM)  # Slurm's repeat: kept pending only
            assert hurried == []
            os.kill(os.getpid(), signal.SIGINT)  # a person insisting
            assert hurried == ["kill"]
        with on_second_interrupt(lambda: hurried.append("late")):  # asked before the wait
            pass
    assert hurried == ["kill", "late"]


def test_a_ctrl_c_makes_the_exit_code_130():
    old = signal.getsignal(signal.SIGINT)
    try:
        install()
        assert exit_code(1) == 1
        with signals_interrupt(), pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
        assert received() == "SIGINT" and exit_code(1) == 130
        install()  # the next command in this process starts afresh
        assert received() is None and exit_code(0) == 0
    finally:
        signal.signal(signal.SIGINT, old)
