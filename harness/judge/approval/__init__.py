"""Approvals: a reviewed source seal, bound to its gate record, that a run must match.

`record` is the document and the pure matching, `signature` what a signature file must be
and what checking one found, `gates` the reading of a gate record, `check` the run-time
decisions, `issue` what `harness approve` may write, `early` the refusal before any folder.
harness.probe.approval gathers the facts they decide on (git, ssh-keygen) and writes.
"""
