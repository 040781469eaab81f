"""Layer 3, measure: everything that touches the host, the engine or a run folder while a
run happens (BenchExec's executor: measuring a process is kept apart from judging it).

The Docker engine, the host's identity, the docker argv (`vector`), the process and its
witnesses, logs and metrics, the GPU lock, images, seals, the run folder's layout and
record, and Slurm's calls. Nothing here decides whether a run is accepted.
"""
