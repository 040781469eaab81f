"""The hook at the end of a night (issue 25, part 6): `night.after_night` bundles the night
when asked, builds the payload from its summary.json (`payload`, pure) and sends it to the
campaign's command and webhook (`send`), credentials from the environment only."""
