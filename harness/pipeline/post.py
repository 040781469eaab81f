"""Post-steps, each a separate process whose exit code is its verdict.

A step may leave anything in its folder, so what it leaves is read strictly
(`judge.verdictfile`): an unreadable verdict, a taken `result.json` or folder, or a
timeout refuses the step, never the seal. The built-ins in `judge.poststeps.IN_PROCESS`
read only the harness's own bounded files, so they run in-process, with the same record."""

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
    POST_REFUSED,
    POST_RESULT_TAKEN,
    POST_RESULT_UNWRITTEN,
    POST_TIMEOUT,
    POST_VERDICT_UNREADABLE,
)
from harness.base.reason import Reason
from harness.config.schema import Control, PostStep
from harness.judge import verdictfile
from harness.judge.poststeps import BUILTINS, IN_PROCESS
from harness.judge.verdictfile import PostResult
from harness.measure.runfolder import layout
from harness.pipeline.context import RunContext
from harness.pipeline.results import Post
from harness.pipeline.stage import Keep


def argv_for(step: PostStep, run_dir: Path, out_dir: Path,
             contract: list[str] | str | None = None, reference: dict | None = None) -> list[str]:
    """The post-step's command: the campaign's identity contract reaches gate0 unless the
    control gives one; the control's references (and the lock's figures, which only the
    harness knows) reach `reference`."""
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
        return PostResult.refusal(step.name, POST_DIR_TAKEN, (
            f"cannot create post-steps/{step.name} (an earlier post-step left something "
            f"there?): {e.strerror or e}"))
    env = {**os.environ, "HARNESS_RUN_DIR": str(ctx.run_dir), "HARNESS_POSTSTEP_DIR": str(out_dir)}
    try:
        argv = argv_for(step, ctx.run_dir, out_dir, ctx.loaded.campaign.contract,
                        reference_options(ctx) if step.name == "reference" else None)
    except ValueError as e:
        write_json(out_dir / layout.RESULT, {"name": step.name, "exit_code": None,
                                      "error": str(e)})
        return PostResult.refusal(step.name, POST_REFUSED, str(e))
    t0 = time.monotonic()
    if step.name in IN_PROCESS and not step.run:
        code, note = _in_process(step, ctx.run_dir, out_dir)
    else:
        code, note = _in_child(step, argv, out_dir, env, ctx.run_dir)
    verdict, reasons, problem = verdictfile.read(out_dir, step.name)
    # a killed step has not judged, whatever verdict it wrote before it was killed
    faults = [Reason(POST_TIMEOUT, note, step.name)] if note else []
    if problem:
        faults.append(Reason(POST_VERDICT_UNREADABLE, problem, step.name))
    if os.path.lexists(out_dir / layout.RESULT):
        faults.append(Reason(POST_RESULT_TAKEN, f"the step wrote {layout.RESULT}, where the "
                             "harness keeps its own record of the step", step.name))
    record = {"name": step.name, "argv": argv, "exit_code": code, "verdict": verdict,
              "duration_s": round(time.monotonic() - t0, 3), "note": note}
    try:
        write_json(out_dir / layout.RESULT, record)  # replaces whatever the step left there
    except OSError as e:  # e.g. the step made result.json a folder: the run is still sealed
        faults.append(Reason(POST_RESULT_UNWRITTEN, f"{layout.RESULT}: {e.strerror or e}",
                             step.name))
    return verdictfile.result(step.name, code, verdict, reasons, faults)


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
            return None, f"post-step ran past {step.timeout:g}s and was killed"
        finally:  # past its timeout, or the harness itself stopped: the step goes too
            if proc.returncode is None:
                proc.kill()
                proc.wait()


def _in_process(step: PostStep, run_dir: Path, out_dir: Path) -> tuple[int | None, None]:
    """Run a built-in in-process with a child's record (a crash is exit 1)."""
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
    held = ctx.launch.held.as_dict() if ctx.launch.held else {}
    return {"reference": {k: b.model_dump(exclude_none=True)
                          for k, b in ctx.control.reference.items()},
            "measured": {"lock_wait_s": held.get("wait_s"), "lock_hold_s": held.get("hold_s")}}


def steps(control: Control) -> list[PostStep]:
    """The control's post-steps, with `reference` last when it has references."""
    listed = list(control.post_steps)
    if control.reference and all(p.name != "reference" for p in listed):
        listed.append(PostStep(name="reference"))
    return listed


def run(ctx: RunContext, keep: Keep[Post]) -> Post:
    """Run each post-step, keeping each result as it comes."""
    found = Post()
    for step in steps(ctx.control):
        ctx.ui.event("post-step", name=step.name)
        result = run_one(step, ctx)
        found = keep(Post((*found.results, result)))
        ctx.ui.event("post-step-done", name=step.name, exit_code=result.exit_code,
                     verdict=result.verdict)
    return found
