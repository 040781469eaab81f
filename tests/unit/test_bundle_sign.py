"""Signed bundles: a listed signer passes; anyone else, or any edit, fails."""

from __future__ import annotations

import shutil

import pytest
from bundle_helpers import make_keys, make_run

from harness.base.errors import InvalidInput
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.safe_extract import unpack
from harness.readers.bundle.verify import verify_bundle, verify_tree

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")

SIG = "tagmanifest-sha256.txt.sig"


@pytest.fixture
def signed(tmp_path):
    """(bundle path, allowed_signers listing alice, allowed_signers listing only mallory)."""
    alice_key, alice_line = make_keys(tmp_path, "alice")
    _, mallory_line = make_keys(tmp_path, "mallory")
    (tmp_path / "allowed").write_text(alice_line)
    (tmp_path / "others").write_text(mallory_line)
    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    out = tmp_path / "signed.tar.gz"
    export_bundle([run], out, sign_key=alice_key)
    return out, tmp_path / "allowed", tmp_path / "others"


def _kinds(report):
    return {(p.kind, p.path) for p in report.problems}


def test_good_signature_passes(signed):
    out, allowed, _ = signed
    report = verify_bundle(out, allowed)
    assert report.ok, report.problems
    assert report.signature == "good signature by alice@example"


def test_signed_exports_are_byte_identical(signed, tmp_path):
    out, _, _ = signed
    run = tmp_path / "gpu-runs" / "r"
    again = tmp_path / "again.tar.gz"
    export_bundle([run], again, sign_key=tmp_path / "alice")
    assert again.read_bytes() == out.read_bytes()


def test_signer_not_in_allowed_signers_fails(signed):
    out, _, others = signed
    report = verify_bundle(out, others)
    assert _kinds(report) == {("bad-signature", SIG)}


def test_signed_but_no_allowed_signers_fails(signed):
    out, _, _ = signed
    assert _kinds(verify_bundle(out)) == {("unverified-signature", SIG)}


def test_unsigned_bundle_fails_when_a_signer_is_required(signed, tmp_path):
    _, allowed, _ = signed
    out = tmp_path / "plain.tar"
    export_bundle([tmp_path / "gpu-runs" / "r"], out)
    assert _kinds(verify_bundle(out, allowed)) == {("unsigned", SIG)}


def test_missing_allowed_signers_file_is_invalid_input(signed, tmp_path):
    out, _, _ = signed
    with pytest.raises(InvalidInput):
        verify_bundle(out, tmp_path / "absent")


def test_every_byte_of_the_signature_and_removing_it(signed, tmp_path):
    out, allowed, _ = signed
    dest = tmp_path / "x"
    dest.mkdir()
    root = unpack(out, dest).root
    sig = root / SIG
    original = sig.read_bytes()
    # Every byte: the armour, the base64 body, and the line breaks OpenSSH itself would skip.
    for offset in range(len(original)):
        changed = bytearray(original)
        changed[offset] ^= 0x01
        sig.write_bytes(bytes(changed))
        assert not verify_tree(root, allowed).ok, f"signature flip at {offset} went unnoticed"
    sig.write_bytes(original)
    assert verify_tree(root, allowed).ok
    # Dropping the signature is noticed too: the bag says it was signed, so it is a stripped
    # signature (with or without --allowed-signers), never an unsigned bundle.
    sig.unlink()
    assert _kinds(verify_tree(root, allowed)) == {("signature-stripped", SIG)}
    assert _kinds(verify_tree(root)) == {("signature-stripped", SIG)}
