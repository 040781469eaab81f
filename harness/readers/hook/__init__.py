"""The hook at the end of a night: `night.after_night` bundles the night when asked, builds
the payload from its summary.json (`payload`, pure) and sends it (`send`)."""
