"""What differs between two runs, as one stable document (`harness diff`): their own figures
(compared by `judge.runfigures`), their outcome and their inputs. Two nights are compared
per control by `judge.nightpairs`, from the documents this module makes.

Every value comes from a run folder and is hostile: it is kept as the JSON value it is,
compared by its canonical JSON text, and made inert only by whoever displays it."""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from harness.base.readfile import InputError, read_text_bounded
from harness.base.shapes import dict_or_empty
from harness.config.mountable import digested
from harness.instrument.harness_observer.interface import ENGINE_CORE, ENV_ENGINE_ARGS
from harness.judge.finalize.documents import DocumentError, read_document
from harness.judge.runfigures import figures_topic
from harness.measure import vectorview
from harness.measure.runfolder import inputs as kept
from harness.measure.runfolder import layout, manifest
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.sealed import read_record
from harness.measure.seal import seal_digest

SCHEMA = "harness.diff/v4"
FILE_LIMIT = 16 * 1024 * 1024
TOPICS = ("figures", "status", "rules", "seal", "inputs", "git", "approval", "image", "model",
          "mounts", "engine", "docker", "env", "gate0")
# What went into a run: two runs the same in all of these are a plain repeat (a rerun that
# changed nothing), whatever their outcome and figures say.
INPUT_TOPICS = ("seal", "inputs", "git", "image", "model", "mounts", "engine", "docker", "env")
MOUNT_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
MOUNTS_NOT_RECORDED = "not recorded (a run made before the harness digested mount contents)"
YAML_INPUTS = ("control", "campaign")  # the kept inputs compared line by line
HUNK_CONTEXT = 3
MAX_HUNK_LINES = 400  # of one file's unified diff; the rest is counted
MAX_COMPARED_LINES = 20_000  # difflib is quadratic at worst: a longer file is not diffed
APPROVAL_KEYS = ("file", "digest", "seal", "commit")
GATE0_STEP = "gate0"
ENV_FLAGS = ("--env", "-e")


# ---- reading a side (I/O, bounded, tolerant) ------------------------------------------------

def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e999: JSON text, but no JSON value
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def loads(text: str) -> Any:
    """Strict JSON: NaN, Infinity and numbers that overflow to them are refused (the diff
    document must itself be JSON that strict readers accept)."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)


def read_json(path: Path, what: str, notes: list[str]) -> Any:
    """A JSON file from a run folder, bounded; None (and a note) if absent or unreadable."""
    try:
        text = read_text_bounded(path, FILE_LIMIT, what=what)
        return loads(text)
    except InputError as e:
        if path.exists() or path.is_symlink():
            notes.append(e.message)
    except (ValueError, RecursionError) as e:
        notes.append(f"{path}: the {what} is not valid JSON ({type(e).__name__})")
    return None


def _fields(path: Path, notes: list[str]) -> dict | None:
    try:
        fields = read_document(path).get("fields")
    except DocumentError as e:
        if path.exists() or path.is_symlink():
            notes.append("; ".join(e.faults)[:2000])
        return None
    return fields if isinstance(fields, dict) else None


def load_side(run_dir: Path) -> dict:
    """Everything `compare` needs from one sealed run folder, read through the one verified reader
    (Refused, exit 1, when the folder was never sealed or fails verification; so every file read
    below is one the seal vouches for); InvalidInput (exit 2) when run.json is not a run record."""
    run_dir = Path(run_dir)
    notes: list[str] = []
    side = {"dir": str(run_dir), "record": read_record(run_dir, loads).raw, "notes": notes}
    side["preflight"] = read_json(run_dir / layout.PREFLIGHT, "preflight record", notes)
    side["vector"] = read_json(run_dir / layout.VECTOR, "docker vector", notes)
    side["metrics"] = read_json(run_dir / layout.METRICS, "metrics", notes)
    side["verdict"] = read_json(run_dir / layout.post_step_file(GATE0_STEP, layout.VERDICT),
                                "Gate-0 verdict", notes)
    obs = run_dir / layout.OBSERVATIONS
    side["startup"] = _fields(obs / layout.STARTUP, notes)
    side["generation"] = _fields(obs / layout.GENERATION, notes)
    side["inputs"] = read_inputs(run_dir)
    side["resolved"] = kept.read_kept_json(run_dir, "resolved")[0]
    return side


def read_inputs(run_dir: Path) -> dict:
    """{name: {"text": the kept YAML or None, "why": why not}} for the compared inputs,
    each read as the bytes the run's SHA256SUMS vouches for."""
    try:
        claims = dict(manifest.load(run_dir / layout.SUMS)[0])
    except (OSError, InputError) as e:
        failed = getattr(e, "message", None) or str(e)[:500]
        return {name: {"text": None, "why": failed} for name in YAML_INPUTS}
    out = {}
    for name in YAML_INPUTS:
        data, why = kept.read_kept(run_dir, name, claims)
        out[name] = {"text": None if data is None else data.decode("utf-8", "replace"),
                     "why": why}
    return out


# ---- pure helpers ---------------------------------------------------------------------------

def canon(value: Any) -> str:
    """The canonical JSON text of a value: what two values are compared by."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        return f"<{type(value).__name__}>"


def scalar(a: Any, b: Any, *, optional: bool = False) -> dict:
    """{"a", "b", "same"}; with `optional`, a side that recorded nothing is not compared."""
    if optional and (a is None or b is None):
        return {"a": a, "b": b, "same": None}
    return {"a": a, "b": b, "same": canon(a) == canon(b)}


def mapping(a: Any, b: Any) -> dict:
    """Two name -> value maps: `added` (only in b), `removed` (only in a), `changed`."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return {"a": a, "b": b, "same": None, "added": {}, "removed": {}, "changed": {}}
    added = {k: b[k] for k in sorted(set(b) - set(a))}
    removed = {k: a[k] for k in sorted(set(a) - set(b))}
    changed = {k: {"a": a[k], "b": b[k]} for k in sorted(set(a) & set(b))
               if canon(a[k]) != canon(b[k])}
    return {"a": a, "b": b, "same": not (added or removed or changed),
            "added": added, "removed": removed, "changed": changed}


def file_changes(before: dict, after: dict) -> dict[str, list[str]]:
    """Pure: the seal's files added, removed and changed between two file lists."""
    return {"added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)),
            "changed": sorted(k for k in set(before) & set(after)
                              if canon(before[k]) != canon(after[k]))}


def seal_files(preflight: Any, seal: Any) -> tuple[dict | None, str | None]:
    """The source seal's file list from a preflight record, or None and why not. A list that
    does not hash to the run's seal is not trusted."""
    files = dict_or_empty(dict_or_empty(preflight).get("source_seal")).get("files")
    if not isinstance(files, dict):
        return None, "no source seal file list in preflight.json"
    if not all(isinstance(v, str) for v in files.values()):
        return None, "preflight.json's seal file list has values that are not digests"
    if seal is not None and seal_digest(files) != seal:
        return None, "preflight.json's file list does not hash to the run's seal"
    return files, None


def engine_args(vector: Any) -> Any:
    """The engine args as launched: the JSON of the HARNESS_ENGINE_ARGS env in the docker
    vector's argv (the raw text when it is not JSON); None when not recorded."""
    argv = dict_or_empty(vector).get("argv")
    if not isinstance(argv, list):
        return None
    prefix = f"{ENV_ENGINE_ARGS}="
    for i, arg in enumerate(argv):
        value = None
        if arg in ENV_FLAGS and i + 1 < len(argv) and isinstance(argv[i + 1], str):
            value = argv[i + 1]
        elif isinstance(arg, str) and arg.startswith("--env="):
            value = arg[len("--env="):]
        if value is not None and value.startswith(prefix):
            try:
                return loads(value[len(prefix):])
            except (ValueError, RecursionError):
                return value[len(prefix):]
    return None


def _engine_topic(va: Any, vb: Any) -> dict:
    """Both runs' engine args, compared wherever both argvs were recorded."""
    launched = all(isinstance(dict_or_empty(v).get("argv"), list) for v in (va, vb))
    return scalar(engine_args(va), engine_args(vb), optional=not launched)


def _lines(text: str) -> list[str]:
    """A file's lines, split at line feeds only (other controls stay, made inert where
    shown); a last line break ends a line."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def yaml_hunk(rel: str, a: str, b: str) -> dict:
    """Pure: {"same", "hunk": unified diff lines (at most MAX_HUNK_LINES), "cut": lines left
    out, "note"} of one kept file in two runs."""
    if a == b:
        return {"same": True, "hunk": [], "cut": 0, "note": None}
    la, lb = _lines(a), _lines(b)
    if max(len(la), len(lb)) > MAX_COMPARED_LINES:
        return {"same": False, "hunk": [], "cut": 0,
                "note": f"over {MAX_COMPARED_LINES} lines: not compared line by line"}
    hunk = list(difflib.unified_diff(la, lb, f"a/{rel}", f"b/{rel}", n=HUNK_CONTEXT,
                                     lineterm=""))
    return {"same": False, "hunk": hunk[:MAX_HUNK_LINES],
            "cut": max(0, len(hunk) - MAX_HUNK_LINES), "note": None}


def _inputs_topic(a: dict, b: dict) -> dict:
    """The control's and the campaign's YAML as each run kept it, compared."""
    files: dict[str, dict] = {}
    for name in YAML_INPUTS:
        sa, sb = (dict_or_empty(dict_or_empty(side.get("inputs")).get(name)) for side in (a, b))
        ta, tb = sa.get("text"), sb.get("text")
        if not isinstance(ta, str) or not isinstance(tb, str):
            why = "; ".join(f"{s}: {w}" for s, w, t in (("a", sa.get("why"), ta),
                                                        ("b", sb.get("why"), tb))
                            if not isinstance(t, str))
            files[name] = {"same": None, "hunk": [], "cut": 0,
                           "note": why or "not recorded"}
        else:
            files[name] = yaml_hunk(kept.KEPT[name], ta, tb)
    found = [f["same"] for f in files.values()]
    same = False if False in found else (True if all(found) else None)
    return {"same": same, "files": files}


def line_changes(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    """Pure: (the lines only in a, the lines only in b), each in its own order, counted
    as a multiset (a line twice in a and once in b is removed once)."""
    def only(xs: list[str], others: list[str]) -> list[str]:
        extra = Counter(xs) - Counter(others)
        out = []
        for line in xs:
            if extra[line] > 0:
                out.append(line)
                extra[line] -= 1
        return out
    return only(a, b), only(b, a)


def _docker_topic(va: vectorview.View | None, vb: vectorview.View | None) -> dict:
    """The launches' argv without the environment, normalised (`measure.vectorview`)."""
    la = va.lines() if va is not None else None
    lb = vb.lines() if vb is not None else None
    out = {"a": la, "b": lb, "elided": list(vectorview.ELIDED)}
    if la is None or lb is None:
        return {**out, "same": None, "removed": [], "added": []}
    removed, added = line_changes(la, lb)
    return {**out, "same": not removed and not added, "removed": removed, "added": added}


def _env_topic(va: vectorview.View | None, vb: vectorview.View | None) -> dict:
    """The environment each container was given (the engine args have their own topic)."""
    def env(v: vectorview.View | None) -> dict | None:
        return None if v is None else {k: x for k, x in v.env.items() if k != ENV_ENGINE_ARGS}
    return {**mapping(env(va), env(vb)), "apart": [ENV_ENGINE_ARGS]}


# ---- mounts ----------------------------------------------------------------------------------

Mounts = tuple[dict[str, dict] | None, str | None]  # (target -> entry, or None; why not)


def recorded_mounts(preflight: Any, resolved: Any) -> Mounts:
    """Pure: each mount a run digested at preflight, by target; or None and why not known.
    A mount either run did not digest is null, never the same."""
    pre = dict_or_empty(preflight)
    if "mounts" in pre:
        listed = pre["mounts"]
        if listed is None:
            return None, "not recorded (preflight stopped before it digested the mounts)"
        if not isinstance(listed, list):
            return None, "preflight.json's mounts are not a list"
        out: dict[str, dict] = {}
        for entry in listed:
            target = dict_or_empty(entry).get("target")
            if not isinstance(target, str):
                return None, "preflight.json's mounts hold an entry with no target"
            if target in out:
                return None, "preflight.json names one mount target twice"
            out[target] = entry
        return out, None
    mounts = dict_or_empty(dict_or_empty(resolved).get("control")).get("mounts")
    if isinstance(mounts, list) and not any(
            not isinstance(m, dict) or digested(m.get("read_only"), m.get("sealed"))
            for m in mounts):
        return {}, None
    return None, MOUNTS_NOT_RECORDED


def mount_digest(entry: Any) -> tuple[str | None, str]:
    """Pure: (a recorded mount entry's digest, or None; why it has none)."""
    digest = dict_or_empty(entry).get("digest")
    if isinstance(digest, str) and MOUNT_DIGEST.fullmatch(digest):
        return digest, ""
    why = dict_or_empty(entry).get("why")
    return None, why if isinstance(why, str) and why else "no digest recorded"


def _mount_row(target: str, a: Mounts, b: Mounts) -> dict:
    """One target in both runs: `same` True or False only when both digests are known (or
    the mount is in one run only: False); else None, with `note` saying why not known."""
    entries = {s: (m[0] or {}).get(target) for s, m in (("a", a), ("b", b))}
    row: dict[str, Any] = {"target": target, **entries, "same": None, "note": None}
    unknown = [f"{s}: {m[1]}" for s, m in (("a", a), ("b", b)) if m[0] is None]
    if not unknown and (entries["a"] is None or entries["b"] is None):
        row["same"], row["note"] = False, "only in " + ("a" if entries["b"] is None else "b")
        return row
    digests = {s: mount_digest(e) for s, e in entries.items() if e is not None}
    unknown += [f"{s}: {why}" for s, (d, why) in digests.items() if d is None]
    if unknown:
        row["note"] = "; ".join(unknown)
        return row
    row["same"] = digests["a"][0] == digests["b"][0]
    return row


def mounts_topic(a: Mounts, b: Mounts) -> dict:
    """Pure: the mounts topic of two runs' recorded mounts (`recorded_mounts`): one row per
    target; `same` False when any mount differs, None when any is not known (or a run's
    list is not known at all), True only when every mount of both runs has one digest."""
    rows = [_mount_row(t, a, b) for t in sorted(set(a[0] or {}) | set(b[0] or {}))]
    found = [r["same"] for r in rows]
    same = False if False in found else (
        None if None in found or a[0] is None or b[0] is None else True)
    note = "; ".join(f"{s}: {m[1]}" for s, m in (("a", a), ("b", b)) if m[0] is None)
    return {"same": same, "mounts": rows, "note": note or None}


def _count(entry: Any) -> str:
    """`3 files, 120 bytes, sha256:0a1b2c3d4e5f` of a recorded mount entry."""
    entry = dict_or_empty(entry)
    counts, size = dict_or_empty(entry.get("counts")), entry.get("bytes")
    files, digest = counts.get("files"), mount_digest(entry)[0]
    said = f"{files} files, {size} bytes" if isinstance(files, int) and isinstance(
        size, int) else "no counts"
    return f"{said}, {digest[:19]}" if digest else said


def mount_words(row: dict) -> str:
    """Pure: one mount row in words; its values come from run folders: the caller makes it inert."""
    target = row.get("target")
    if row.get("same") is True:
        return f"{target}: same ({_count(row.get('a'))})"
    if row.get("same") is False and row.get("note"):
        return f"{target}: {row['note']}"
    if row.get("same") is False:
        return f"{target}: differs (a: {_count(row.get('a'))}; b: {_count(row.get('b'))})"
    return f"{target}: not known ({row.get('note')})"


# ---- the topics -----------------------------------------------------------------------------

def _seal_topic(a: dict, b: dict, ra: run_record.RunRecord, rb: run_record.RunRecord) -> dict:
    out = scalar(ra.seal, rb.seal)
    fa, why_a = seal_files(a.get("preflight"), ra.seal)
    fb, why_b = seal_files(b.get("preflight"), rb.seal)
    out["files"] = file_changes(fa, fb) if fa is not None and fb is not None else None
    out["note"] = None if out["files"] is not None else "; ".join(
        f"{s}: {w}" for s, w in (("a", why_a), ("b", why_b)) if w)
    return out


def git_state_word(provenance: dict) -> str:
    """Pure: `clean`, `dirty`, or `unknown` (git could not tell) of a provenance record."""
    dirty = provenance.get("dirty")
    return "unknown" if not isinstance(dirty, bool) else ("dirty" if dirty else "clean")


def _git_topic(ra: run_record.RunRecord, rb: run_record.RunRecord) -> dict:
    """The git state each run ran at: the commit and the state, each compared."""
    pa, pb = ra.raw.get("provenance"), rb.raw.get("provenance")
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        return {"a": pa if isinstance(pa, dict) else None,
                "b": pb if isinstance(pb, dict) else None, "same": None}
    keys = ("commit", "dirty", "changed", "error")
    out = scalar({k: pa.get(k) for k in keys}, {k: pb.get(k) for k in keys})
    out["commit"] = scalar(pa.get("commit"), pb.get("commit"))
    out["state"] = scalar(git_state_word(pa), git_state_word(pb))
    out["changed"] = scalar(*(run_record.provenance_of(p)["changed"] for p in (pa, pb)))
    return out


def _approval_topic(ra: run_record.RunRecord, rb: run_record.RunRecord) -> dict:
    """The approval each run ran under (when recorded), and for each run whether the
    commit the approval reviewed is the commit the run ran at."""
    pa, pb = (r.raw.get("approval") for r in (ra, rb))
    out = scalar(*({k: p.get(k) for k in APPROVAL_KEYS} if isinstance(p, dict) else None
                   for p in (pa, pb)), optional=True)
    for key, r in (("commit_differs_a", ra), ("commit_differs_b", rb)):
        reviewed = dict_or_empty(r.raw.get("approval")).get("commit")
        ran = dict_or_empty(r.raw.get("provenance")).get("commit")
        out[key] = None if reviewed is None or ran is None else canon(reviewed) != canon(ran)
    return out


def _difference_key(d: dict) -> str:
    """`engine-core: compilation.custom_ops`: a difference named by the process it was
    found in (verdicts before per-process judging name only the field)."""
    process = d.get("process")
    return f"{process}: {d['field']}" if isinstance(process, str) else d["field"]


DIFFERENCE_KEYS = ("field", "process", "kind", "startup", "generation")


def _differences(verdict: Any, keys: tuple[str, ...] = DIFFERENCE_KEYS
                 ) -> dict[str, dict] | None:
    diffs = dict_or_empty(verdict).get("differences")
    if not isinstance(diffs, list):
        return None
    out: dict[str, dict] = {}
    for d in diffs:
        if isinstance(d, dict) and isinstance(d.get("field"), str):
            out.setdefault(_difference_key(d), {k: d.get(k) for k in keys})
    return out


def _observed(side: dict, key: str, found: dict | None, entry: dict) -> dict | None:
    """One run's values of a field: its Gate-0 difference (under `key`), else what its
    engine core observed (the one pair a side loads) when `entry`, the difference the
    other run found, is the engine core's or names no process."""
    if found is not None and key in found:
        return found[key]
    if entry.get("process") not in (None, ENGINE_CORE):
        return None
    field = entry["field"]
    s, g = dict_or_empty(side.get("startup")), dict_or_empty(side.get("generation"))
    if field not in s and field not in g:
        return None
    return {"kind": None, **({"startup": s[field]} if field in s else {}),
            **({"generation": g[field]} if field in g else {})}


def _gate0_topic(a: dict, b: dict) -> dict:
    da, db = _differences(a.get("verdict")), _differences(b.get("verdict"))
    verdict = scalar(dict_or_empty(a.get("verdict")).get("verdict"),
                     dict_or_empty(b.get("verdict")).get("verdict"), optional=True)
    entries = {**(db or {}), **(da or {})}
    fields = [{"field": key, "a": _observed(a, key, da, entry), "b": _observed(b, key, db, entry)}
              for key, entry in sorted(entries.items())]
    only_a = sorted(set(da or {}) - set(db or {}))
    only_b = sorted(set(db or {}) - set(da or {}))
    same = None if da is None or db is None else (
        not only_a and not only_b and all(canon(x["a"]) == canon(x["b"]) for x in fields))
    return {"verdict": verdict, "fields": fields, "only_a": only_a, "only_b": only_b,
            "both": sorted(set(da or {}) & set(db or {})), "recorded": {
                "a": da is not None, "b": db is not None}, "same": same}


def _rules_topic(ra: run_record.RunRecord, rb: run_record.RunRecord) -> dict:
    out = scalar(ra.rules, rb.rules)
    out["only_a"] = sorted(set(ra.rules) - set(rb.rules))
    out["only_b"] = sorted(set(rb.rules) - set(ra.rules))
    return out


def _head(side: dict, rec: run_record.RunRecord) -> dict:
    return {"dir": side.get("dir"), "run_id": rec.run_id, "attempt": rec.attempt,
            "schema": rec.schema or None, "status": rec.status,
            "rerun_of": dict_or_empty(rec.rerun_of).get("run_id"),
            "notes": [n for n in side.get("notes", []) if isinstance(n, str)]}


def compare(a: dict, b: dict) -> dict:
    """Pure: the diff document of two sides."""
    ra, rb = run_record.from_dict(dict_or_empty(a.get("record"))), run_record.from_dict(
        dict_or_empty(b.get("record")))
    va, vb = (vectorview.view(side.get("vector"), r.run_id) for side, r in ((a, ra), (b, rb)))
    topics = {
        "figures": figures_topic(a, b),
        "status": scalar(ra.status, rb.status),
        "rules": _rules_topic(ra, rb),
        "seal": _seal_topic(a, b, ra, rb),
        "inputs": _inputs_topic(a, b),
        "git": _git_topic(ra, rb),
        "approval": _approval_topic(ra, rb),
        "image": scalar(ra.image.get("id"), rb.image.get("id")),
        "model": mapping(ra.model_hashes, rb.model_hashes),
        "mounts": mounts_topic(recorded_mounts(a.get("preflight"), a.get("resolved")),
                               recorded_mounts(b.get("preflight"), b.get("resolved"))),
        "engine": _engine_topic(a.get("vector"), b.get("vector")),
        "docker": _docker_topic(va, vb),
        "env": _env_topic(va, vb),
        "gate0": _gate0_topic(a, b),
    }
    return {"schema": SCHEMA, "a": _head(a, ra), "b": _head(b, rb),
            "differs": [t for t in TOPICS if topics[t]["same"] is False],
            "repeat": repeat(topics), "topics": topics}


def repeat(topics: dict) -> dict:
    """Pure: whether b repeats a: `plain` True when every input topic (INPUT_TOPICS) was
    recorded by both and is the same, False when any differs, None when none differs but
    some were not recorded (then `unknown` names them)."""
    changed = [t for t in INPUT_TOPICS if topics[t]["same"] is False]
    unknown = [t for t in INPUT_TOPICS if topics[t]["same"] is None]
    plain = False if changed else (None if unknown else True)
    return {"plain": plain, "changed": changed, "unknown": unknown}


def gate0_differences(run_dir: Path) -> list[dict]:
    """The fields a run's Gate 0 found differing, from post-steps/gate0/verdict.json (read bounded):
    [{"field", "process", "processes", "kind", "startup", "generation", "outside_engine_hash"}]
    ("process" None in verdicts that name none; "processes" every process that holds the one
    configuration object, None in verdicts before it); [] when none or unreadable."""
    path = Path(run_dir) / layout.post_step_file(GATE0_STEP, layout.VERDICT)
    found = _differences(read_json(path, "Gate-0 verdict", []),
                         (*DIFFERENCE_KEYS, "processes", "outside_engine_hash"))
    return list((found or {}).values())


def exit_status(doc: dict, exit_code: bool) -> int:
    """Pure: `harness diff`'s exit code: 0 without `--exit-code` (both runs were read); with
    it, as `git diff --exit-code`, 1 when any compared topic differs."""
    return 1 if exit_code and doc.get("differs") else 0


def diff_runs(run_a: Path, run_b: Path) -> dict:
    """Read both run folders (nothing is written) and compare them."""
    return compare(load_side(run_a), load_side(run_b))
