"""Layer 4, judge: pure decisions over evidence; they never launch anything.

The verdict, the finalizers that compare what the engine was observed to be, the
post-steps, gate records, approvals, the diff of two runs and the host doctor. What they
decide on from the live host (a gate's command, git, ssh-keygen, the Docker engine) is
gathered by harness.probe, one layer up, and handed in as typed values.
"""
