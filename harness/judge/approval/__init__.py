"""Approvals: a reviewed source seal, bound to its gate record, that a run must match."""
