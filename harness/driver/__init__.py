"""Campaigns of runs: one campaign loop for `harness run`, `harness night` and `harness rerun`.

- `policy`: the stop policy and the retry rule, as pure functions;
- `plan`: what one launch is (`LaunchRequest`), what came of it (`Outcome`), the shapes
  the loop walks (`LaunchSource`, `Executor`, `Recorder`) and `harness run`'s plan;
- `drive`: `drive`, the one campaign loop (next launches, start them, record each
  outcome, ask the stop policy), and `run_one` (one launch recorded around the executor);
- `local`: the executor that runs a control here, under the GPU lock, in Docker (a window
  of one); `slurm` and `watch`: the one that runs each launch as a Slurm job;
- `night`: the journal, its rules, and a night's walk; `rerun`, `schedule`.

Nothing is imported here, so the pure modules stay importable without the pipeline.
"""
