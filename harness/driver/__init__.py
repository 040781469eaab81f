"""Campaigns of runs: one campaign loop (`drive`) for `harness run`, `night` and `rerun`,
over any executor (`local` here, `slurm` as Slurm jobs). Nothing is imported here, so
the pure modules stay importable without the pipeline."""
