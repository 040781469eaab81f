"""Gate records: the CPU gates a campaign lists, run in order, sealed as a folder."""
