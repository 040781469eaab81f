"""Every name in a run folder, defined once, so a reader, a writer and a checker cannot
drift apart (README.md describes what each file holds).

Names shared with the container are spelled once, in the stdlib-only
`harness.instrument.harness_observer.interface`, and only named here."""

from __future__ import annotations

from harness.instrument.harness_observer import interface

# -- the record and the seal ----------------------------------------------------------------
RECORD = "run.json"
SUMS = "SHA256SUMS"
ADDENDA = "addenda"
OWNER = "harness.json"
RECOVERED = "recovered.json"

# -- what the pipeline writes ----------------------------------------------------------------
PREFLIGHT = "preflight.json"
VECTOR = "docker-vector.json"
LAUNCHER_WITNESS = "launcher-witness.json"
CONTAINER_INSPECT = "container-inspect.json"
CONTAINER_CID = "container.cid"
HOST_BEFORE = "host-before.json"
HOST_AFTER = "host-after.json"
OUTCOME = "outcome.json"
METRICS = "metrics.json"
TELEMETRY = "telemetry.jsonl"
KERNEL_LOG = "kernel.log"
MOUNTS_SANITIZED = "mounts-sanitized.json"
ORPHANS_REMOVED = "orphans-removed.json"
REMOVED = "non-regular-removed.json"
REMOVED_PREFIX = "non-regular-removed."  # REMOVED, then non-regular-removed.<n>.json

# -- what the run was made from (runfolder.inputs): inputs/<name> --------------------------------
INPUTS = "inputs"
INPUT_CAMPAIGN = f"{INPUTS}/campaign.yaml"
INPUT_CONTROL = f"{INPUTS}/control.yaml"
INPUT_RESOLVED = f"{INPUTS}/resolved.json"
INPUT_IMAGE = f"{INPUTS}/image.json"

# -- the container's logs ---------------------------------------------------------------------
LOGS = "logs"
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
STAMPS = "stamps.jsonl"

# -- the workload's own folder (shared with the container) -----------------------------------
OBSERVATIONS = interface.OBSERVATIONS_DIR
STARTUP = interface.STARTUP
GENERATION = interface.GENERATION
TRANSITIONS = interface.TRANSITIONS

# -- post-steps: post-steps/<name>/{stdout.log, stderr.log, result.json, verdict.json} -------
POST_STEPS = "post-steps"
RESULT = "result.json"
VERDICT = "verdict.json"

# Folders the harness creates before the container starts: older seals keep them empty, and
# verify does not call them extra (anything inside is still judged file by file).
HARNESS_MADE_DIRS = frozenset({OBSERVATIONS, LOGS})


def post_step_file(step: str, name: str) -> str:
    """`post-steps/<step>/<name>`, relative to the run folder."""
    return f"{POST_STEPS}/{step}/{name}"


def removed_record(n: int) -> str:
    """The n-th cleaner record: non-regular-removed.json, then non-regular-removed.<n>.json."""
    return REMOVED if n == 1 else f"{REMOVED_PREFIX}{n}.json"
