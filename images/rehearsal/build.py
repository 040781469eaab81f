#!/usr/bin/env python3
"""Build the rehearsal image locally, with no registry, and with a reproducible image Id.

Why not `docker build` or `docker import`: both stamp a creation time into the image
config, so the Id changes on every build and `images.lock` could never stay pinned. This
script assembles the rootfs from Debian packages (busybox-static + a minimal Python 3.11),
writes a byte-reproducible layer tar (sorted, owner 0, mtime 0), a fixed image config, and
feeds a `docker save`-style archive to `docker load`. The packages are pinned (version and
sha256 of each .deb, `PINS`), so the same checkout gives the same Id or stops saying why.

Standard library only; needs `apt-get` and `dpkg-deb` (Debian) and the docker CLI.
Prints the image Id on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
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
ARCH = "amd64"
HOW_TO_UPDATE = (
    "to build from the versions apt offers now: run `python3 images/rehearsal/build.py "
    "--print-pins`, paste its PINS into images/rehearsal/build.py, run `make image` (it "
    "re-pins images.lock's rehearsal entry with a reason) and commit both files")
DEFAULT_TAG = "harness-rehearsal:local"
EPOCH = "1970-01-01T00:00:00Z"
SITE = "usr/local/lib/python3.11/dist-packages"


VERBOSE = False


def log(msg: str, *, always: bool = True) -> None:
    """Problems always reach stderr; progress only with --verbose (`make` stays quiet)."""
    if always or VERBOSE:
        print(f"[build-image] {msg}", file=sys.stderr, flush=True)


def deb_name(package: str, version: str) -> str:
    """The file name `apt-get download` gives a package version (an epoch's ':' escaped)."""
    return f"{package}_{version.replace(':', '%3a')}_{ARCH}.deb"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pin_problem(package: str, path: Path, pins: dict[str, tuple[str, str]] = PINS) -> str | None:
    """Why a downloaded .deb is not the pinned one, or None when its sha256 matches."""
    version, digest = pins[package]
    got = sha256_of(path)
    if got == digest:
        return None
    return (f"{path.name}: sha256 {got}, but the pin for {package} {version} is {digest}: "
            "the archive serves other bytes under the pinned version; " + HOW_TO_UPDATE)


def candidates(packages: list[str]) -> dict[str, tuple[str, str]]:
    """What apt offers now for each package: {name: (version, sha256)} (`--print-pins`)."""
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", *packages],
                       capture_output=True, text=True)
    return parse_apt_show(r.stdout)


def parse_apt_show(text: str) -> dict[str, tuple[str, str]]:
    """`apt-cache show` stanzas as {package: (version, sha256)}; pure."""
    found: dict[str, tuple[str, str]] = {}
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line
                      and not line.startswith(" "))
        if {"Package", "Version", "SHA256"} <= fields.keys():
            found.setdefault(fields["Package"], (fields["Version"], fields["SHA256"]))
    return found


def download(debs: Path) -> list[Path]:
    """The pinned .deb files in `debs` (cached, each checked against its sha256); refresh the
    apt lists once when a pinned version cannot be fetched; stop on any mismatch."""
    debs.mkdir(parents=True, exist_ok=True)
    want = {p: debs / deb_name(p, v) for p, (v, _) in PINS.items()}
    for path in debs.glob("*.deb"):  # other versions left by an older pin list
        if path not in want.values():
            path.unlink()
    missing = [p for p, path in want.items() if not path.exists()]
    if missing:
        cmd = ["apt-get", "download", "-q", *(f"{p}={PINS[p][0]}" for p in missing)]
        r = subprocess.run(cmd, cwd=debs, capture_output=True, text=True)
        if r.returncode != 0:
            log("apt-get download failed; running apt-get update once")
            subprocess.run(["apt-get", "update", "-qq"], check=False)
            r = subprocess.run(cmd, cwd=debs, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"[build-image] apt-get cannot fetch the pinned versions "
                                 f"({r.stderr.strip()}); {offered(missing)}{HOW_TO_UPDATE}")
    problems = [why for p, path in want.items() if (why := pin_problem(p, path))]
    if problems:
        for path in want.values():
            path.unlink(missing_ok=True)
        raise SystemExit("[build-image] " + "\n[build-image] ".join(problems))
    return sorted(want.values())  # unpacked in file-name order, as before the pins


def offered(packages: list[str]) -> str:
    """Which of `packages` apt now offers at another version than pinned, as one clause."""
    now = candidates(packages)
    moved = [f"{p} {now[p][0]} (pinned {PINS[p][0]})" for p in packages
             if p in now and now[p][0] != PINS[p][0]]
    return f"apt offers {', '.join(moved)}; " if moved else ""


def print_pins() -> int:
    """Print a PINS block for the versions apt offers now, to paste over the one above."""
    now = candidates(PACKAGES)
    absent = [p for p in PACKAGES if p not in now]
    if absent:
        log(f"apt knows no candidate for {', '.join(absent)} (run apt-get update?)")
        return 1
    print("PINS: dict[str, tuple[str, str]] = {")
    for p in PACKAGES:
        print(f"    {json.dumps(p)}: ({json.dumps(now[p][0])},\n"
              f"        {json.dumps(now[p][1])}),")
    print("}")
    return 0


def assemble(rootfs: Path, debs: list[Path]) -> None:
    if rootfs.exists():
        shutil.rmtree(rootfs)
    rootfs.mkdir(parents=True)
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(rootfs)], check=True)
    busybox = rootfs / "bin" / "busybox"
    applets = subprocess.run([str(busybox), "--list-full"], check=True, capture_output=True,
                             text=True).stdout.split()
    for applet in applets:
        link = rootfs / applet
        if link.exists() or link.is_symlink():
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to("/bin/busybox")
    py = rootfs / "usr" / "bin" / "python3"
    if not py.exists():
        py.symlink_to("python3.11")
    for d in ("tmp", "proc", "sys", "dev", "etc", "root", "models", "harness/out", "opt"):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
    (rootfs / "etc" / "group").write_text(
        "root:x:0:\nvideo:x:44:\nrender:x:105:\nnogroup:x:65534:\n")
    site = rootfs / SITE
    site.mkdir(parents=True, exist_ok=True)
    double = HERE / "engine-double"
    if double.is_dir():
        shutil.copytree(double, site, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def layer_tar(rootfs: Path) -> bytes:
    """A byte-reproducible tar of `rootfs`: sorted names, owner 0, mtime 0."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(p for p in rootfs.rglob("*"))
        for path in paths:
            rel = path.relative_to(rootfs).as_posix()
            info = tar.gettarinfo(str(path), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.pax_headers = {}
            if info.isfile():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def image_archive(layer: bytes, tag: str) -> tuple[bytes, str]:
    """A `docker load` archive for one layer; returns (archive bytes, image Id)."""
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": EPOCH,
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "PYTHONDONTWRITEBYTECODE=1"],
            "Cmd": ["/bin/sh"],
            "WorkingDir": "/",
            "Labels": {"org.harness.image": "rehearsal",
                       "org.harness.packages": ",".join(PACKAGES)},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": EPOCH, "created_by": "harness images/rehearsal/build.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_hex = hashlib.sha256(config_bytes).hexdigest()
    layer_dir = diff_id.split(":")[1]
    manifest = [{"Config": f"{config_hex}.json", "RepoTags": [tag],
                 "Layers": [f"{layer_dir}/layer.tar"]}]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in ((f"{config_hex}.json", config_bytes),
                           (f"{layer_dir}/layer.tar", layer),
                           ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue(), f"sha256:{config_hex}"


def local_id(tag: str) -> str | None:
    r = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", default=DEFAULT_TAG)
    ap.add_argument("--work", type=Path, default=HERE / "build")
    ap.add_argument("--save", type=Path, help="also write the docker-load archive here")
    ap.add_argument("--print-pins", action="store_true",
                    help="print PINS for the package versions apt offers now, and exit")
    ap.add_argument("--verbose", action="store_true", help="say each step on stderr")
    args = ap.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose
    if args.print_pins:
        return print_pins()
    if shutil.which("docker") is None:
        log("docker CLI not found")
        return 3
    args.work.mkdir(parents=True, exist_ok=True)
    # Two builds at once (parallel test sessions) would tear each other's rootfs apart.
    guard = open(args.work / ".build.lock", "w")  # noqa: SIM115 - held until exit
    fcntl.flock(guard, fcntl.LOCK_EX)
    debs = download(args.work / "debs")
    log(f"{len(debs)} packages; assembling rootfs", always=False)
    rootfs = args.work / "rootfs"
    assemble(rootfs, debs)
    layer = layer_tar(rootfs)
    archive, image_id = image_archive(layer, args.tag)
    log(f"layer {len(layer) / 2**20:.1f} MiB, image {image_id}", always=False)
    if args.save:
        args.save.write_bytes(archive)
    if local_id(args.tag) == image_id:
        log(f"{args.tag} is already loaded with this Id", always=False)
    else:
        r = subprocess.run(["docker", "load", "-q"], input=archive, capture_output=True)
        if r.returncode != 0:
            log(f"docker load failed: {r.stderr.decode(errors='replace').strip()}")
            return 3
        got = local_id(args.tag)
        if got != image_id:
            log(f"loaded image has Id {got}, expected {image_id} (containerd image store?)")
            image_id = got or image_id
    print(image_id)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
