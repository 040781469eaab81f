"""Every rule id the harness can name, defined once, with its meaning and exit class.

A refusal names its rule (as MLPerf's checker does). Modules use the constants below,
never a string literal, and `docs/rules.md` is generated from this table
(`python -m harness.base.catalogue --markdown`), so the list a reviewer reads is the list the
code refuses with. The exit class says what a run stopped by this rule exits with:
1 refused (the evidence or a judge said no), 3 environment (the host was at fault).
"""

from __future__ import annotations

import re
import sys
from typing import NamedTuple

from harness.base.errors import ENVIRONMENT, INVALID, REFUSED

RULE_SHAPE = r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+"
_RULE_ID = re.compile(RULE_SHAPE)
RULE_ID_MAX = 100  # the longest catalogued id is under 40 characters


class Rule(NamedTuple):  # not a dataclass: post-steps import this at every start
    id: str
    meaning: str
    exit: int  # REFUSED (1), INVALID (2) or ENVIRONMENT (3)
    area: str  # who raises it: preflight, launch, seal, gate0, exit, post-step, ...


RULES: dict[str, Rule] = {}


def _rule(rule_id: str, meaning: str, area: str, exit: int = REFUSED) -> str:
    """Catalogue one rule: most refuse (1); an `ENV-` rule says ENVIRONMENT (3)."""
    if rule_id in RULES:
        raise ValueError(f"rule {rule_id} is defined twice")
    RULES[rule_id] = Rule(rule_id, meaning, exit, area)
    return rule_id


def exit_class(rule_id: str) -> int:
    """The exit class of a catalogued rule; an unknown id (a custom post-step's) refuses."""
    rule = RULES.get(rule_id)
    return rule.exit if rule else REFUSED


def is_rule_id(text: object) -> bool:
    """Whether `text` is shaped like a rule id (`GATE0-FIELD-DIFFERS`): the rules a
    post-step names of its own must be, as the catalogue's are."""
    return (isinstance(text, str) and len(text) <= RULE_ID_MAX
            and _RULE_ID.fullmatch(text) is not None)


# -- the run's own outcome ------------------------------------------------------------------
RUN_EXIT = _rule("RUN-EXIT", "the container exited with a code other than 0", "exit")
RUN_OOM = _rule("RUN-OOM", "the container was killed for memory", "exit")
RUN_TIMEOUT = _rule("RUN-TIMEOUT", "the container ran past its timeout", "exit")
RUN_INTERRUPTED = _rule("RUN-INTERRUPTED", "the harness was stopped during the run", "run")
NOT_LAUNCHED = _rule("NOT-LAUNCHED", "no container was started", "run")
HARNESS_ERROR = _rule("HARNESS-ERROR", "the harness itself failed; the run is sealed as is", "run")
ENV_ERROR = _rule("ENV-ERROR", "the host failed in a way no narrower rule "
                  "names", "run", ENVIRONMENT)
ENV_IO = _rule("ENV-IO", "reading or writing on the host failed", "run", ENVIRONMENT)
ENV_RUN_EXISTS = _rule("ENV-RUN-EXISTS", "the run folder of this run id already exists: a run "
                       "folder is never reused (the same run started twice)", "run", ENVIRONMENT)
ENV_DISK_FULL = _rule("ENV-DISK-FULL", "the runs folder is full (no space or quota "
                      "left)", "run", ENVIRONMENT)
ENV_READ_ONLY = _rule("ENV-READ-ONLY", "the runs folder (or a file the harness writes) is on a "
                      "read-only file system", "run", ENVIRONMENT)
ENV_PERMISSION = _rule("ENV-PERMISSION", "the host forbade a write the harness "
                       "needs", "run", ENVIRONMENT)
ENV_SEAL = _rule("ENV-SEAL", "the run folder could not be sealed; the next run seals it as "
                 "interrupted", "run", ENVIRONMENT)

# -- locks ------------------------------------------------------------------------------------
ENV_LOCK_PATH = _rule("ENV-LOCK-PATH", "the lock file or its folder cannot be created or "
                      "used", "lock", ENVIRONMENT)
ENV_LOCK_TIMEOUT = _rule("ENV-LOCK-TIMEOUT", "a lock (GPU, night or refinalize) stayed held past "
                         "the timeout", "lock", ENVIRONMENT)
ENV_NIGHT_BUSY = _rule("ENV-NIGHT-BUSY", "another night already drives this GPU "
                       "lock", "lock", ENVIRONMENT)

# -- preflight: before anything is locked or launched -------------------------------------------
ENV_NO_ENGINE = _rule("ENV-NO-ENGINE", "the Docker engine did not answer", "preflight", ENVIRONMENT)
IMAGE_NOT_PINNED = _rule("IMAGE-NOT-PINNED", "the control's image is not in "
                         "images.lock", "preflight")
IMAGE_ID_MISMATCH = _rule("IMAGE-ID-MISMATCH", "the local image under the pinned name has another "
                          "Id than images.lock pins", "preflight")
ENV_MISSING_IMAGE = _rule("ENV-MISSING-IMAGE", "the pinned image is not in the local "
                          "engine", "preflight", ENVIRONMENT)
MODEL_UNPINNED = _rule("MODEL-UNPINNED", "the control names a model with no pinned "
                       "sha256", "preflight")
ENV_MODEL_DIR = _rule("ENV-MODEL-DIR", "the model folder does not exist on this "
                      "host", "preflight", ENVIRONMENT)
MODEL_MISSING = _rule("MODEL-MISSING", "a pinned model file is absent", "preflight")
MODEL_HASH = _rule("MODEL-HASH", "a model file's sha256 differs from its pin", "preflight")
ENV_DEVICE = _rule("ENV-DEVICE", "a device node the profile needs (/dev/kfd, /dev/dri) is "
                   "absent", "preflight", ENVIRONMENT)
ENV_GPU_MAP = _rule("ENV-GPU-MAP", "in a Slurm job on the rocm profile, the GPUs Slurm allocated "
                    "have no render node in the host's GPU map (no map, an invalid one, an index "
                    "it lacks, or a node that is not a character device): the container would get "
                    "no GPU, or another job's", "preflight", ENVIRONMENT)

# -- idle GPU: under the lock, before launch and after exit (harness.judge.idlegpu) --------
ENV_GPU_BUSY = _rule("ENV-GPU-BUSY", "before launch a process the run does not own holds the GPU "
                     "(on the cpu profile: a container pinned on, or free to use, the control's "
                     "CPUs), named by pid, user, name and memory", "idle-gpu", ENVIRONMENT)
ENV_GPU_VRAM_IN_USE = _rule("ENV-GPU-VRAM-IN-USE", "before launch more VRAM is in use than the "
                            "control's idle_gpu.vram_max_mb allows", "idle-gpu", ENVIRONMENT)
GPU_LEFT_BEHIND = _rule("GPU-LEFT-BEHIND", "after the run's container exited, its container or one "
                        "of its processes still holds the GPU", "idle-gpu")

# -- launch: the mounts and the container ------------------------------------------------------
MOUNT_OUTSIDE_ROOTS = _rule("MOUNT-OUTSIDE-ROOTS", "a mount source is outside the mount "
                            "roots", "launch")
MOUNT_SYSTEM_PATH = _rule("MOUNT-SYSTEM-PATH", "a mount is, contains or lies inside a system "
                          "path", "launch")
ENV_MOUNT_SOURCE = _rule("ENV-MOUNT-SOURCE", "a mount source does not exist at "
                         "launch", "launch", ENVIRONMENT)
MOUNT_SOURCE_KIND = _rule("MOUNT-SOURCE-KIND", "a mount source is neither a folder nor a regular "
                          "file", "launch")
MOUNT_OVER_HARNESS = _rule("MOUNT-OVER-HARNESS", "a read-write mount overlaps what the harness "
                           "trusts (evidence, lock, code, inputs)", "launch")
MOUNT_UNSAFE_PATH = _rule("MOUNT-UNSAFE-PATH", "a mount path docker could read differently (a "
                          "comma, a bad target)", "launch")
MODEL_PATH_CHANGED = _rule("MODEL-PATH-CHANGED", "the model folder resolved elsewhere at launch "
                           "than when it was hashed", "launch")
ENV_ORPHAN_CONTAINER = _rule("ENV-ORPHAN-CONTAINER", "a harness container is still running on this "
                             "lock", "launch", ENVIRONMENT)
MOUNT_SETUID_PLANTED = _rule("MOUNT-SETUID-PLANTED", "the workload left setuid/setgid files in a "
                             "read-write mount (undone)", "launch")
MOUNT_DEVICE_PLANTED = _rule("MOUNT-DEVICE-PLANTED", "the workload left device nodes in a "
                             "read-write mount (removed)", "launch")
WITNESS_EXEC_UNCONFIRMED = _rule("WITNESS-EXEC-UNCONFIRMED", "the launcher witness never saw the "
                                 "launcher run the docker CLI with its arguments (it exited first, "
                                 "or the exec did not show in time)", "launch")
WITNESS_ARGV_DIFFERS = _rule("WITNESS-ARGV-DIFFERS", "the argv the launcher witness saw is not the "
                             "docker vector the run recorded", "launch")
MOUNT_SANITIZE_INCOMPLETE = _rule("MOUNT-SANITIZE-INCOMPLETE", "a read-write mount could not be "
                                  "checked whole for planted files", "launch")

# -- evidence: the run folder after the container ----------------------------------------------
EVIDENCE_NOT_REGULAR = _rule("EVIDENCE-NOT-REGULAR", "the workload left a non-regular file "
                             "(symlink, FIFO, device); it was removed", "evidence")
EVIDENCE_BAD_NAME = _rule("EVIDENCE-BAD-NAME", "the workload left a file whose name cannot be "
                          "sealed; it was removed", "evidence")
EVIDENCE_TOO_DEEP = _rule("EVIDENCE-TOO-DEEP", "the workload left a path nested too deep or too "
                          "long; it was removed", "evidence")
EVIDENCE_TOO_BIG = _rule("EVIDENCE-TOO-BIG", "the workload left an observation file over the size "
                         "limit; it was removed unhashed", "evidence")
EVIDENCE_TOO_MANY = _rule("EVIDENCE-TOO-MANY", "the run folder held more entries than a seal "
                          "takes; observations/ was removed", "evidence")
EVIDENCE_LOG = _rule("EVIDENCE-LOG", "a container log could not be written whole", "evidence")
SEAL_CHANGED = _rule("SEAL-CHANGED", "the campaign's sealed inputs changed during the "
                     "run", "evidence")
MODEL_CHANGED = _rule("MODEL-CHANGED", "the model files changed during the run", "evidence")
HOST_DRIFT = _rule("HOST-DRIFT", "the host (driver, firmware, engine) changed during the "
                   "run", "evidence")
# The kernel log of the run's window (judge/kernellog.py): a fault there makes the figures
# meaningless, whatever the workload printed.
KERNEL_LOG_GPU_RESET = _rule("KERNEL-LOG-GPU-RESET", "the kernel reset the GPU during the "
                             "run", "evidence")
KERNEL_LOG_RING_TIMEOUT = _rule("KERNEL-LOG-RING-TIMEOUT", "a GPU ring timed out (a hung job) "
                                "during the run", "evidence")
KERNEL_LOG_MCE = _rule("KERNEL-LOG-MCE", "the kernel logged a machine check (a hardware error) "
                       "during the run", "evidence")
KERNEL_LOG_AER = _rule("KERNEL-LOG-AER", "the kernel logged a PCIe bus error (AER) during the "
                       "run", "evidence")
KERNEL_LOG_GAP = _rule("KERNEL-LOG-GAP", "the control requires the kernel log and part of the "
                       "run's window could not be read (the log file was rotated out of reach or "
                       "truncated, or the ring buffer overwrote records first)", "evidence")
ENV_KERNEL_LOG_UNREADABLE = _rule("ENV-KERNEL-LOG-UNREADABLE", "the control requires the kernel "
                                  "log and the host does not let the harness read it (`harness "
                                  "doctor` says how to allow it)", "evidence", ENVIRONMENT)
TELEMETRY_GAP = _rule("TELEMETRY-GAP", "the control requires telemetry and a gap over twice the "
                      "sampling interval (or no sample at all) left the run unmeasured", "evidence")

# -- post-steps: the harness's record of each step ---------------------------------------------
POST_REFUSED = _rule("POST-REFUSED", "a post-step refused without naming a rule of its "
                     "own", "post-step")
POST_VERDICT_UNREADABLE = _rule("POST-VERDICT-UNREADABLE", "a post-step's verdict.json is not a "
                                "readable verdict", "post-step")
POST_DIR_TAKEN = _rule("POST-DIR-TAKEN", "the post-step's folder could not be created (an earlier "
                       "step left something there)", "post-step")
POST_RESULT_TAKEN = _rule("POST-RESULT-TAKEN", "a post-step wrote result.json, where the harness "
                          "keeps its record", "post-step")
POST_RESULT_UNWRITTEN = _rule("POST-RESULT-UNWRITTEN", "the harness could not write the step's "
                              "result.json", "post-step")
POST_TIMEOUT = _rule("POST-TIMEOUT", "a post-step ran past its timeout and was killed", "post-step")

# -- gate0: the start-up and generation observations -------------------------------------------
GATE0_OPTIONS = _rule("GATE0-OPTIONS", "the gate0 post-step's options are not valid", "gate0")
GATE0_MISSING = _rule("GATE0-MISSING", "an observation document was not written", "gate0")
GATE0_UNREADABLE = _rule("GATE0-UNREADABLE", "an observation document is not a readable "
                         "observation", "gate0")
GATE0_PHASE = _rule("GATE0-PHASE", "the documents are not a startup and a generation "
                    "observation", "gate0")
GATE0_PROCESS = _rule("GATE0-PROCESS", "the two observations come from different "
                      "processes", "gate0")
GATE0_SOURCE = _rule("GATE0-SOURCE", "the observations' seal, engine or image differ, are "
                     "unrecorded, or are not the run's", "gate0")
GATE0_INCOMPLETE = _rule("GATE0-INCOMPLETE", "an observation is not complete", "gate0")
GATE0_CONTRACT_MISSING = _rule("GATE0-CONTRACT-MISSING", "a contract field is missing from an "
                               "observation", "gate0")
GATE0_FIELD_DIFFERS = _rule("GATE0-FIELD-DIFFERS", "a compared field differs between start-up and "
                            "generation", "gate0")
GATE0_PROCESS_MISSING = _rule("GATE0-PROCESS-MISSING", "a process that holds the engine "
                              "configuration (front-end, engine core, a worker) was not observed "
                              "at start-up or at generation", "gate0")
GATE0_PROCESS_KIND = _rule("GATE0-PROCESS-KIND", "an observation document is not of the process "
                           "its file name says", "gate0")
GATE0_PROCESS_UNEXPECTED = _rule("GATE0-PROCESS-UNEXPECTED", "an observation document is of a "
                                 "process the engine's layout does not run", "gate0")
GATE0_BUILD_DIFFERS = _rule("GATE0-BUILD-DIFFERS", "a process ran another engine build, seal or "
                            "image than the engine core", "gate0")
GATE0_INSTRUMENT_ERROR = _rule("GATE0-INSTRUMENT-ERROR", "the instrument recorded an error of its "
                               "own (in a document or the trace)", "gate0")
GATE0_HASH_DIFFERS = _rule("GATE0-HASH-DIFFERS", "vLLM's own configuration hash changed between "
                           "start-up and generation while every compared field agrees: a change "
                           "the compared fields did not see", "gate0")
GATE0_HASH_MISSING = _rule("GATE0-HASH-MISSING", "vLLM's own configuration hash was recorded at "
                           "one phase of a process and not at the other", "gate0")
GATE0_NOTHING_COMPARED = _rule("GATE0-NOTHING-COMPARED", "no field was compared: an empty "
                               "comparison proves nothing", "gate0")

# -- image-gate: the instrument tested inside the pinned image ----------------------------------
IMAGE_GATE_OPTIONS = _rule("IMAGE-GATE-OPTIONS", "the image-gate post-step's options are not "
                           "valid", "image-gate")
IMAGE_GATE_VERDICT = _rule("IMAGE-GATE-VERDICT", "Gate 0 did not find exactly the differences the "
                           "image gate expects", "image-gate")
IMAGE_GATE_TRACE = _rule("IMAGE-GATE-TRACE", "the transition trace does not name the call the "
                         "image gate expects, or is unreadable or incomplete", "image-gate")

# -- reference: a control's expected figures (harness.config.references) -----------------------
REFERENCE_OUTSIDE = _rule("REFERENCE-OUTSIDE", "a figure the control marks `refuse: true` is "
                          "outside its reference range", "reference")
REFERENCE_MISSING = _rule("REFERENCE-MISSING", "a figure the control marks `refuse: true` has no "
                          "value in this run", "reference")
REFERENCE_OPTIONS = _rule("REFERENCE-OPTIONS", "the reference post-step's options are not valid "
                          "references", "reference")

# -- reading a sealed run: show, diff, rerun ---------------------------------------------------
RUN_UNSEALED = _rule("RUN-UNSEALED", "the run folder was never sealed (no SHA256SUMS): nothing in "
                     "it is vouched for, so no command acts on it as a record", "record")
RUN_NOT_INTACT = _rule("RUN-NOT-INTACT", "the run folder fails verification: a file changed, went "
                       "missing or was added after the seal", "record")

# -- refinalize: judging a sealed run again ----------------------------------------------------
REFINALIZE_UNSEALED = _rule("REFINALIZE-UNSEALED", "the run folder was never sealed", "refinalize")
REFINALIZE_NOT_INTACT = _rule("REFINALIZE-NOT-INTACT", "the run folder fails "
                              "verification", "refinalize")

# -- images: pinning ------------------------------------------------------------------------------
IMAGE_PIN_EXISTS = _rule("IMAGE-PIN-EXISTS", "the name is pinned to another Id; a pin is never "
                         "replaced silently", "images")
IMAGE_ARCHIVE_MISMATCH = _rule("IMAGE-ARCHIVE-MISMATCH", "the --archive does not hold the pinned "
                               "image", "images")

# -- night --------------------------------------------------------------------------------------
ENV_DOCTOR = _rule("ENV-DOCTOR", "the doctor found the host unfit, so the run was "
                   "deferred", "night", ENVIRONMENT)

# -- bundle: who vouches for what in an evidence bundle (bundle verify, merge, collect) ------
BUNDLE_UNSIGNED = _rule("BUNDLE-UNSIGNED", "--allowed-signers was given and the bundle has no "
                        "signature: no listed signer vouches for the bag's bytes", "bundle")
BUNDLE_SIGNATURE_STRIPPED = _rule("BUNDLE-SIGNATURE-STRIPPED", "the bundle's bag-info.txt says it "
                                  "was signed and its signature file is gone: a stripped signature "
                                  "is a refusal, never a downgrade to unsigned", "bundle")
BUNDLE_BAD_SIGNATURE = _rule("BUNDLE-BAD-SIGNATURE", "the bundle's signature is not a good "
                             "signature of its tag manifest, in harness-evidence, by a signer "
                             "--allowed-signers lists", "bundle")
BUNDLE_SIGNATURE_UNCHECKED = _rule("BUNDLE-SIGNATURE-UNCHECKED", "the bundle is signed and no "
                                   "--allowed-signers was given: an unchecked signature proves "
                                   "nothing", "bundle")
BUNDLE_APPROVAL_UNSIGNED = _rule("BUNDLE-APPROVAL-UNSIGNED", "--allowed-signers was given and an "
                                 "approval the bundle carries has no .sig: the bundle's own "
                                 "signature cannot vouch for the reviewer", "bundle")
BUNDLE_APPROVAL_SIGNATURE = _rule("BUNDLE-APPROVAL-SIGNATURE", "a carried approval's .sig is not a "
                                  "good signature of its bytes, in harness-approval@v1, by a "
                                  "signer --allowed-signers lists for approvals", "bundle")
BUNDLE_DROP_NAME = _rule("BUNDLE-DROP-NAME", "a file in the drop's bundles/ is not a regular file "
                         "named <run-id>.tar.gz: it is named for no run, so nothing of it is "
                         "placed", "bundle")
BUNDLE_DROP_OTHER_RUN = _rule("BUNDLE-DROP-OTHER-RUN", "a drop bundle named for run R holds "
                              "anything but run R (another run, or R and more): nothing of it is "
                              "placed", "bundle")

# -- slurm: a night whose controls run as Slurm jobs (harness night --executor slurm) --------
ENV_SLURM_SUBMIT = _rule("ENV-SLURM-SUBMIT", "sbatch refused the job (partition, account, "
                         "deadline) or Slurm did not answer a submission", "slurm", ENVIRONMENT)
ENV_SLURM_NO_EVIDENCE = _rule("ENV-SLURM-NO-EVIDENCE", "the job ended on its own without a sealed "
                              "run: `harness run` could not start on the host (see the job's log "
                              "in the drop)", "slurm", ENVIRONMENT)
SLURM_NO_SEAL = _rule("SLURM-NO-SEAL", "Slurm ended the job (cancelled, out of time, node lost) "
                      "and no sealed run came within the grace: interrupted", "slurm")
SLURM_NOT_INTACT = _rule("SLURM-NOT-INTACT", "the sealed run a job left fails "
                         "verification", "slurm")
SLURM_NOT_CLAIMED = _rule("SLURM-NOT-CLAIMED", "the run held the GPU lock but its claim in the "
                          "drop was taken (the controller stopped the night first) or could not be "
                          "made: nothing launched, and the controller plans the control "
                          "again", "slurm")
SLURM_NIGHT_STOPPED = _rule("SLURM-NIGHT-STOPPED", "the run held the GPU lock but the run before "
                            "it in its job ended so that the night's stop policy stops the night "
                            "(or left no seal to tell): nothing launched, and the controller plans "
                            "the control again", "slurm")
ENV_LOCK_NETWORK_FS = _rule("ENV-LOCK-NETWORK-FS", "the GPU lock is on a network file system: "
                            "under Slurm every host would share one lock (refused; a warning on "
                            "one host)", "lock", ENVIRONMENT)

# -- gates: the CPU gates that justify a seal ---------------------------------------------------
GATES_NOT_INTACT = _rule("GATES-NOT-INTACT", "the gate record folder fails verification (its "
                         "SHA256SUMS is missing or does not match)", "gates")
GATES_SEAL_CHANGED = _rule("GATES-SEAL-CHANGED", "the source seal changed while the gates ran, so "
                           "they did not test the sealed bytes", "gates")
GATES_TAMPERED = _rule("GATES-TAMPERED", "something other than the harness wrote into the gate "
                       "record folder while the gates ran, so it was left unsealed", "gates")

# -- approval: a reviewed seal before a run (harness approve; require_approval) -------------------
SEAL_NOT_APPROVED = _rule("SEAL-NOT-APPROVED", "the campaign requires approval and no approval for "
                          "it exists in approvals/", "approval")
APPROVAL_OTHER_SEAL = _rule("APPROVAL-OTHER-SEAL", "the campaign's approvals are for another "
                            "source seal than this run's", "approval")
APPROVAL_IMAGE_CHANGED = _rule("APPROVAL-IMAGE-CHANGED", "an image Id in images.lock differs from "
                               "the Id the approval names", "approval")
APPROVAL_MODEL_CHANGED = _rule("APPROVAL-MODEL-CHANGED", "a control's model pins differ from those "
                               "the approval names", "approval")
APPROVAL_INVALID = _rule("APPROVAL-INVALID", "the approval file is unreadable or not an approval "
                         "document", "approval")
APPROVAL_SIGNATURE = _rule("APPROVAL-SIGNATURE", "the approval is unsigned or its signature is not "
                           "valid from a signer in the campaign's allowed_signers", "approval")
APPROVAL_DIRTY_TREE = _rule("APPROVAL-DIRTY-TREE", "the approval was (or would be) made from a git "
                            "tree with uncommitted changes, or outside git: no immutable head was "
                            "reviewed", "approval")
APPROVAL_GATES_MISSING = _rule("APPROVAL-GATES-MISSING", "the gate record the approval names is "
                               "not there", "approval")
APPROVAL_GATES_NOT_INTACT = _rule("APPROVAL-GATES-NOT-INTACT", "the gate record fails verification "
                                  "or is not the record the approval names", "approval")
APPROVAL_GATES_FAILED = _rule("APPROVAL-GATES-FAILED", "the gate record shows a failed "
                              "gate", "approval")
APPROVAL_GATES_OTHER_SEAL = _rule("APPROVAL-GATES-OTHER-SEAL", "the gate record was made for "
                                  "another source seal or campaign", "approval")
APPROVAL_GATES_DIRTY = _rule("APPROVAL-GATES-DIRTY", "the gate record's gates did not run from a "
                             "checkout clean at one commit (a sealed file untracked, git-ignored, "
                             "outside the checkout or changed, or another path changed), or the "
                             "record predates that check", "approval")
APPROVAL_GATES_OTHER_COMMIT = _rule("APPROVAL-GATES-OTHER-COMMIT", "the gate record's gates ran "
                                    "from another commit than the one approved", "approval")
PROVENANCE_DIRTY = _rule("PROVENANCE-DIRTY", "under require_approval, the run's checkout is not "
                         "clean at its commit (a sealed file untracked, git-ignored, outside the "
                         "checkout or changed, or another path changed): what runs must be what "
                         "was approved", "approval")
APPROVAL_UNSEALED_MOUNT = _rule("APPROVAL-UNSEALED-MOUNT", "under require_approval, a control "
                                "mounts a read-only folder marked `sealed: false`, whose bytes no "
                                "approval covers", "approval")


def markdown() -> str:
    """docs/rules.md: every rule, grouped by area, in catalogue order."""
    names = {REFUSED: "1 refused", INVALID: "2 invalid", ENVIRONMENT: "3 environment"}
    lines = ["# Rules", "", "Generated by `python -m harness.base.catalogue --markdown` from "
             "`harness/base/catalogue.py`; a test keeps it current.", ""]
    areas: dict[str, list[Rule]] = {}
    for rule in RULES.values():
        areas.setdefault(rule.area, []).append(rule)
    for area, rules in areas.items():
        lines += [f"## {area}", "", "| rule | exit | meaning |", "|---|---|---|"]
        lines += [f"| `{r.id}` | {names[r.exit]} | {r.meaning} |" for r in rules]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a thin shell around markdown()
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m harness.base.catalogue --markdown")
    sys.stdout.write(markdown())
