"""What an approval or bundle signature must be, and what checking one found: pure."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from harness.base.tree import printable

NAMESPACE = "harness-approval@v1"


def one_line(text: str) -> str:
    """`tree.printable` leaving backslashes alone (paths may already be printable)."""
    return "\\".join(printable(part) for part in text.split("\\"))


ARMOUR_BEGIN = b"-----BEGIN SSH SIGNATURE-----\n"
ARMOUR_END = b"-----END SSH SIGNATURE-----\n"


def canonical_armour(signature: bytes) -> bool:
    """True when the file is exactly as `ssh-keygen -Y sign` writes it. OpenSSH skips stray
    whitespace in the armour, which the signature does not cover, so without this an edited
    file could still read as the same signature."""
    if not (signature.startswith(ARMOUR_BEGIN) and signature.endswith(ARMOUR_END)):
        return False
    body = signature[len(ARMOUR_BEGIN):-len(ARMOUR_END)]
    try:
        blob = base64.b64decode(body.replace(b"\n", b""), validate=True)
    except binascii.Error:
        return False
    encoded = base64.b64encode(blob)
    lines = [encoded[i:i + 70] + b"\n" for i in range(0, len(encoded), 70)]
    return body == b"".join(lines)


@dataclass(frozen=True)
class SignatureCheck:
    ok: bool
    detail: str  # who signed, or why the signature is not accepted
    principal: str | None = None  # the allowed_signers principal of a good signature
