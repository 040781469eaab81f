"""Who vouches for what in a bundle, decided once from the verifier's options.

The bundle's signature vouches for the bag's bytes; each carried approval's `.sig`
vouches for the reviewer's approval, and the bundle's key cannot stand in for it.
Without `--allowed-signers` nothing is authenticated: a signed bundle fails (an unchecked
signature proves nothing). `Bag-Signature` in bag-info.txt is covered by the signature,
so deleting the signature is refused (BUNDLE-SIGNATURE-STRIPPED), never read as unsigned."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.base.catalogue import (
    BUNDLE_APPROVAL_SIGNATURE,
    BUNDLE_APPROVAL_UNSIGNED,
    BUNDLE_BAD_SIGNATURE,
    BUNDLE_SIGNATURE_STRIPPED,
    BUNDLE_SIGNATURE_UNCHECKED,
    BUNDLE_UNSIGNED,
)
from harness.base.errors import InvalidInput
from harness.judge.approval.check import SIG_SUFFIX
from harness.judge.approval.signature import NAMESPACE as APPROVAL_NAMESPACE
from harness.judge.approval.signature import SignatureCheck
from harness.probe.sshsig import verify as verify_approval
from harness.readers.bundle import bag
from harness.readers.bundle.records import BadMember, read_member
from harness.readers.bundle.sums import BundleFault, one_line

SIGNATURE_LIMIT = 64 << 10  # an SSH signature is under 2 KiB
_GOOD_BY = "good signature by "  # `sshsig.verify`'s detail, before the signer's name

BAG, APPROVAL = "bag", "approval"  # what a signature vouches for
GOOD, BAD, UNSIGNED, UNCHECKED, STRIPPED = "good", "bad", "unsigned", "not checked", "stripped"


@dataclass(frozen=True)
class Vouch:
    """Who vouches for one thing the bundle holds: the bag's bytes, or one approval."""

    subject: str  # BAG or APPROVAL
    path: str  # what is vouched for: the tag manifest, or the approval's tag file
    namespace: str
    state: str  # GOOD, BAD, UNSIGNED, UNCHECKED or STRIPPED
    signer: str = ""  # the allowed_signers principal, for a good signature

    def __str__(self) -> str:
        what = "the bag's bytes" if self.subject == BAG else "the reviewer's approval"
        said = {GOOD: f"good signature by {self.signer} ({self.namespace})",
                UNSIGNED: "unsigned: nobody vouches for it",
                UNCHECKED: "signed, not checked (no --allowed-signers"
                           + (")" if self.subject == BAG else " or --reviewers)"),
                BAD: "a signature that does not verify", STRIPPED: "its signature is gone",
                }[self.state]
        return one_line(f"{what} {self.path}: {said}")

    def as_dict(self) -> dict[str, str]:
        return {"for": self.subject, "path": self.path, "namespace": self.namespace,
                "state": self.state, "signer": self.signer}


@dataclass(frozen=True)
class Policy:
    """What must be signed, by whom: `allowed_signers` (an OpenSSH allowed_signers file) given means
    the bag and every approval it carries must be signed by a signer listed there for that
    namespace; None means nothing is authenticated, and nothing signed is taken on trust."""

    allowed_signers: Path | None = None
    # the reviewers' keys (harness-approval@v1) when kept in a file of their own
    # (`--reviewers`); None: the approvals are judged against `allowed_signers`
    reviewers: Path | None = None

    @classmethod
    def given(cls, allowed_signers: Path | None, reviewers: Path | None = None) -> Policy:
        """The policy of the verifier's options; InvalidInput (exit 2) for a file not there."""
        for option, path in (("allowed-signers", allowed_signers), ("reviewers", reviewers)):
            if path is not None and not Path(path).is_file():
                raise InvalidInput(f"{option} file {one_line(str(path))} is not a file")
        return cls(allowed_signers, reviewers)

    @property
    def approval_signers(self) -> Path | None:
        """The allowed_signers file the carried approvals' signatures are judged against."""
        return self.reviewers if self.reviewers is not None else self.allowed_signers

    def bag(self, root: Path, hashes: dict[str, str], claims: list[str]
            ) -> tuple[Vouch, list[BundleFault]]:
        """The bag's own signature: `claims`, the bag-info `Bag-Signature` values, say
        whether the bag was signed when it was written."""
        sig = bag.SIGNATURE
        problems = [BundleFault("malformed", bag.BAG_INFO, f"{bag.SIGNATURE_LABEL} says "
                            f"{one_line(str(claims))[:120]}, not {bag.signature_claim()!r}")
                    ] if claims and claims != [bag.signature_claim()] else []

        def vouch(state: str, signer: str = "") -> Vouch:
            return Vouch(BAG, bag.TAGMANIFEST, bag.NAMESPACE, state, signer)

        if sig not in hashes:
            if claims:
                return vouch(STRIPPED), [*problems, BundleFault(
                    "signature-stripped", sig, f"{BUNDLE_SIGNATURE_STRIPPED}: {bag.BAG_INFO} "
                    f"says the bag was signed ({bag.SIGNATURE_LABEL}) and it has no {sig}")]
            if self.allowed_signers is not None:
                return vouch(UNSIGNED), [*problems, BundleFault(
                    "unsigned", sig, f"{BUNDLE_UNSIGNED}: --allowed-signers was given but the "
                    "bundle is not signed")]
            return vouch(UNSIGNED), problems
        if self.allowed_signers is None:
            return vouch(UNCHECKED), [*problems, BundleFault(
                "unverified-signature", sig, f"{BUNDLE_SIGNATURE_UNCHECKED}: the bundle is "
                "signed; give --allowed-signers to check it")]
        try:
            check = (bag.verify(read_member(root, bag.TAGMANIFEST),
                                read_member(root, sig, SIGNATURE_LIMIT), self.allowed_signers)
                     if bag.TAGMANIFEST in hashes
                     else SignatureCheck(False, "nothing to check it against"))
        except BadMember as e:
            check = SignatureCheck(False, str(e))
        if not check.ok:
            return vouch(BAD), [*problems, BundleFault("bad-signature", sig,
                                                   f"{BUNDLE_BAD_SIGNATURE}: {check.detail}")]
        return vouch(GOOD, check.detail.removeprefix(_GOOD_BY)), problems

    def approval(self, root: Path, tag: str, data: bytes, hashes: dict[str, str]
                 ) -> tuple[Vouch, list[BundleFault]]:
        """One carried approval (`tag`, its bytes `data`): its `.sig` beside it must be the
        reviewer's good signature of exactly these bytes when signers are given."""
        sig = tag + SIG_SUFFIX

        def vouch(state: str, signer: str = "") -> Vouch:
            return Vouch(APPROVAL, tag, APPROVAL_NAMESPACE, state, signer)

        signers = self.approval_signers
        if signers is None:
            return vouch(UNCHECKED if sig in hashes else UNSIGNED), []
        if sig not in hashes:  # asked for by --reviewers, else by --allowed-signers
            asks = "--reviewers" if self.reviewers is not None else "--allowed-signers"
            return vouch(UNSIGNED), [BundleFault(
                "approval-unsigned", sig, f"{BUNDLE_APPROVAL_UNSIGNED}: {asks} asks "
                f"for the reviewer's signature of {tag} ({APPROVAL_NAMESPACE}) and the bundle "
                "carries none")]
        try:
            check = verify_approval(data, read_member(root, sig, SIGNATURE_LIMIT), signers)
        except BadMember as e:
            check = SignatureCheck(False, str(e))
        if not check.ok:
            return vouch(BAD), [BundleFault("approval-signature", sig,
                                        f"{BUNDLE_APPROVAL_SIGNATURE}: {check.detail}")]
        return vouch(GOOD, check.detail.removeprefix(_GOOD_BY)), []


def merging(sign_key: Path | None, allowed_signers: Path | None) -> Policy:
    """The policy a merge verifies its inputs under. A merge that signs vouches for every byte,
    so it must authenticate every input: a key without allowed signers is exit 2."""
    if sign_key is not None and allowed_signers is None:
        raise InvalidInput("--sign-key needs --allowed-signers: a merge signs only bundles "
                           "whose signatures it checked (give the signers you trust)")
    return Policy.given(allowed_signers)
