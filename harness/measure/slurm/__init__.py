"""Pieces of the Slurm executor (issue 13), below the campaign driver that will use them.

- `job`: the sbatch argv and the job script of one control attempt, pure and golden-tested;
- `query`: parsers of squeue, sacct and jobcomp output into a small state enum, pure;
- `state`: a remote row's journal transitions, resume after `kill -9` without duplicate
  jobs, the submit window and the poll back-off, pure;
- `calls`: the thin shell: write the script and sbatch it, one batched poll (squeue plus
  sacct or the jobcomp file), scancel; each call with a timeout, failures classified.

Slurm's word is never a run's status: a run's status comes from its sealed evidence; Slurm
only says where a job is, and when to start waiting for the seal. Nothing is imported here.
"""
