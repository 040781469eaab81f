"""`harness doctor`'s probes (`host`, `gpumap`; `run.run_checks` gathers them all): the
facts about this host that `judge.doctor` judges."""
