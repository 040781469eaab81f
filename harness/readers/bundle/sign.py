"""Detached SSH signatures over tagmanifest-sha256.txt, via OpenSSH's `ssh-keygen -Y`.

The tag manifest pins every tag file and they pin every payload file, so one signature
covers the bundle."""

from __future__ import annotations

from pathlib import Path

from harness.judge.approval.signature import (
    ARMOUR_BEGIN,
    ARMOUR_END,
    SignatureCheck,
    canonical_armour,
)
from harness.probe import sshsig

NAMESPACE = "harness-evidence"

__all__ = ["ARMOUR_BEGIN", "ARMOUR_END", "NAMESPACE", "SignatureCheck", "canonical_armour",
           "sign", "verify"]


def sign(data: bytes, key: Path) -> bytes:
    """An SSHSIG signature of the tag manifest `data` with `key`, namespace harness-evidence."""
    return sshsig.sign(data, key, NAMESPACE, "tagmanifest-sha256.txt")


def verify(data: bytes, signature: bytes, allowed_signers: Path) -> SignatureCheck:
    """Check a bundle's signature over `data` against an allowed_signers file, offline."""
    return sshsig.verify(data, signature, allowed_signers, NAMESPACE)
