"""The Slurm executor's pieces on the measuring side, below the driver that uses them
(harness.driver.slurm).

- `values`: the checks every value of a job passes before it is used, pure;
- `job`: the sbatch argv of one control attempt (or `same_host` group): its idempotency
  token, its time limit and signal lead, pure and golden-tested;
- `script`: the batch script that job runs (`harness run`, then the export), pure and
  golden-tested;
- `query`: parsers of squeue, sacct and jobcomp output into a small state enum, pure;
- `follow`: how the controller follows a job in flight (poll pace, missing jobs, retries),
  pure;
- `identity`: what a run inside a job records about that job, from its environment, pure;
- `gres`: which device files gres.conf gives a node's GPUs, pure;
- `calls`: the thin shell: write the script and sbatch it, one batched poll (squeue plus
  sacct or the jobcomp file), scancel; each call with a timeout, failures classified.

Slurm's word is never a run's status: a run's status comes from its sealed evidence; Slurm
only says where a job is, and when to start waiting for the seal. Nothing is imported here.
"""
