"""Approvals on this host: `issue` writes one (`harness approve`), `check` asks whether a run
may run under one. Both gather what harness.judge.approval decides on: git's word on the
checkout, OpenSSH's check of a signature, the approval's bytes, read once."""
