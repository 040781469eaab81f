"""What a `sealed: false` or read-write mount held, as a plain repeat judges it: the digest
taken at preflight (real files, a real stat cache), compared by the pure `mounts_topic`
and `compare`, rendered by `harness diff` and `harness rerun`. Every way a mount's content
can change must make two runs "not a repeat"; a mount not known (an older run, a bound
passed, a hostile record) must never read as "same"."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli.diff import render
from harness.config.mountable import digested
from harness.config.schema import Mount
from harness.driver.rerun import RerunPlan, seal_lines
from harness.judge.difference import compare, mounts_topic, recorded_mounts
from harness.measure import mountdigest
from harness.measure.runfolder import runjson
from harness.measure.seal import SourceSeal, seal_digest

TARGET = "/opt/env"
FILES = {"harness/a.py": "11", "input/controls/c.yaml": "22"}


def anywhere(_: Path) -> bool:
    return True


def make_mount(root: Path) -> Path:
    src = root / "env"
    (src / "lib").mkdir(parents=True)
    (src / "run.py").write_text("print('hello')\n")
    (src / "lib" / "a.txt").write_text("alpha\n")
    os.symlink("run.py", src / "entry")
    outside = root / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("outside\n")
    os.symlink(str(outside), src / "linked")  # a folder link: never followed
    return src


def take(src: Path, *, read_only: bool = True, cache: Path | None = None,
         **limits: int) -> mountdigest.MountDigest:
    entries = mountdigest.modelcache.load(cache) if cache else {}
    updates: dict[str, dict] = {}
    found = mountdigest.digest_mount(
        Mount(source=str(src), target=TARGET, read_only=read_only, sealed=False),
        src.parent, anywhere, entries, updates, **limits)
    if cache is not None and updates:
        mountdigest.modelcache.save(cache, updates)
    return found


def edit_keeping_size_and_mtime(src: Path) -> None:
    f = src / "run.py"
    st = f.stat()
    f.write_text("print('HELLO')\n")  # same length
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


def retarget(src: Path) -> None:
    os.unlink(src / "entry")
    os.symlink("lib/a.txt", src / "entry")


VARIANTS: dict[str, tuple[Callable[[Path], None], bool]] = {
    # name: (the change, whether the mount's content is still the same)
    "nothing changed": (lambda s: None, True),
    "a script edited in place, size and mtime put back": (edit_keeping_size_and_mtime, False),
    "a file added": (lambda s: (s / "lib" / "b.txt").write_text(""), False),
    "a file removed": (lambda s: (s / "lib" / "a.txt").unlink(), False),
    "a mode change": (lambda s: (s / "run.py").chmod(0o755), False),
    "a symlink retargeted": (retarget, False),
    "an empty folder added": (lambda s: (s / "new").mkdir(), False),
    "a file renamed": (lambda s: (s / "lib" / "a.txt").rename(s / "lib" / "c.txt"), False),
    "a file behind a linked folder (never followed)":
        (lambda s: (s.parent / "outside" / "x.txt").write_text("changed\n"), True),
    "atime and mtime only": (lambda s: os.utime(s / "run.py", (1, 1)), True),
}


@pytest.mark.parametrize("read_only", [True, False], ids=["sealed-false", "read-write"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_change_of_a_mount_is_not_a_plain_repeat(tmp_path, variant, read_only) -> None:
    """With a warm cache (stored at once: racy_ns 0), so a cached digest never hides a
    change: ctime moves on every write, chmod and utime."""
    change, same = VARIANTS[variant]
    src = make_mount(tmp_path)
    cache = tmp_path / "cache.json"
    before = take(src, read_only=read_only, cache=cache, racy_ns=0)
    assert take(src, read_only=read_only, cache=cache, racy_ns=0).read == 0  # all cached
    change(src)
    after = take(src, read_only=read_only, cache=cache, racy_ns=0)
    assert before.digest and after.digest, (before.why, after.why)
    topic = mounts_topic(({TARGET: before.record()}, None), ({TARGET: after.record()}, None))
    assert topic["same"] is same
    doc = compare(side(before.record()), side(after.record()))
    assert doc["repeat"]["plain"] is same
    text = render(doc)
    if same:
        assert any(line.startswith("plain repeat:") for line in text), text
    else:
        assert "not a repeat: mounts (/opt/env) changed" in text, text
        assert any(line.startswith("    /opt/env: differs (a: ") for line in text), text


def rec(status: str = "accepted") -> dict:
    return {"schema": runjson.SCHEMA, "run_id": f"run-{status}", "attempt": 1,
            "status": status, "reasons": [], "rules": [], "seal": seal_digest(FILES),
            "image": {"name": "r", "id": "sha256:i"}, "model_hashes": {},
            "campaign": {"name": "c"}, "control": {"name": "k"},
            "provenance": {"commit": "1" * 40, "dirty": False, "changed": []}}


def side(*mounts: dict | None, preflight: dict | None = None, resolved: dict | None = None
         ) -> dict:
    """A run whose every other input topic is the same as any other side's."""
    pre = {"source_seal": {"seal": seal_digest(FILES), "files": FILES}}
    pre.update({"mounts": list(mounts)} if preflight is None else preflight)
    return {"dir": "/runs/x", "record": rec(), "preflight": pre, "notes": [],
            "resolved": resolved,
            "vector": {"argv": ["docker", "run", "--env", "A=1", "img"]},
            "inputs": {"control": {"text": "name: k\n"}, "campaign": {"text": "name: c\n"}}}


DIGEST = "sha256:" + "a" * 64
GOOD = {"target": TARGET, "digest": DIGEST, "counts": {"files": 3}, "bytes": 10}
UNSEALED = {"source": "../env", "target": TARGET, "read_only": True, "sealed": False}
SEALED = {"source": "../code", "target": "/code", "read_only": True, "sealed": True}

NOT_KNOWN = {
    # name: the preflight keys (or resolved control) of the run that is not known
    "an older run: no mounts recorded, its control mounts an environment":
        ({"preflight": {}, "resolved": {"control": {"mounts": [UNSEALED]}}},
         "a run made before the harness digested mount contents"),
    "an older run that kept no inputs at all": ({"preflight": {}}, "not recorded"),
    "preflight stopped before the mounts": ({"preflight": {"mounts": None}}, "stopped"),
    "the mount too large to digest":
        ({"preflight": {"mounts": [{**GOOD, "digest": None,
                                    "why": "holds over 64 GiB: too large to digest"}]}},
         "too large"),
    "a digest that is not one": ({"preflight": {"mounts": [{**GOOD, "digest": "sha256:x"}]}},
                                 "no digest recorded"),
    "a digest that is not text": ({"preflight": {"mounts": [{**GOOD, "digest": 7}]}},
                                  "no digest recorded"),
    "mounts that are not a list": ({"preflight": {"mounts": {"x": 1}}}, "not a list"),
    "an entry with no target": ({"preflight": {"mounts": [{"digest": DIGEST}]}}, "no target"),
    "one target twice": ({"preflight": {"mounts": [GOOD, {**GOOD, "digest": None}]}},
                         "twice"),
    "a hostile why": ({"preflight": {"mounts": [{**GOOD, "digest": None,
                                                 "why": "\x1b[31mfine\nsame"}]}}, "fine"),
}


@pytest.mark.parametrize("variant", list(NOT_KNOWN))
def test_a_mount_not_known_is_never_the_same(variant) -> None:
    kw, why = NOT_KNOWN[variant]
    known = side(GOOD)
    unknown = side(**kw)
    for a, b in ((known, unknown), (unknown, known)):
        doc = compare(a, b)
        topic = doc["topics"]["mounts"]
        assert topic["same"] is None and doc["repeat"]["plain"] is None
        assert "mounts" in doc["repeat"]["unknown"]
        said = "\n".join(render(doc))
        assert "plain repeat" not in said and "mounts: not known, never the same" in said
        assert why in said and "\x1b" not in said and "fine\nsame" not in said


def test_an_older_run_whose_control_had_no_mount_to_digest_is_known() -> None:
    """Its control, as it kept it, mounts nothing outside the seal: nothing to compare."""
    old = side(preflight={}, resolved={"control": {"mounts": [SEALED]}})
    assert recorded_mounts(old["preflight"], old["resolved"]) == ({}, None)
    doc = compare(old, side())
    assert doc["topics"]["mounts"]["same"] is True and doc["repeat"]["plain"] is True
    assert "mounts: none outside the seal in either run" in render(doc)
    hostile = side(preflight={}, resolved={"control": {"mounts": [{**SEALED, "sealed": 1}]}})
    assert compare(hostile, side())["topics"]["mounts"]["same"] is None


def test_a_mount_in_one_run_only_differs() -> None:
    doc = compare(side(GOOD), side())
    assert doc["topics"]["mounts"]["same"] is False and doc["repeat"]["changed"] == ["mounts"]
    assert "    /opt/env: only in a" in render(doc)
    other = {**GOOD, "target": "/other"}
    assert compare(side(GOOD), side(GOOD, other))["topics"]["mounts"]["same"] is False


def test_bounds_and_paths_no_mount_may_take_are_not_known_and_say_why(tmp_path) -> None:
    src = make_mount(tmp_path)
    assert "entries: too many" in take(src, max_entries=3).why
    assert "too large to digest" in take(src, max_bytes=4).why
    refused = mountdigest.digest_mount(Mount(source=str(src), target=TARGET, sealed=False),
                                       tmp_path, lambda _: False, {}, {})
    assert refused.digest is None and "no mount may go" in refused.why
    assert refused.counts == {}  # never read


def test_special_files_are_listed_never_opened_and_absent_is_a_state(tmp_path) -> None:
    src = make_mount(tmp_path)
    os.mkfifo(src / "pipe")  # opening it for reading would block
    found = take(src)
    assert found.digest and found.counts["others"] == 1 and found.counts["symlinks"] == 2
    absent = take(tmp_path / "missing")
    assert absent.kind == "absent" and absent.digest and absent.digest != found.digest
    single = take(src / "run.py")
    assert single.kind == "file" and single.counts["files"] == 1


def test_the_cache_spares_unchanged_files_and_never_a_rewritten_one(tmp_path) -> None:
    src = make_mount(tmp_path)
    cache = tmp_path / "cache.json"
    cold = take(src, cache=cache, racy_ns=0)
    assert cold.read == 2 and cache.is_file()
    assert take(src, cache=cache, racy_ns=0).read == 0
    edit_keeping_size_and_mtime(src)
    again = take(src, cache=cache, racy_ns=0)
    assert again.read == 1 and again.digest != cold.digest
    fresh = take(src)  # no cache at all: the same digest
    assert fresh.digest == again.digest and fresh.read == 2


def test_the_mount_cache_can_be_moved_or_turned_off(tmp_path) -> None:
    assert mountdigest.cache_path({"HARNESS_MOUNT_CACHE": "off"}) is None
    assert mountdigest.cache_path({"HARNESS_MOUNT_CACHE": str(tmp_path / "c")}) == \
        tmp_path / "c"
    assert mountdigest.cache_path({}).name == mountdigest.CACHE_NAME


def test_only_mounts_outside_the_seal_are_digested() -> None:
    assert not digested(True, True)
    assert all(digested(ro, s) for ro, s in ((True, False), (False, True),
                                                          (False, False), (1, True), (None,
                                                                                   None)))


def _plan(mounts: dict | None, original_seal: str = seal_digest(FILES)) -> RerunPlan:
    return RerunPlan(Path("/r"), runjson.from_dict(rec("refused") | {"seal": original_seal}),
                     None, "c", SourceSeal(seal_digest(FILES), FILES),  # type: ignore[arg-type]
                     {"added": [], "removed": [], "changed": []}, None, mounts)


def test_rerun_says_plain_repeat_only_when_seal_and_mounts_are_unchanged() -> None:
    same = mounts_topic(({TARGET: GOOD}, None), ({TARGET: GOOD}, None))
    assert seal_lines(_plan(same)) == ["plain repeat: seal unchanged, mounts unchanged "
                                       "(/opt/env)"]
    changed = mounts_topic(({TARGET: GOOD}, None),
                           ({TARGET: {**GOOD, "digest": "sha256:" + "b" * 64}}, None))
    lines = seal_lines(_plan(changed))
    assert lines[0] == "not a plain repeat: seal unchanged, but a mount's content changed"
    assert lines[1] == ("  mount /opt/env: differs (a: 3 files, 10 bytes, sha256:aaaaaaaaaaaa; "
                        "b: 3 files, 10 bytes, sha256:bbbbbbbbbbbb)")
    older = mounts_topic((None, "not recorded (older)"), ({TARGET: GOOD}, None))
    lines = seal_lines(_plan(older))
    assert lines == ["repeat not known: seal unchanged, but a mount's content is not known",
                     "  mount /opt/env: not known (a: not recorded (older))"]
    assert seal_lines(_plan(None))[0].startswith("repeat not known")
    assert not any("plain repeat" in line for line in seal_lines(
        _plan(same, original_seal="sha256:" + "0" * 64)))
