"""The rehearsal image is built from pinned Debian package versions, each with its sha256:
a Debian update must stop the build with a message saying how to move the pins, never
change the image (and so images.lock's pin) silently."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[2] / "images" / "rehearsal" / "build.py"


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("rehearsal_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_package_has_a_version_and_a_sha256(build) -> None:
    assert list(build.PINS) == build.PACKAGES
    for package, (version, digest) in build.PINS.items():
        assert re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", package), package
        assert re.fullmatch(r"(\d+:)?[0-9][A-Za-z0-9.+~-]*", version), (package, version)
        assert re.fullmatch(r"[0-9a-f]{64}", digest), (package, digest)


def test_the_file_name_escapes_an_epoch_as_apt_does(build) -> None:
    assert build.deb_name("zlib1g", "1:1.2.13.dfsg-1") == "zlib1g_1%3a1.2.13.dfsg-1_amd64.deb"
    assert build.deb_name("libffi8", "3.4.4-1") == "libffi8_3.4.4-1_amd64.deb"


def test_a_deb_with_other_bytes_is_refused_with_how_to_update(build, tmp_path) -> None:
    deb = tmp_path / "libx_1.0_amd64.deb"
    deb.write_bytes(b"the pinned bytes")
    good = hashlib.sha256(b"the pinned bytes").hexdigest()
    assert build.pin_problem("libx", deb, {"libx": ("1.0", good)}) is None
    deb.write_bytes(b"a security update")
    why = build.pin_problem("libx", deb, {"libx": ("1.0", good)})
    assert why is not None and good in why
    assert hashlib.sha256(b"a security update").hexdigest() in why
    assert "--print-pins" in why and "make image" in why


def test_apt_cache_show_stanzas_parse_to_version_and_sha256(build) -> None:
    text = ("Package: libc6\nVersion: 2.36-9+deb12u14\nDescription: GNU C\n continued: x\n"
            "SHA256: " + "a" * 64 + "\n\n"
            "Package: zlib1g\nVersion: 1:1.2.13.dfsg-1\nSHA256: " + "b" * 64 + "\n\n"
            "Package: broken\nVersion: 1\n")
    assert build.parse_apt_show(text) == {"libc6": ("2.36-9+deb12u14", "a" * 64),
                                          "zlib1g": ("1:1.2.13.dfsg-1", "b" * 64)}
