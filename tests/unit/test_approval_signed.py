"""What an approval's signature check found, judged without ssh-keygen: each outcome the probe
(harness.probe.approval.runcheck) can hand over names its rule, and a host fault is never
blamed on the approval."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.base.catalogue import APPROVAL_SIGNATURE, ENV_ERROR
from harness.base.errors import EnvironmentFault, InvalidInput
from harness.base.readfile import InputError
from harness.judge.approval.check import signature_findings, signature_path
from harness.judge.approval.signature import SignatureCheck

SIG = Path("approvals/c-0123456789ab.json.sig")


@pytest.mark.parametrize(("signed", "rule", "words"), [
    (None, None, None),  # the campaign names no allowed_signers
    (SignatureCheck(True, "good signature by rev@example", "rev@example"), None, None),
    (SignatureCheck(False, "no signer in keys matches this signature"), APPROVAL_SIGNATURE,
     "no signer in keys"),
    (InputError(f"{SIG}: no such file"), APPROVAL_SIGNATURE, "unsigned"),
    (InputError(f"{SIG}: over 65536 bytes"), APPROVAL_SIGNATURE, "unsigned"),
    (EnvironmentFault("ssh-keygen (OpenSSH) is not installed"), ENV_ERROR, "not installed"),
    (InvalidInput("allowed-signers file keys is not a file"), APPROVAL_SIGNATURE,
     "allowed-signers"),
    (InvalidInput("bad\x1b[2Jsigners"), APPROVAL_SIGNATURE, "bad"),  # a terminal escape
])
def test_each_outcome_names_its_rule(signed, rule, words):
    found = signature_findings(SIG, signed)
    assert [r for r, _ in found] == ([] if rule is None else [rule])
    for _, detail in found:
        assert words in detail and "\x1b" not in detail


def test_the_signature_sits_beside_the_approval():
    assert signature_path(Path("approvals/c-0123456789ab.json")) == SIG
