"""One stop, delivered twice (Slurm signals every process of a job, and the job script
forwards its own TERM too), must not cut short the stop and seal the first one started."""

from __future__ import annotations

import os
import signal

import pytest

from harness.execute import Interrupted
from harness.pipeline.run import pending_signal, signals_deferred, signals_interrupt


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
