#!/usr/bin/env python3
"""Build the rehearsal image locally, with no registry, and with a reproducible image Id.

The rehearsal image is busybox-static and a minimal Python 3.11 from pinned Debian packages,
with the engine double (`engine-double/`, a stand-in for vLLM) in its dist-packages. The
builder is `images/debimage.py` (why not `docker build`: it says); this file is the recipe.
Prints the image Id on stdout; progress goes to stderr.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import debimage  # noqa: E402
from debimage import deb_name, parse_apt_show, sha256_of  # noqa: E402, F401

# Each package at one Debian version, with the sha256 of its .deb: a Debian security update
# cannot silently change the image (and so re-pin images.lock on a fresh clone). When apt
# no longer offers a pinned version, the build stops and says how to move the pins
# (`--print-pins`); the new Id is then pinned by `make image` with a reason in its history.
PINS: dict[str, tuple[str, str]] = {
    "busybox-static": ("1:1.35.0-4+deb12u1+b1",
                       "3d3fdbe91d4660c873e14b092c213fe81c1da6362daa236eb25d0171eb108744"),
    "python3.11-minimal": ("3.11.2-6+deb12u9",
                           "b5f855ab922dfcd5d1a3223b2118c3dae13ffc7751b0cd5dc24740386323a33a"),
    "libpython3.11-minimal": ("3.11.2-6+deb12u9",
                              "69f41cfa3f4ba17284e538f843069d7529c53c207d2ae17a5b02785944870e33"),
    "libpython3.11-stdlib": ("3.11.2-6+deb12u9",
                             "10f13e000ee757f5f2d2d3569f9e30546214a0c850acd78695feae373bfa3e53"),
    "libexpat1": ("2.5.0-1+deb12u5",
                  "cae5ded666d8573dd33060bc66fbac21eea8b101a6b56e2af8bd590fcfa65d79"),
    "zlib1g": ("1:1.2.13.dfsg-1",
               "d7dd1d1411fedf27f5e27650a6eff20ef294077b568f4c8c5e51466dc7c08ce4"),
    "libc6": ("2.36-9+deb12u14",
              "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf"),
    "libssl3": ("3.0.22-1~deb12u2",
                "cb4784740daa9b3b0eaea2b444bbefa686794afbbf3d678d238c1fd9875f2efd"),
    "libffi8": ("3.4.4-1",
                "6d9f6c25c30efccce6d4bceaa48ea86c329a3432abb360a141f76ac223a4c34a"),
    "libbz2-1.0": ("1.0.8-5+b1",
                   "54149da3f44b22d523b26b692033b84503d822cc5122fed606ea69cc83ca5aeb"),
    "liblzma5": ("5.4.1-1+deb12u2",
                 "3d8c29c8c21ec6007635e1b2591edf98b771c9572a085968f47452b33040f384"),
    "libsqlite3-0": ("3.40.1-2+deb12u2",
                     "a8d78b40e9b4e422224aeebfe0e4dfc243f6acf3532490b0c05480d4283d41e2"),
    "libuuid1": ("2.38.1-5+deb12u3",
                 "5fff398321da62d28a842bcbabd193d72ae21724962c029dc32b1dc6b2deaeaf"),
    "libtinfo6": ("6.4-4",
                  "072d908f38f51090ca28ca5afa3b46b2957dc61fe35094c0b851426859a49a51"),
    "libncursesw6": ("6.4-4",
                     "98fa7a53dc565a38b65fb70422ad08001bf5361d8fbc74255280c329996a6bec"),
    "libreadline8": ("8.2-1.3",
                     "e02ebbd3701cf468dbf98d6d917fbe0325e881f07fe8b316150c8d2a64486e66"),
    "libgcc-s1": ("12.2.0-14+deb12u1",
                  "3016e62cb4b7cd8038822870601f5ed131befe942774d0f745622cc77d8a88f7"),
    "libstdc++6": ("12.2.0-14+deb12u1",
                   "5cd3171216d4ab0fc911cfe9c35509bf2dd8f47761c43b7f6a4296701551a24d"),
    "libcrypt1": ("1:4.4.33-2",
                  "f5f60a5cdfd4e4eaa9438ade5078a57741a7a78d659fcb0c701204f523e8bd29"),
}
PACKAGES = list(PINS)  # the image label names them in this order: it is part of the Id
HOW_TO_UPDATE = (
    "to build from the versions apt offers now: run `python3 images/rehearsal/build.py "
    "--print-pins`, paste its PINS into images/rehearsal/build.py, run `make image` (it "
    "re-pins images.lock's rehearsal entry with a reason) and commit both files")
DEFAULT_TAG = "harness-rehearsal:local"


def add_engine_double(rootfs: Path) -> None:
    """The vLLM test double, importable as `vllm` by the image's Python."""
    double = HERE / "engine-double"
    if double.is_dir():
        shutil.copytree(double, rootfs / debimage.SITE, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


RECIPE = debimage.Recipe(name="rehearsal", pins=PINS, script="images/rehearsal/build.py",
                         tag=DEFAULT_TAG, how_to_update=HOW_TO_UPDATE,
                         extra=add_engine_double)


def pin_problem(package: str, path: Path, pins: dict[str, tuple[str, str]] = PINS) -> str | None:
    """Why a downloaded .deb is not the pinned one, or None when its sha256 matches."""
    return debimage.pin_problem(package, path, pins, HOW_TO_UPDATE)


if __name__ == "__main__":
    sys.exit(debimage.main(RECIPE, HERE / "build"))
