"""Witnesses: each kind of evidence about what ran is a small plug-in with one interface.

A witness observes; it never judges. Each module exposes `collect(...) -> dict`, whose
result the pipeline writes to one JSON file in the run folder.
"""
