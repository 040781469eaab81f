"""One campaign driver, used by `harness run`, `harness night`, `harness rerun` and, next, a
Slurm executor.

- `policy`: the stop policy and the retry rule, as pure functions;
- `plan`: what one launch is (`LaunchRequest`) and what came of it (`Outcome`), the
  `Executor` and `Recorder` protocols, and the in-memory plan of `harness run`;
- `drive`: `run_one` (the one way to launch a control and record its outcome) and
  `drive` (the loop: next launch, run it, ask the stop policy);
- `local`: the executor that runs a control here, under the GPU lock, in Docker.

Nothing is imported here, so the pure modules stay importable without the pipeline.
"""
