"""Every name in a run folder, defined once: the definition of what a run folder holds.

Code never spells these names as literals, so a reader, a writer and a checker cannot
drift apart. A run folder, as `harness run` leaves it:

    gpu-runs/<run-id>/
      run.json               RECORD: the run record (harness.measure.runfolder.record; schema
                             harness.run/v2): campaign, control, row, run id, source seal,
                             image Id, status, reasons {rule, by, detail}, rules, times,
                             lock interval, outcome, post-steps, rerun link
      harness.json           OWNER: who writes the folder (pid, start time, host); a folder
                             without SHA256SUMS whose owner is gone is sealed by recovery
      recovered.json         RECOVERED: only when recovery sealed a run whose run.json
                             was written but whose seal was not
      preflight.json         PREFLIGHT: the source seal's file list, image check, model hashes
      inputs/                INPUTS (harness.measure.runfolder.inputs): what the run was made
                             from, written at preflight: campaign.yaml and control.yaml (the
                             exact bytes the source seal hashed), resolved.json (both as the
                             loader resolved them, secret-looking values redacted), image.json
                             (the images.lock entry); runs made before the harness kept
                             its inputs have none
      docker-vector.json     VECTOR: {"argv": [...]} exactly as launched, and each mount
      launcher-witness.json  LAUNCHER_WITNESS: the `docker run` process
      container-inspect.json CONTAINER_INSPECT: docker inspect, init PID, cgroup
      container.cid          CONTAINER_CID: the container id docker wrote
      host-before.json, host-after.json   HOST_BEFORE, HOST_AFTER: host identity
      logs/                  LOGS: stdout.log, stderr.log (native output), stamps.jsonl
      observations/          OBSERVATIONS: what the in-container instrument wrote (the
                             workload's own output mount: hostile): startup.json,
                             generation.json, ...
      outcome.json           OUTCOME: exit code, OOM flag, timeout, timings
      metrics.json           METRICS: figures read from the native log
      telemetry.jsonl        TELEMETRY: figures sampled while the container ran (its cgroup;
                             on rocm each GPU from amd-smi), one JSON line per sample
      kernel.log             KERNEL_LOG: the kernel log's lines from the lock to the seal
                             (where the host lets the harness read it)
      mounts-sanitized.json  MOUNTS_SANITIZED: what was cleared from read-write mounts
      post-steps/NAME/       POST_STEPS: each post-step's stdout.log, stderr.log,
                             result.json and verdict.json
      non-regular-removed.json  REMOVED (then non-regular-removed.N.json): only when the
                             cleaner removed symlinks, special files or unsealable names
      orphans-removed.json   ORPHANS_REMOVED: only when this run removed exited containers
                             of a dead harness
      SHA256SUMS             SUMS: written last over every other file (harness.measure.runfolder.
                             manifest); the folder is then read-only
      addenda/<stamp>-<name>/  ADDENDA: later judgements, each with its own SHA256SUMS

Names shared with the container (the observations folder and its files) are spelled once,
in the stdlib-only `harness.instrument.harness_observer.interface`, and only named here.
"""

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

# Folders the harness creates before the container starts. Seals made before empty folders
# were pruned (harness <= 0.1.0) keep them empty; they carry nothing, so verify does not
# call them extra (anything inside them is still judged file by file).
HARNESS_MADE_DIRS = frozenset({OBSERVATIONS, LOGS})


def post_step_file(step: str, name: str) -> str:
    """`post-steps/<step>/<name>`, relative to the run folder."""
    return f"{POST_STEPS}/{step}/{name}"


def removed_record(n: int) -> str:
    """The n-th cleaner record: non-regular-removed.json, then non-regular-removed.<n>.json."""
    return REMOVED if n == 1 else f"{REMOVED_PREFIX}{n}.json"
