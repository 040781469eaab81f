"""Upstream tier: the harness's encoder, trace and finalizer against vLLM from PyPI."""
