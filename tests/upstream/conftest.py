"""Fixtures of the upstream tier: real vLLM (from PyPI, in .upstream-venv) on a CPU machine.

Run by `make test-upstream`: `.upstream-venv/bin/python -m pytest tests/upstream` with
HARNESS_UPSTREAM=1 (tests/conftest.py leaves this folder out of the default suite).
Without vLLM every test here fails with a message saying how to build the venv: the tier
never skips, because a skipped tier would look like a passing one.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "upstream-venv.sh"
SCENARIO = Path(__file__).with_name("rocm_scenario.py")

# vLLM chooses its platform once per process. The in-process tests use the CPU platform,
# which builds a VllmConfig without a model; the ROCm scenario runs in its own interpreter.
os.environ["VLLM_TARGET_DEVICE"] = "cpu"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# What the scenario's observation documents name as their source: the tier has no run
# folder or image, so it says so (the finalizer needs both sides to record something).
SOURCE_ENV = {"HARNESS_SEAL": "upstream-tier: no run folder, no seal",
              "HARNESS_IMAGE_ID": "upstream-tier: no image, vllm from PyPI"}


def pinned_vllm_version() -> str:
    """The version scripts/upstream-venv.sh installs: one pin, read from one place."""
    match = re.search(r'^VLLM_VERSION="([^"]+)"', SCRIPT.read_text(), re.MULTILINE)
    assert match, f"no VLLM_VERSION=... line in {SCRIPT}"
    return match.group(1)


def vllm_problem() -> str | None:
    """Why vLLM at the pinned version cannot be used here, or None when it can."""
    want = pinned_vllm_version()
    try:
        import vllm
        import vllm.config
    except Exception as e:
        return (f"vLLM does not import in {sys.executable}: {type(e).__name__}: {e}. "
                "Build the upstream venv with `bash scripts/upstream-venv.sh` and run "
                "`make test-upstream`.")
    if vllm.__version__ != want:
        return (f"vLLM {vllm.__version__} is installed, the tier pins {want}: "
                "rebuild with UPSTREAM_VENV_REBUILD=1 bash scripts/upstream-venv.sh")
    return None


@pytest.fixture(scope="session")
def vllm() -> ModuleType:
    """The real vLLM package, or a failure naming what stopped it."""
    problem = vllm_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    import vllm

    return vllm


def source_of(spec_name: str) -> Path | None:
    """A vLLM module's file without importing it (rocm.py cannot import without amdsmi)."""
    spec = importlib.util.find_spec(spec_name)
    return Path(spec.origin) if spec and spec.origin else None


def line_of(path: Path, needle: str) -> int | None:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    return None


def upstream_locations() -> dict[str, str]:
    """Where the facts the harness depends on sit in the installed vLLM (file:line)."""
    import vllm
    from vllm.config.compilation import CompilationMode, CUDAGraphMode

    base = Path(vllm.__file__).resolve().parent.parent
    out = {}
    for cls in (CompilationMode, CUDAGraphMode):
        lines, start = inspect.getsourcelines(cls)
        rel = Path(inspect.getsourcefile(cls)).resolve().relative_to(base)
        out[cls.__name__] = f"{rel}:{start}-{start + len(lines) - 1}"
    rocm = source_of("vllm.platforms.rocm")
    vllm_py = source_of("vllm.config.vllm")
    if rocm:
        rel = rocm.resolve().relative_to(base)
        out["apply_config_platform_defaults"] = (
            f"{rel}:{line_of(rocm, 'def apply_config_platform_defaults')}")
        append = line_of(rocm, 'custom_ops.append("+sparse_attn_indexer")')
        out["unguarded append"] = f"{rel}:{append}"
    if vllm_py:
        out["call site in __post_init__"] = (
            f"{vllm_py.resolve().relative_to(base)}:"
            f"{line_of(vllm_py, 'current_platform.apply_config_platform_defaults(self)')}")
    return out


def upstream_summary() -> list[str]:
    """Which vLLM and torch ran, and where the pinned facts sit in this install."""
    problem = vllm_problem()
    if problem:
        return [problem]
    import torch
    import vllm

    lines = [f"vllm {vllm.__version__} (pinned {pinned_vllm_version()}), "
             f"torch {torch.__version__}, python {sys.version.split()[0]}"]
    lines += [f"{name}: {where}" for name, where in upstream_locations().items()]
    return lines


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the installed locations even under -q: a drifted line is reported here."""
    terminalreporter.section("upstream tier")
    for line in upstream_summary():
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def rocm_scenario(vllm: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run rocm_scenario.py in a fresh interpreter and return what it recorded.

    Fresh, because vLLM's platform is chosen once per process and the scenario needs the
    ROCm one (picked by vLLM's own detection through the stand-in amdsmi)."""
    out = tmp_path_factory.mktemp("rocm-scenario")
    env = {k: v for k, v in os.environ.items() if k != "VLLM_TARGET_DEVICE"}
    env.update(SOURCE_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, str(SCENARIO), str(out)], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env)
    if proc.returncode != 0:
        pytest.fail(f"the ROCm scenario failed (exit {proc.returncode}):\n"
                    f"{proc.stderr[-4000:]}", pytrace=False)
    result = json.loads((out / "result.json").read_text())
    records = [json.loads(line) for line in
               (out / "transitions.jsonl").read_text().splitlines()]
    return {"dir": out, "result": result, "trace": records, "stderr": proc.stderr}
