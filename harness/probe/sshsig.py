"""Detached SSH signatures via OpenSSH's `ssh-keygen -Y`, under a namespace of the caller's:
a reviewer can check the same signature with the same tool, without the harness."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.base.errors import EnvironmentFault, InvalidInput
from harness.judge.approval.signature import (
    NAMESPACE,
    SignatureCheck,
    canonical_armour,
    one_line,
)


def _ssh_keygen() -> str:
    tool = shutil.which("ssh-keygen")
    if tool is None:
        raise EnvironmentFault("ssh-keygen (OpenSSH) is not installed; it signs and verifies")
    return tool


def sign(data: bytes, key: Path, namespace: str = NAMESPACE, name: str = "message") -> bytes:
    """An SSHSIG signature of `data` with the key file `key` (or ssh-agent's key for it)."""
    key = Path(key)
    if not key.is_file():
        raise InvalidInput(f"signing key {one_line(str(key))} is not a file")
    with tempfile.TemporaryDirectory(prefix="harness-sign-") as tmp:
        message = Path(tmp) / name
        message.write_bytes(data)
        result = subprocess.run([_ssh_keygen(), "-q", "-Y", "sign", "-f", str(key), "-n",
                                 namespace, str(message)], capture_output=True, text=True)
        signature = message.with_name(message.name + ".sig")
        if result.returncode != 0 or not signature.is_file():
            detail = result.stderr.strip() or f"ssh-keygen exited {result.returncode}"
            raise InvalidInput(f"cannot sign with {one_line(str(key))}: {one_line(detail)}")
        return signature.read_bytes()


def _principals(tool: str, sig_path: Path, allowed: Path) -> tuple[list[str], str]:
    found = subprocess.run(
        [tool, "-Y", "find-principals", "-s", str(sig_path), "-f", str(allowed)],
        capture_output=True, text=True, check=False,
    )
    principals = found.stdout.split()
    if found.returncode != 0 or not principals:
        why = found.stderr.strip().splitlines()
        tail = f" ({one_line(why[-1])})" if why else ""
        return [], f"no signer in {one_line(str(allowed))} matches this signature{tail}"
    return principals, ""


def verify(data: bytes, signature: bytes, allowed_signers: Path,
           namespace: str = NAMESPACE) -> SignatureCheck:
    """Check `signature` over `data` against an OpenSSH allowed_signers file, offline."""
    allowed_signers = Path(allowed_signers)
    if not allowed_signers.is_file():
        raise InvalidInput(f"allowed-signers file {one_line(str(allowed_signers))} is not a file")
    if not canonical_armour(signature):
        return SignatureCheck(False, "not a signature file as ssh-keygen writes it")
    tool = _ssh_keygen()
    with tempfile.TemporaryDirectory(prefix="harness-verify-") as tmp:
        sig_path = Path(tmp) / "message.sig"
        sig_path.write_bytes(signature)
        principals, why = _principals(tool, sig_path, allowed_signers)
        if not principals:
            return SignatureCheck(False, why)
        failures = []
        for principal in principals:
            checked = subprocess.run(
                [tool, "-Y", "verify", "-f", str(allowed_signers), "-I", principal,
                 "-n", namespace, "-s", str(sig_path)],
                input=data, capture_output=True, check=False,
            )
            if checked.returncode == 0:
                # the principal is text from the allowed_signers file: never raw to a terminal
                return SignatureCheck(True, f"good signature by {one_line(principal)}",
                                      principal)
            failures.append(one_line(checked.stderr.decode("utf-8", "replace").strip())
                            or "rejected")
        return SignatureCheck(False, "; ".join(failures))
