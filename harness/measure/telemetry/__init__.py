"""Telemetry sampled while a container runs: each source is a small plug-in with one
interface (`source.Source`), the sampler calls them at a set interval and writes
`telemetry.jsonl` into the run folder, sealed with it."""
