"""Layer 4, judge: pure decisions over evidence; they never launch anything.

The verdict, the finalizers that compare what the engine was observed to be, the
post-steps, gate records, approvals, the diff of two runs and the host doctor.
"""
