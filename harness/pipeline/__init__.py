"""A run as explicit stages (ReFrame's pipeline), each in its own module:

preflight -> lock -> launch -> release -> post-steps -> seal

`harness.pipeline.run.run_control` strings them together.
"""
