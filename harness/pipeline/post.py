"""Stage 5: post-steps, each a separate process whose exit code is its verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.atomic import write_json
from harness.config.schema import PostStep
from harness.pipeline.context import RunContext
from harness.poststeps import BUILTINS
from harness.verdict import PostResult


def argv_for(step: PostStep, run_dir: Path, out_dir: Path,
             contract: list[str] | None = None) -> list[str]:
    """The post-step's command. The campaign's identity contract reaches gate0 unless the
    control gives gate0 one of its own."""
    if step.run:
        return list(step.run)
    if step.name not in BUILTINS:
        raise ValueError(f"unknown built-in post-step {step.name!r}")
    options = dict(step.options)
    if step.name == "gate0" and contract is not None:
        options.setdefault("contract", contract)
    return [sys.executable, "-m", "harness.poststeps", step.name, str(run_dir), str(out_dir),
            "--options", json.dumps(options, sort_keys=True)]


def run_one(step: PostStep, ctx: RunContext) -> PostResult:
    out_dir = ctx.run_dir / "post-steps" / step.name
    out_dir.mkdir(parents=True)
    env = {**os.environ, "HARNESS_RUN_DIR": str(ctx.run_dir), "HARNESS_POSTSTEP_DIR": str(out_dir)}
    try:
        argv = argv_for(step, ctx.run_dir, out_dir, ctx.loaded.campaign.contract)
    except ValueError as e:
        write_json(out_dir / "result.json", {"name": step.name, "exit_code": None,
                                             "error": str(e)})
        return PostResult(step.name, None, "refused", (str(e),))
    t0 = time.monotonic()
    code: int | None
    with open(out_dir / "stdout.log", "wb") as so, open(out_dir / "stderr.log", "wb") as se:
        proc = subprocess.Popen(argv, stdout=so, stderr=se, stdin=subprocess.DEVNULL, env=env,
                                cwd=ctx.run_dir)
        try:
            code = proc.wait(timeout=step.timeout)
            note = None
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code, note = None, f"post-step ran past {step.timeout:g}s and was killed"
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    verdict_file = out_dir / "verdict.json"
    verdict, reasons = None, []
    if verdict_file.is_file():
        try:
            v = json.loads(verdict_file.read_text())
            verdict, reasons = v.get("verdict"), [str(r) for r in v.get("reasons") or []]
        except (OSError, ValueError):
            reasons = ["verdict.json is not valid JSON"]
    if note:
        reasons.append(note)
    write_json(out_dir / "result.json", {
        "name": step.name, "argv": argv, "exit_code": code, "verdict": verdict,
        "duration_s": round(time.monotonic() - t0, 3), "note": note})
    return PostResult(step.name, code, verdict or ("accepted" if code == 0 else "refused"),
                      tuple(reasons))


def run(ctx: RunContext) -> None:
    for step in ctx.control.post_steps:
        ctx.ui.event("post-step", name=step.name)
        result = run_one(step, ctx)
        ctx.post.append(result)
        ctx.ui.event("post-step-done", name=step.name, exit_code=result.exit_code,
                     verdict=result.verdict)
