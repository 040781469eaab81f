"""The pin rules (measure.imagepin), the archive reader and the lock schema, without Docker."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput, Refused
from harness.config.loader import load_model
from harness.config.schema import ImageLock, LockedImage
from harness.judge.doctor.checks import judge_images
from harness.measure import images
from harness.measure.imagepin import check_name, check_ref, decide_pin, how_to_obtain
from harness.measure.images import image_ids, inspect_archive

A, B, C = ("sha256:" + c * 64 for c in "abc")
AT = "2026-11-30T08:30:00.000000Z"
NEVER = ("re-pin", "re-lock", "repin", "relock", "images pin")


def entry(image_id: str, **kw) -> LockedImage:
    return LockedImage(id=image_id, ref="app:1", store="overlay2", **kw)


def decide(old, new, replace=False, reason=None):
    return decide_pin("app", old, new, replace=replace, reason=reason, user="alice (uid 1000)",
                      at=AT)


# ----------------------------------------------------------------- decide_pin


def test_a_new_name_is_pinned_with_no_history():
    d = decide(None, entry(A))
    assert (d.action, d.write, d.entry.id, d.entry.history) == ("new", True, A, [])


def test_the_same_id_again_changes_nothing():
    old = entry(A)
    d = decide(old, entry(A))
    assert (d.action, d.write, d.entry) == ("same", False, old)
    assert "no change" in d.describe("app")[0]


def test_the_same_id_through_another_ref_keeps_the_entry():
    old = entry(A)
    d = decide(old, LockedImage(id=A, ref=A, store="overlay2"))
    assert (d.action, d.write, d.entry.ref) == ("same", False, "app:1")


def test_the_same_id_may_gain_its_source_and_keeps_its_history():
    old = decide(entry(C), entry(A), True, "first").entry
    d = decide(old, entry(A, build="make image"))
    assert (d.action, d.write) == ("same", True)
    assert d.entry.build == "make image" and d.entry.history == old.history


def test_another_id_is_refused_without_replace_naming_both_ids():
    with pytest.raises(Refused) as e:
        decide(entry(A, build="make image"), entry(B))
    assert e.value.code == 1 and e.value.rule == "IMAGE-PIN-EXISTS"
    assert A in e.value.message and B in e.value.message
    assert "--replace --reason" in e.value.message
    assert "rebuild it reproducibly: make image" in e.value.message


def test_replace_with_a_reason_keeps_the_history_and_drops_the_old_source():
    first = decide(entry(A, archive={"sha256": "d" * 64, "name": "a.tar"}), entry(B), True,
                   "new driver").entry
    second = decide(first, entry(C), True, "back to c")
    assert second.action == "replace" and second.old_id == B and second.entry.id == C
    assert [(h.old, h.new, h.reason) for h in second.entry.history] == [
        (A, B, "new driver"), (B, C, "back to c")]
    assert second.entry.history[0].user == "alice (uid 1000)" and second.entry.history[0].at == AT
    assert first.archive is None  # a.tar describes A, not B
    lines = second.describe("app")
    assert f"  old: {B}" in lines and f"  new: {C}" in lines


@pytest.mark.parametrize("replace, reason", [(True, None), (False, "why"), (True, ""),
                                             (True, "two\nlines"), (True, "esc\x1b[31m")])
def test_replace_and_reason_go_together_and_the_reason_is_one_printable_line(replace, reason):
    with pytest.raises(InvalidInput):
        decide(entry(A), entry(B), replace, reason)


# ----------------------------------------------------------------- names and refs


@pytest.mark.parametrize("name", ["x\n", "", "-x", "a/b", "x" * 65, "a b"])
def test_bad_names_are_invalid_input(name):
    with pytest.raises(InvalidInput) as e:
        check_name(name)
    assert e.value.code == 2 and "image name" in e.value.message


@pytest.mark.parametrize("ref", ["", "a\nb", "app:1\n", " app", "a b", "a\x00"])
def test_bad_refs_are_invalid_input(ref):
    with pytest.raises(InvalidInput) as e:
        check_ref(ref)
    assert e.value.code == 2 and "image reference" in e.value.message


@pytest.mark.parametrize("ref", ["harness-rehearsal:local", A, "379ff88161e4",
                                 "localhost:5000/a/b:c", "r.io/a@" + A])
def test_good_refs_pass(ref):
    check_ref(ref)


# ----------------------------------------------------------------- advice


def test_advice_names_the_archive_the_digest_and_the_build_never_a_repin():
    text = how_to_obtain(entry(A, archive={"sha256": "d" * 64, "name": "seed.tar"},
                               repo_digest="r.io/seed@" + B, build="make image").model_dump())
    assert f"docker load -i seed.tar (archive sha256 {'d' * 64})" in text
    assert f"docker pull r.io/seed@{B}" in text and "rebuild it reproducibly: make image" in text
    bare = how_to_obtain({"id": A})
    assert "no source" in bare
    for t in (text, bare):
        assert not any(word in t for word in NEVER)


def test_doctor_and_verify_give_that_advice_for_a_missing_image():
    pinned = entry(A, archive={"sha256": "d" * 64, "name": "seed.tar"})
    [line] = judge_images({"seed": pinned.model_dump()}, {"seed": None}, {}, "overlay2")
    assert line.status == "fail" and "docker load -i seed.tar" in line.detail
    assert not any(word in line.detail for word in NEVER)
    check = images.compare("seed", pinned, None)
    assert not check.ok and "docker load -i seed.tar" in check.describe()


# ----------------------------------------------------------------- the lock file


def test_a_lock_with_history_and_source_round_trips(tmp_path):
    d = decide(entry(A), entry(B, archive={"sha256": "d" * 64, "name": "b.tar"},
                                build="make image"), True, "rebuilt: new snapshot")
    path = tmp_path / "images.lock"
    path.write_text(images.render(ImageLock(images={"app": d.entry})))
    assert images.read(path).images["app"] == d.entry


@pytest.mark.parametrize("field, value", [
    ("ref", "a\nb"), ("ref", ""), ("build", "x\x1b[2J"), ("archive", {"sha256": "z"}),
    ("archive", {"sha256": "d" * 64, "name": "../x.tar"}), ("repo_digest", "app:1"),
    ("history", [{"at": AT, "old": A, "new": B, "reason": "a\nb", "user": "u"}]),
])
def test_the_lock_schema_refuses_text_that_could_forge_output(tmp_path, field, value):
    path = tmp_path / "images.lock"
    path.write_text(json.dumps({"images": {"app": {"id": A, field: value}}}))
    lock, _, faults = load_model(path, ImageLock)
    assert lock is None and faults


# ----------------------------------------------------------------- archives


def tar_of(members: list[tuple[str, bytes | None]]) -> io.BytesIO:
    """A tar in memory; content None makes a symlink to manifest.json's target."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


CONFIG = b'{"architecture":"amd64"}'
CONFIG_ID = "sha256:" + hashlib.sha256(CONFIG).hexdigest()


def manifest(config_name: str) -> bytes:
    return json.dumps([{"Config": config_name, "Layers": []}]).encode()


def test_an_archive_proves_its_config_id_by_hashing_it():
    name = CONFIG_ID.removeprefix("sha256:") + ".json"
    assert image_ids(tar_of([(name, CONFIG), ("manifest.json", manifest(name))]), "t") == {
        CONFIG_ID}


def test_a_manifest_cannot_claim_an_id_its_blob_does_not_hash_to():
    forged = A.removeprefix("sha256:") + ".json"
    assert image_ids(tar_of([(forged, CONFIG), ("manifest.json", manifest(forged))]), "t") == {
        CONFIG_ID}


def test_an_oci_index_names_the_containerd_id():
    digest = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
    index = json.dumps({"manifests": [{"digest": digest}]}).encode()
    blob = "blobs/sha256/" + digest.removeprefix("sha256:")
    assert image_ids(tar_of([(blob, CONFIG), ("index.json", index)]), "t") == {digest}


@pytest.mark.parametrize("members, said", [
    ([("manifest.json", manifest("c.json")), ("manifest.json", b"[]")], "two members"),
    ([("manifest.json", None)], "no manifest.json"),
    ([("other", b"x")], "no manifest.json"),
    ([("manifest.json", b"[" * 5000)], "not valid JSON"),
    ([("manifest.json", b" " * (2 << 20))], "more than"),
])
def test_hostile_archives_are_invalid_input(members, said):
    with pytest.raises(InvalidInput) as e:
        image_ids(tar_of(members), "t")
    assert said in e.value.message


def test_a_file_that_is_not_a_tar_is_invalid_input(tmp_path: Path):
    p = tmp_path / "x.tar"
    p.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(InvalidInput, match="not a tar archive"):
        inspect_archive(p)


def test_inspect_archive_hashes_the_same_bytes_it_reads(tmp_path: Path):
    name = CONFIG_ID.removeprefix("sha256:") + ".json"
    p = tmp_path / "a.tar"
    p.write_bytes(tar_of([(name, CONFIG), ("manifest.json", manifest(name))]).getvalue())
    assert inspect_archive(p) == (hashlib.sha256(p.read_bytes()).hexdigest(), {CONFIG_ID})
