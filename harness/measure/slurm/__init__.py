"""The Slurm executor's pieces on the measuring side, pure except `calls`, the thin shell.

Slurm's word is never a run's status: that comes from its sealed evidence."""
