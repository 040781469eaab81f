"""Witnesses of the launch: what the launcher process and the container were, as seen from
the host. Each measures and never judges; `harness.pipeline.evidence` gathers them at
their phase and `harness.judge.witnessed` decides what they vouch for.
"""
