"""Stage 5: post-steps, each a separate process whose exit code is its verdict.

A post-step is a command: it may leave anything in its folder. Its `verdict.json` is read
bounded and without following a symlink, parsed strictly and type-checked; a verdict file
that is there but unreadable (not a regular file, too big, not strict JSON, not an object
of the documented shape) refuses the post-step (`POST-VERDICT-UNREADABLE`) and never stops
the run from being sealed. So does an entry where the harness keeps its own record of the
step (`result.json`, `POST-RESULT-TAKEN`) or a step folder that already exists, and a
step killed at its timeout (`POST-TIMEOUT`), whatever verdict it wrote before.

The built-ins in harness.judge.poststeps.IN_PROCESS (exit-code) run inside the harness instead:
they read only files the harness wrote, bounded, so they need no process of their own; their
record (result.json, verdict.json, stdout.log, stderr.log) is the same as a child's.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from harness.base.atomic import write_json
from harness.base.catalogue import (
    POST_DIR_TAKEN,
    POST_RESULT_TAKEN,
    POST_RESULT_UNWRITTEN,
    POST_TIMEOUT,
    POST_VERDICT_UNREADABLE,
)
from harness.base.readfile import InputError, read_bounded
from harness.base.reason import Reason
from harness.base.tree import printable
from harness.config.schema import Control, PostStep
from harness.instrument.harness_observer.encode import loads as strict_loads
from harness.judge.poststeps import BUILTINS, IN_PROCESS
from harness.judge.verdict import PostResult, post_reasons
from harness.measure.runfolder import layout
from harness.pipeline.context import RunContext

VERDICT = layout.VERDICT
RESULT = layout.RESULT
VERDICT_LIMIT = 1 << 20  # a verdict is a few KiB; gate0's lists its contract and findings
VERDICTS = ("accepted", "refused")
MAX_REASONS = 50
MAX_REASON_CHARS = 1000
UNREADABLE = POST_VERDICT_UNREADABLE


def argv_for(step: PostStep, run_dir: Path, out_dir: Path,
             contract: list[str] | str | None = None, reference: dict | None = None) -> list[str]:
    """The post-step's command. The campaign's identity contract (a list, or `all`)
    reaches gate0 unless the control gives gate0 one of its own (with neither, gate0
    compares harness.config.contract.VLLM_IDENTITY); the control's references (with the
    lock's figures, which only the harness knows) reach the `reference` step the same way."""
    if step.run:
        return list(step.run)
    if step.name not in BUILTINS:
        raise ValueError(f"unknown built-in post-step {step.name!r}")
    options = dict(step.options)
    if step.name == "gate0" and contract is not None:
        options.setdefault("contract", contract)
    if step.name == "reference" and reference is not None:
        options = {**reference, **options}
    return [sys.executable, "-m", "harness.judge.poststeps", step.name, str(run_dir), str(out_dir),
            "--options", json.dumps(options, sort_keys=True)]


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "..."


def read_verdict(out_dir: Path) -> tuple[str | None, list[str], str | None]:
    """(verdict, reasons, problem) from the post-step's `verdict.json`, if it wrote one.

    `problem` is None for no file or a well-formed one: an object whose `verdict`, if
    present and not null, is "accepted" or "refused", and whose `reasons`, if present and
    not null, is a list of strings. Anything else is a problem, never an exception."""
    path = out_dir / VERDICT
    if not os.path.lexists(path):
        return None, [], None
    try:
        text = read_bounded(path, VERDICT_LIMIT, "verdict file").decode("utf-8")
        doc = strict_loads(text)
    except InputError as e:
        return None, [], _clip(e.message.replace(os.fspath(path), VERDICT, 1))
    except UnicodeDecodeError as e:
        return None, [], f"{VERDICT} is not UTF-8 ({e.reason} at byte {e.start})"
    except ValueError as e:  # encode.DecodeError: NaN, a duplicate key, too deep, a huge int
        return None, [], _clip(f"{VERDICT} is not strict JSON: {e}")
    if not isinstance(doc, dict):
        return None, [], f"{VERDICT} is a JSON {type(doc).__name__}, not an object"
    verdict, reasons = doc.get("verdict"), doc.get("reasons")
    if verdict is not None and verdict not in VERDICTS:
        return None, [], _clip(f"{VERDICT}: verdict must be one of {', '.join(VERDICTS)}, "
                               f"not {printable(json.dumps(verdict)[:80])}")
    if reasons is None:
        reasons = []
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        return None, [], f"{VERDICT}: reasons must be a list of strings"
    kept = [_clip(printable(r)) for r in reasons[:MAX_REASONS]]
    if len(reasons) > MAX_REASONS:
        kept.append(f"(and {len(reasons) - MAX_REASONS} more reasons in {VERDICT})")
    return verdict, kept, None


def run_one(step: PostStep, ctx: RunContext) -> PostResult:
    steps_dir = ctx.run_dir / layout.POST_STEPS
    out_dir = steps_dir / step.name
    try:  # never through a symlink an earlier post-step may have left at either name
        if not os.path.lexists(steps_dir):
            os.mkdir(steps_dir)
        if os.path.islink(steps_dir) or not os.path.isdir(steps_dir):
            raise FileExistsError(f"{steps_dir} is not a folder")
        os.mkdir(out_dir)
    except OSError as e:
        return PostResult(step.name, None, "refused", (
            f"{POST_DIR_TAKEN}: cannot create post-steps/{step.name} (an earlier post-step "
            f"left something there?): {e.strerror or e}",))
    env = {**os.environ, "HARNESS_RUN_DIR": str(ctx.run_dir), "HARNESS_POSTSTEP_DIR": str(out_dir)}
    try:
        argv = argv_for(step, ctx.run_dir, out_dir, ctx.loaded.campaign.contract,
                        reference_options(ctx) if step.name == "reference" else None)
    except ValueError as e:
        write_json(out_dir / RESULT, {"name": step.name, "exit_code": None,
                                      "error": str(e)})
        return PostResult(step.name, None, "refused", (str(e),))
    t0 = time.monotonic()
    if step.name in IN_PROCESS and not step.run:
        code, note = _in_process(step, ctx.run_dir, out_dir)
    else:
        code, note = _in_child(step, argv, out_dir, env, ctx.run_dir)
    verdict, reasons, problem = read_verdict(out_dir)
    # a killed step has not judged, whatever verdict it wrote before it was killed
    faults = [f"{POST_TIMEOUT}: {note}"] if note else []
    if problem:
        faults.append(f"{UNREADABLE}: {problem}")
    if os.path.lexists(out_dir / RESULT):
        faults.append(f"{POST_RESULT_TAKEN}: the step wrote {RESULT}, where the harness keeps "
                      "its own record of the step")
    record = {"name": step.name, "argv": argv, "exit_code": code, "verdict": verdict,
              "duration_s": round(time.monotonic() - t0, 3), "note": note}
    try:
        write_json(out_dir / RESULT, record)  # replaces whatever the step left at that name
    except OSError as e:  # e.g. the step made result.json a folder: the run is still sealed
        faults.append(f"{POST_RESULT_UNWRITTEN}: {RESULT}: {e.strerror or e}")
    if faults:  # whatever it exited, a step whose files cannot be read has not accepted
        return PostResult(step.name, code, "refused", tuple(faults + reasons))
    return PostResult(step.name, code, verdict or ("accepted" if code == 0 else "refused"),
                      tuple(reasons))


def _in_child(step: PostStep, argv: list[str], out_dir: Path, env: dict,
              cwd: Path) -> tuple[int | None, str | None]:
    """Run the step as its own process: (exit code, note); killed at its timeout."""
    with (open(out_dir / layout.STDOUT_LOG, "wb") as so,
          open(out_dir / layout.STDERR_LOG, "wb") as se):
        proc = subprocess.Popen(argv, stdout=so, stderr=se, stdin=subprocess.DEVNULL, env=env,
                                cwd=cwd)
        try:
            return proc.wait(timeout=step.timeout), None
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None, f"post-step ran past {step.timeout:g}s and was killed"
        except BaseException:
            proc.kill()
            proc.wait()
            raise


def _in_process(step: PostStep, run_dir: Path, out_dir: Path) -> tuple[int | None, None]:
    """Run a built-in in this process (see IN_PROCESS), with the same record as a child's:
    its lines in stdout.log, a crash as exit 1 with the traceback in stderr.log."""
    module = importlib.import_module(BUILTINS[step.name])
    with (open(out_dir / layout.STDOUT_LOG, "w", encoding="utf-8") as so,
          open(out_dir / layout.STDERR_LOG, "w", encoding="utf-8") as se):
        try:
            return int(module.run(run_dir, out_dir, dict(step.options), out=so)), None
        except Exception:  # a bug in the judge refuses the step, as a crashed child would
            traceback.print_exc(file=se)
            return 1, None


def reference_options(ctx: RunContext) -> dict:
    """The `reference` step's options: the control's references and the lock's figures."""
    held = ctx.held.as_dict() if ctx.held else {}
    return {"reference": {k: b.model_dump(exclude_none=True)
                          for k, b in ctx.control.reference.items()},
            "measured": {"lock_wait_s": held.get("wait_s"), "lock_hold_s": held.get("hold_s")}}


def steps(control: Control) -> list[PostStep]:
    """The control's post-steps, and `reference` last when it has references but does not
    list the step (harness.config.reference)."""
    listed = list(control.post_steps)
    if control.reference and all(p.name != "reference" for p in listed):
        listed.append(PostStep(name="reference"))
    return listed


def run(ctx: RunContext) -> list[Reason]:
    """Run each post-step. Returns the refusing steps' reasons for the stage record; the
    verdict itself reads the steps' results (`ctx.post`) with the outcome."""
    for step in steps(ctx.control):
        ctx.ui.event("post-step", name=step.name)
        result = run_one(step, ctx)
        ctx.post.append(result)
        ctx.ui.event("post-step-done", name=step.name, exit_code=result.exit_code,
                     verdict=result.verdict)
    return [r for p in ctx.post for r in post_reasons(p)]
