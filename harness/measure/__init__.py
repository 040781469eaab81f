"""Measure: everything that touches the host, the engine or a run folder while a run
happens. Measuring a process is kept apart from judging it: nothing here decides whether a
run is accepted."""
