"""`harness doctor`'s probes: the facts about this host that harness.judge.doctor judges.

`host` reads the engine's images, device nodes, the user and paths; `gpumap` the GPU map
and gres.conf; `run.run_checks` gathers them all and asks the judge for each line.
"""
