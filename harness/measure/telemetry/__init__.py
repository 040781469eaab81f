"""Telemetry sampled while a container runs: plug-in sources written to telemetry.jsonl."""
