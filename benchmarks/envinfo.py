"""Where the figures were taken: enough to tell two latest.json files apart."""

from __future__ import annotations

import os
import platform
import ssl
import subprocess
import sys
from datetime import UTC, datetime

from benchmarks.common import REPO, Config


def _out(argv: list[str]) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return [x for x in ("sha_ni", "avx2", "avx512f") if x in flags]
    except OSError:
        pass
    return []


def environment(cfg: Config) -> dict:
    return {
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "quick": cfg.quick,
        "git_commit": _out(["git", "-C", str(REPO), "rev-parse", "HEAD"]),
        "git_dirty": bool(_out(["git", "-C", str(REPO), "status", "--porcelain"])),
        "python": sys.version.split()[0],
        "openssl": ssl.OPENSSL_VERSION,
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cores": len(os.sched_getaffinity(0)),
        "mem_total_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
                              1),
        "docker": _out(["docker", "version", "--format", "{{.Server.Version}}"]),
        "docker_storage": _out(["docker", "info", "--format", "{{.Driver}}"]),
        "docker_log_driver": _out(["docker", "info", "--format", "{{.LoggingDriver}}"]),
        "sha256sum": (_out(["sha256sum", "--version"]) or "").splitlines()[0] or None,
        "image_id": cfg.image_id,
        "notes": cfg.notes,
    }
