"""Layer 1, base: what every layer above uses and that knows nothing of runs' stages.

The evidence's vocabulary (a reason, a status, a run id, a safe name, the GPU slot), the
rule catalogue, errors and their exit codes, atomic writes, bounded reading of outside
text, hashing, time, signals and the terminal. Nothing here imports from another layer.
"""
