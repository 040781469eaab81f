"""A run as explicit stages (ReFrame's pipeline), each in its own module:

preflight -> launch (lock, container, release) -> post -> finish (judge, record, seal)

Every stage has one signature, `run(ctx) -> list[Reason]` (`harness.pipeline.stage`), and
is recorded by name in run.json's `stages`. `harness.pipeline.run.run_control` strings
them together; `finish` always runs, whatever a stage did.
"""
