"""Build a local image from pinned Debian packages, with no registry and a reproducible Id.

Why not `docker build` or `docker import`: both stamp a creation time into the image
config, so the Id changes on every build and `images.lock` could never stay pinned. This
module assembles the rootfs from Debian packages, writes a byte-reproducible layer tar
(sorted, owner 0, mtime 0), a fixed image config, and feeds a `docker save`-style archive
to `docker load`. The packages are pinned (version and sha256 of each .deb), so the same
checkout gives the same Id or stops saying why.

Each image is a `Recipe` (its pins, the files it keeps of a package, what it adds), built
by a small script beside it: `images/rehearsal/build.py`, `images/engine/build.py`.
Standard library only; needs `apt-get` and `dpkg-deb` (Debian) and the docker CLI.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ARCH = "amd64"
EPOCH = "1970-01-01T00:00:00Z"
SITE = "usr/local/lib/python3.11/dist-packages"
VERBOSE = False


@dataclass(frozen=True)
class Recipe:
    """One image: its name (the `org.harness.image` label), the pinned packages in the
    order the label lists them (part of the Id), and how to change the pins."""

    name: str
    pins: dict[str, tuple[str, str]]
    script: str  # the build script, relative to the project: named in the image history
    tag: str
    how_to_update: str
    # package -> the only paths kept of it (lscpu of util-linux, not the whole package)
    only: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # run on the assembled rootfs before it is packed (e.g. the engine double's files)
    extra: Callable[[Path], None] | None = None

    @property
    def packages(self) -> list[str]:
        return list(self.pins)


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


def pin_problem(package: str, path: Path, pins: dict[str, tuple[str, str]],
                how_to_update: str = "") -> str | None:
    """Why a downloaded .deb is not the pinned one, or None when its sha256 matches."""
    version, digest = pins[package]
    got = sha256_of(path)
    if got == digest:
        return None
    return (f"{path.name}: sha256 {got}, but the pin for {package} {version} is {digest}: "
            "the archive serves other bytes under the pinned version; " + how_to_update)


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


def download(recipe: Recipe, debs: Path) -> list[Path]:
    """The pinned .deb files in `debs` (cached, each checked against its sha256); refresh the
    apt lists once when a pinned version cannot be fetched; stop on any mismatch."""
    pins = recipe.pins
    debs.mkdir(parents=True, exist_ok=True)
    want = {p: debs / deb_name(p, v) for p, (v, _) in pins.items()}
    for path in debs.glob("*.deb"):  # other versions left by an older pin list
        if path not in want.values():
            path.unlink()
    missing = [p for p, path in want.items() if not path.exists()]
    if missing:
        cmd = ["apt-get", "download", "-q", *(f"{p}={pins[p][0]}" for p in missing)]
        r = subprocess.run(cmd, cwd=debs, capture_output=True, text=True)
        if r.returncode != 0:
            log("apt-get download failed; running apt-get update once")
            subprocess.run(["apt-get", "update", "-qq"], check=False)
            r = subprocess.run(cmd, cwd=debs, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"[build-image] apt-get cannot fetch the pinned versions "
                                 f"({r.stderr.strip()}); {offered(pins, missing)}"
                                 f"{recipe.how_to_update}")
    problems = [why for p, path in want.items()
                if (why := pin_problem(p, path, pins, recipe.how_to_update))]
    if problems:
        for path in want.values():
            path.unlink(missing_ok=True)
        raise SystemExit("[build-image] " + "\n[build-image] ".join(problems))
    return sorted(want.values())  # unpacked in file-name order


def offered(pins: dict[str, tuple[str, str]], packages: list[str]) -> str:
    """Which of `packages` apt now offers at another version than pinned, as one clause."""
    now = candidates(packages)
    moved = [f"{p} {now[p][0]} (pinned {pins[p][0]})" for p in packages
             if p in now and now[p][0] != pins[p][0]]
    return f"apt offers {', '.join(moved)}; " if moved else ""


def print_pins(recipe: Recipe) -> int:
    """Print a PINS block for the versions apt offers now, to paste over the script's."""
    now = candidates(recipe.packages)
    absent = [p for p in recipe.packages if p not in now]
    if absent:
        log(f"apt knows no candidate for {', '.join(absent)} (run apt-get update?)")
        return 1
    print("PINS: dict[str, tuple[str, str]] = {")
    for p in recipe.packages:
        print(f"    {json.dumps(p)}: ({json.dumps(now[p][0])},\n"
              f"        {json.dumps(now[p][1])}),")
    print("}")
    return 0


def package_of(deb: Path) -> str:
    return deb.name.split("_", 1)[0]


def unpack(deb: Path, rootfs: Path, keep: tuple[str, ...] | None) -> None:
    """`dpkg-deb -x`, or only the `keep` paths of the package when the recipe says so."""
    if keep is None:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(rootfs)], check=True)
        return
    scratch = rootfs.parent / f".unpack-{package_of(deb)}"
    if scratch.exists():
        shutil.rmtree(scratch)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(scratch)], check=True)
    for rel in keep:
        source = scratch / rel
        if not source.is_file():
            raise SystemExit(f"[build-image] {deb.name} has no {rel}")
        target = rootfs / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    shutil.rmtree(scratch)


def assemble(recipe: Recipe, rootfs: Path, debs: list[Path]) -> None:
    if rootfs.exists():
        shutil.rmtree(rootfs)
    rootfs.mkdir(parents=True)
    for deb in debs:
        unpack(deb, rootfs, recipe.only.get(package_of(deb)))
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
    (rootfs / SITE).mkdir(parents=True, exist_ok=True)
    if recipe.extra is not None:
        recipe.extra(rootfs)


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


def image_archive(recipe: Recipe, layer: bytes, tag: str) -> tuple[bytes, str]:
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
            "Labels": {"org.harness.image": recipe.name,
                       "org.harness.packages": ",".join(recipe.packages)},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": EPOCH, "created_by": f"harness {recipe.script}"}],
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


def main(recipe: Recipe, work: Path, argv: list[str] | None = None) -> int:
    """The build scripts' command line: build, load, print the image Id on stdout."""
    ap = argparse.ArgumentParser(description=f"Build the {recipe.name} image locally, "
                                             "reproducibly, from pinned Debian packages.")
    ap.add_argument("--tag", default=recipe.tag)
    ap.add_argument("--work", type=Path, default=work)
    ap.add_argument("--save", type=Path, help="also write the docker-load archive here")
    ap.add_argument("--print-pins", action="store_true",
                    help="print PINS for the package versions apt offers now, and exit")
    ap.add_argument("--verbose", action="store_true", help="say each step on stderr")
    args = ap.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose
    if args.print_pins:
        return print_pins(recipe)
    if shutil.which("docker") is None:
        log("docker CLI not found")
        return 3
    os.umask(0o022)
    args.work.mkdir(parents=True, exist_ok=True)
    # Two builds at once (parallel test sessions) would tear each other's rootfs apart.
    guard = open(args.work / ".build.lock", "w")  # noqa: SIM115 - held until exit
    fcntl.flock(guard, fcntl.LOCK_EX)
    debs = download(recipe, args.work / "debs")
    log(f"{len(debs)} packages; assembling rootfs", always=False)
    rootfs = args.work / "rootfs"
    assemble(recipe, rootfs, debs)
    layer = layer_tar(rootfs)
    archive, image_id = image_archive(recipe, layer, args.tag)
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
