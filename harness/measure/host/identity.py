"""The host identity snapshot taken before and after each run, and the drift between two.

A run's numbers mean something only on the host they were measured on: `drift` names every
field that changed between a run's two snapshots, which refuses it under rule HOST-DRIFT.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.base import bounds
from harness.base.bounds import BadText
from harness.base.timeutil import utc_now
from harness.measure import engine
from harness.measure.host import tools
from harness.measure.host.tools import ToolRun, read_amd_smi, read_rocminfo
from harness.measure.imagestore import image_store

SCHEMA = "harness.host/v1"
# Fields that differ between two snapshots of an unchanged host.
VOLATILE_KEYS = frozenset({"taken_at", "uptime_s"})
_ABSENT = "<absent>"


def _read(path: Path) -> str | None:
    """A small sysfs/procfs/etc file, stripped; None when absent or unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def parse_os_release(text: str | None) -> dict[str, str] | None:
    """`KEY=value` lines of os-release(5), quotes removed."""
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip().strip("\"'")
    return out


def docker_engine(client: Any | None = None) -> dict[str, Any]:
    """The engine's identity: version, API, storage driver, image store, runtime commits."""
    if client is None:
        client, err = engine.try_client()
        if client is None:
            return {"absent": err}
    version, info, err = engine.facts(client)
    if err or version is None or info is None:
        return {"absent": err}
    return {
        "version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "storage_driver": info.get("Driver"),
        "image_store": image_store(info),
        "containerd": (info.get("ContainerdCommit") or {}).get("ID"),
        "runc": (info.get("RuncCommit") or {}).get("ID"),
        "root_dir": info.get("DockerRootDir"),
    }


def amdgpu_versions(root: Path) -> dict[str, str | None]:
    """Driver and ROCm versions; inbox kernel drivers have no /sys/module/amdgpu/version."""
    return {
        "amdgpu_module_version": _read(root / "sys/module/amdgpu/version"),
        "amdgpu_srcversion": _read(root / "sys/module/amdgpu/srcversion"),
        "rocm_version": _read(root / "opt/rocm/.info/version"),
    }


def firmware(root: Path) -> dict[str, Any]:
    """VBIOS and per-block firmware versions of each amdgpu card, where sysfs exposes them."""
    cards: dict[str, Any] = {}
    for card in sorted((root / "sys/class/drm").glob("card[0-9]*")):
        if "-" in card.name:  # connectors such as card0-DP-1
            continue
        device = card / "device"
        driver = device / "driver"
        if not driver.exists() or os.path.basename(os.path.realpath(driver)) != "amdgpu":
            continue
        fw = {p.name.removesuffix("_fw_version"): _read(p)
              for p in sorted((device / "fw_version").glob("*_fw_version"))}
        cards[card.name] = {"pci": os.path.basename(os.path.realpath(device)),
                            "vbios_version": _read(device / "vbios_version"), "fw": fw}
    return cards


def gpu_static(rocminfo_run: ToolRun, amd_smi_run: ToolRun) -> dict[str, Any]:
    """GPU static info from both tools, via the doctor's parsers; an absent tool says why."""
    _, report, r_err = read_rocminfo(rocminfo_run)
    _, smi, s_err = read_amd_smi(amd_smi_run)
    return {
        "rocminfo": {"absent": r_err} if report is None else asdict(report),
        "amd_smi": {"absent": s_err} if smi is None else [asdict(g) for g in smi],
    }


def _uptime(text: str | None) -> float:
    """The first figure of /proc/uptime (`12345.67 23456.78`), bounded; this process's
    monotonic clock when it is absent or not such a figure."""
    try:
        return bounds.parse_decimal((text or "").split(" ", 1)[0], "the uptime")
    except BadText:
        return time.monotonic()


def snapshot(*, root: Path = Path("/"), docker_client: Any | None = None,
             tool_timeout: float = 20.0, search_path: str | None = None) -> dict[str, Any]:
    """Take the host identity now. `root` relocates /proc, /sys, /etc and /opt (for tests)."""
    uptime, uname = _read(root / "proc/uptime"), os.uname()
    return {
        "schema": SCHEMA,
        "taken_at": utc_now(),
        "uptime_s": _uptime(uptime),
        "hostname": socket.gethostname(),
        "boot_id": _read(root / "proc/sys/kernel/random/boot_id"),
        "kernel": {k: getattr(uname, k) for k in ("sysname", "release", "version", "machine")},
        "os_release": parse_os_release(_read(root / "etc/os-release")
                                       or _read(root / "usr/lib/os-release")),
        "docker": docker_engine(docker_client),
        "driver": amdgpu_versions(root),
        "gpu": gpu_static(tools.rocminfo(tool_timeout, search_path),
                          tools.amd_smi_static(tool_timeout, search_path)),
        "firmware": firmware(root),
    }


# --------------------------------------------------------------------------- drift


def _flatten(value: Any, prefix: str, ignore: frozenset[str], out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        if not value and prefix:
            out[prefix] = {}
        for key, sub in value.items():
            if str(key) in ignore:
                continue
            _flatten(sub, f"{prefix}.{key}" if prefix else str(key), ignore, out)
    elif isinstance(value, list | tuple):
        if not value and prefix:
            out[prefix] = []
        for i, sub in enumerate(value):
            _flatten(sub, f"{prefix}[{i}]", ignore, out)
    else:
        out[prefix] = value


def drift(before: Mapping[str, Any], after: Mapping[str, Any],
          ignore: Iterable[str] = VOLATILE_KEYS) -> list[str]:
    """Every field that differs, as `path: before -> after`, sorted; keys in `ignore` are
    skipped at any depth, a field on one side only shows `<absent>` on the other."""
    skip = frozenset(ignore)
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flatten(before, "", skip, a)
    _flatten(after, "", skip, b)
    changes = []
    for path in sorted(a.keys() | b.keys()):
        old, new = a.get(path, _ABSENT), b.get(path, _ABSENT)
        if old != new or type(old) is not type(new):
            changes.append(f"{path}: {_show(old)} -> {_show(new)}")
    return changes


def _show(value: Any) -> str:
    return value if value is _ABSENT else repr(value)

