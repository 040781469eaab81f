"""Facts about the host a run happened on."""
