"""A run as explicit stages (ReFrame's pipeline): preflight -> launch -> post -> finish.
Each is `run(ctx, keep) -> result` (`pipeline.stage`); `finish` always runs and seals."""
