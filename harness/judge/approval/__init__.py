"""Approvals: a reviewed source seal, bound to its gate record, that a run must match.

`record` is the document and the pure matching, `sign` the OpenSSH signatures (shared
with evidence bundles), `gates` the reading of a gate record, `check` the run-time check.
"""
