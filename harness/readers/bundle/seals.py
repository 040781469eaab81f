"""Which seals a bundle may hold, and whether each run in it is sealed and intact.

Run verdicts have one owner, `verify_folder` (behind `harness verify`), used at export and
at verify, so a bundle never vouches for a run `harness verify` refuses. A SHA256SUMS
outside a run would read, to a reviewer running `sha256sum -c`, as a seal over files no
run ever sealed, so it is refused."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.base.tree import Entry
from harness.measure.runfolder.layout import ADDENDA, RECORD, SUMS
from harness.measure.runfolder.manifest import verify_folder
from harness.readers.bundle.bag import bundled_folder
from harness.readers.bundle.payload import NIGHT_RECORD, ancestors, find_run_dirs
from harness.readers.bundle.sums import BundleFault

_DETAIL = {
    "changed": f"differs from its run's {SUMS}",
    "missing": f"listed in its run's {SUMS}, not present",
    "extra": f"not listed in any {SUMS} of its run",
}


def bag_runs(payload: list[str]) -> list[str]:
    """The run folders of a payload: folders holding run.json, inside a bundled folder
    `data/<name>/` or `data/nights/<name>/` (never data/ itself), not nested in another run."""
    return find_run_dirs(p for p in payload if bundled_folder(p) is not None)


def layout_problems(payload: list[str], runs: list[str] | None = None) -> list[BundleFault]:
    """Problems with the shape of a payload ({data/...} file paths)."""
    in_runs = set(bag_runs(payload) if runs is None else runs)
    problems: list[BundleFault] = []
    bundled: dict[str, bool] = {}
    for path in sorted(payload):
        folder = bundled_folder(path)
        if folder is None:
            problems.append(BundleFault("stray", path, "a payload file outside any bundled folder"))
            continue
        in_run = any(a in in_runs for a in ancestors(path))
        night = path == f"{folder}/{NIGHT_RECORD}"
        bundled[folder] = bundled.get(folder, False) or in_run or night
        if not in_run and path.rsplit("/", 1)[-1] == SUMS:
            problems.append(BundleFault(
                "misplaced-seal", path,
                f"not in a run folder; only a run ({RECORD} beside it) and its "
                f"{ADDENDA}/<name>/ may hold a {SUMS}"))
    problems.extend(BundleFault("not-a-run", folder,
                            f"no {RECORD} or {NIGHT_RECORD} in it: not a run or night")
                    for folder, has_run in sorted(bundled.items()) if not has_run)
    return problems


def run_digests(hashes: Mapping[str, str], runs: list[str]) -> dict[str, dict[str, str]]:
    """{run: {path inside the run: hex}} from a bag's {path: hex}, each path given to the
    run holding it (runs are never nested: `bag_runs`). Pure."""
    index = set(runs)
    out: dict[str, dict[str, str]] = {r: {} for r in runs}
    for path, digest in hashes.items():
        for a in ancestors(path):
            if a in index:
                out[a][path[len(a) + 1:]] = digest
                break
    return out


def run_problems(folder: Path, label: str, digests: Mapping[str, str] | None = None,
                 entries: list[Entry] | None = None) -> list[BundleFault]:
    """`harness verify`'s verdict on one run folder, as bundle problems under `label`."""
    try:
        found = verify_folder(folder, digests, entries)
    except OSError as e:
        return [BundleFault("unreadable", label, e.strerror or str(e))]
    problems = []
    for p in found:
        kind = str(p.kind)
        if kind == "no-manifest":
            problems.append(BundleFault("unsealed", label, f"run folder has no {SUMS}"))
            continue
        detail = str(getattr(p, "detail", "") or _DETAIL.get(kind, ""))
        rel = str(p.path).strip("/")
        problems.append(BundleFault(kind, f"{label}/{rel}" if rel else label, detail))
    return problems
