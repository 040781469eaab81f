"""Layer 1, base: what every layer above uses and that knows nothing of runs' stages.
Nothing here imports from another layer.
"""
