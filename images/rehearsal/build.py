#!/usr/bin/env python3
"""Build the rehearsal image locally, with no registry, and with a reproducible image Id.

Why not `docker build` or `docker import`: both stamp a creation time into the image
config, so the Id changes on every build and `images.lock` could never stay pinned. This
script assembles the rootfs from Debian packages (busybox-static + a minimal Python 3.11),
writes a byte-reproducible layer tar (sorted, owner 0, mtime 0), a fixed image config, and
feeds a `docker save`-style archive to `docker load`. The same packages give the same Id.

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
PACKAGES = [
    "busybox-static", "python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib",
    "libexpat1", "zlib1g", "libc6", "libssl3", "libffi8", "libbz2-1.0", "liblzma5",
    "libsqlite3-0", "libuuid1", "libtinfo6", "libncursesw6", "libreadline8", "libgcc-s1",
    "libstdc++6", "libcrypt1",
]
DEFAULT_TAG = "harness-rehearsal:local"
EPOCH = "1970-01-01T00:00:00Z"
SITE = "usr/local/lib/python3.11/dist-packages"


def log(msg: str) -> None:
    print(f"[build-image] {msg}", file=sys.stderr, flush=True)


def download(debs: Path) -> list[Path]:
    """Fetch the .deb files into `debs` (cached); refresh apt lists once if they are stale."""
    debs.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("_")[0] for p in debs.glob("*.deb")}
    missing = [p for p in PACKAGES if p not in have]
    if missing:
        cmd = ["apt-get", "download", "-q", *missing]
        r = subprocess.run(cmd, cwd=debs, capture_output=True, text=True)
        if r.returncode != 0:
            log("apt-get download failed; running apt-get update once")
            subprocess.run(["apt-get", "update", "-qq"], check=False)
            r = subprocess.run(cmd, cwd=debs, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"[build-image] apt-get download failed: {r.stderr.strip()}")
    return sorted(debs.glob("*.deb"))


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
    args = ap.parse_args(argv)
    if shutil.which("docker") is None:
        log("docker CLI not found")
        return 3
    args.work.mkdir(parents=True, exist_ok=True)
    # Two builds at once (parallel test sessions) would tear each other's rootfs apart.
    guard = open(args.work / ".build.lock", "w")  # noqa: SIM115 - held until exit
    fcntl.flock(guard, fcntl.LOCK_EX)
    debs = download(args.work / "debs")
    log(f"{len(debs)} packages; assembling rootfs")
    rootfs = args.work / "rootfs"
    assemble(rootfs, debs)
    layer = layer_tar(rootfs)
    archive, image_id = image_archive(layer, args.tag)
    log(f"layer {len(layer) / 2**20:.1f} MiB, image {image_id}")
    if args.save:
        args.save.write_bytes(archive)
    if local_id(args.tag) == image_id:
        log(f"{args.tag} is already loaded with this Id")
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
