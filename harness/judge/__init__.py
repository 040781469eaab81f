"""Layer 4, judge: pure decisions over evidence; they never launch anything.

What they decide on from the live host (a gate's command, git, ssh-keygen, Docker) is
gathered by harness.probe, one layer up, and handed in as typed values."""
