"""The wheel and the sdist carry everything a run reads from the package.

Every file git tracks under harness/ must travel: the Python modules, the data files and
the instrument's dist-info, whose entry_points.txt is how vLLM loads the observer inside
the container. Without that dist-info every observed control of an installed harness is
refused GATE0-MISSING, which no test run from the source tree can see.
"""

from __future__ import annotations

import configparser
import subprocess
import tarfile
import zipfile
from pathlib import Path

from tests.installed.conftest import REPO, Dist, Installed

INSTRUMENT = "harness/instrument"
OBSERVER_DIST_INFO = f"{INSTRUMENT}/harness_observer-1.0.dist-info"
PLUGIN_GROUP = "vllm.general_plugins"
# vLLM's plug-in loader (load_plugins_by_group): the group's entry points over sys.path,
# with the instrument's folder put on it as the run's PYTHONPATH does in the container.
LOADER = ("import importlib.metadata as m, sys\n"
          "sys.path.insert(0, sys.argv[1])\n"
          f"print(*sorted(e.value for e in m.entry_points(group={PLUGIN_GROUP!r})))\n")


def tracked(folder: str) -> set[str]:
    """The files git tracks under `folder` of the source tree."""
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--", folder],
                         capture_output=True, check=True).stdout
    return {p for p in out.decode().split("\0") if p and (REPO / p).exists()}


def wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in z.namelist() if not n.endswith("/")}


def sdist_files(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as t:
        top = sdist.name.removesuffix(".tar.gz")
        return {m.name.removeprefix(f"{top}/") for m in t.getmembers() if m.isfile()}


def plugins(entry_points: bytes) -> dict[str, str]:
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.read_string(entry_points.decode())
    return dict(parser[PLUGIN_GROUP]) if parser.has_section(PLUGIN_GROUP) else {}


def test_the_wheel_holds_exactly_the_tracked_package_files(dist: Dist):
    files = wheel_files(dist.wheel)
    in_package = {n for n in files if n.startswith("harness/")}
    want = tracked("harness")
    assert want - in_package == set(), "tracked files missing from the wheel"
    assert in_package - want == set(), "files in the wheel that git does not track"
    for name in want:
        assert files[name] == (REPO / name).read_bytes(), name


def test_the_wheel_registers_the_observer_as_a_vllm_plugin(dist: Dist):
    files = wheel_files(dist.wheel)
    entry = files.get(f"{OBSERVER_DIST_INFO}/entry_points.txt")
    assert entry is not None, f"{OBSERVER_DIST_INFO}/entry_points.txt is not in the wheel"
    assert f"{OBSERVER_DIST_INFO}/METADATA" in files
    found = plugins(entry)
    assert found, f"no [{PLUGIN_GROUP}] entry point in the wheel's instrument"
    for target in found.values():
        module = target.split(":")[0].strip().replace(".", "/")
        assert f"{INSTRUMENT}/{module}.py" in files, target


def test_the_sdist_holds_the_tracked_package_files(dist: Dist):
    files = sdist_files(dist.sdist)
    assert tracked("harness") - files == set(), "tracked files missing from the sdist"
    assert f"{OBSERVER_DIST_INFO}/entry_points.txt" in files


def test_the_installed_instrument_is_found_by_the_plugin_loader(installed: Installed, tmp_path):
    """What vLLM's plug-in loader sees in the container, where the instrument folder is
    on sys.path: here the installed package's own folder, as the run mounts it."""
    instrument = installed.site_packages / "harness" / "instrument"
    r = installed.python("-c", LOADER, str(instrument), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = plugins((REPO / OBSERVER_DIST_INFO / "entry_points.txt").read_bytes())
    assert want and r.stdout.split() == sorted(want.values())
