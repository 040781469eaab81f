"""A run as explicit stages (ReFrame's pipeline), each in its own module:

preflight -> launch (lock, container, release) -> post -> finish (judge, record, seal)

Every stage has one signature, `run(ctx, keep) -> result` (`harness.pipeline.stage`): it
reads the run's context and returns a frozen result (`harness.pipeline.results`), which
the stage runner alone stores in the context and records by name in run.json's `stages`.
`harness.pipeline.run.run_control` strings them together; `finish` always runs, whatever
a stage did, and returns how the run ended (`Sealed`).
"""
