#!/usr/bin/env bash
# Build .upstream-venv: vLLM from PyPI at a pinned version, importable on a CPU-only machine,
# for the upstream tier (`make test-upstream`, tests/upstream/).
#
# Why a separate venv: vLLM pins torch and ~90 other packages (several CUDA-only); they must
# not leak into the harness's own .venv. Why not `pip install vllm`: that pulls flashinfer,
# triton, cutlass and other GPU kernels (many GB) the tier never runs. Instead, following
# shared/docs/vllm-notes.md: torch first, then vLLM and xgrammar with --no-deps, then only
# the light pure-Python requirements that `import vllm.config` and `vllm.platforms` need.
#
# torch: PyPI's Linux torch is the CUDA build, and it loads the CUDA runtime libraries
# (cublas, cudnn, nccl, ...) at `import torch` even when no GPU is present; without them the
# import fails ("libcublasLt.so.*[0-9] not found"). PyPI has no CPU-only torch and no other
# index is reachable here, so we install the pinned torch with --no-deps plus the exact CUDA
# library wheels its metadata names (no triton). Nothing here needs a GPU or a driver.
#
# Idempotent: exits at once when the venv already imports vLLM at the pinned version.
# Downloads are kept as wheel files under ~/.cache/pip/upstream-tier-wheels (pip's own HTTP
# cache was found not to keep them on these machines), so a rebuild downloads only what is
# missing. UPSTREAM_VENV_REBUILD=1 rebuilds the venv; UPSTREAM_WHEELS moves the wheel folder.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${UPSTREAM_VENV:-$ROOT/.upstream-venv}"
PYTHON="${UPSTREAM_PYTHON:-python3.11}"
WHEELS="${UPSTREAM_WHEELS:-${PIP_CACHE_DIR:-$HOME/.cache/pip}/upstream-tier-wheels}"

VLLM_VERSION="0.33.0"        # newest on PyPI when pinned; the notes' version
TORCH_VERSION="2.14.0"       # what vllm 0.33.0 pins (torch==2.14.0)
XGRAMMAR_VERSION="0.2.8"     # vllm 0.33.0 pins it; a plain install drags in a 1 GB triton
TVM_FFI_VERSION="0.1.11"     # vllm 0.33.0 pins apache-tvm-ffi==0.1.11

# The CUDA runtime libraries torch 2.14.0's metadata requires on Linux (shared objects that
# libtorch_cuda.so links against; loaded at import, never used without a GPU).
TORCH_CUDA_LIBS=(
  "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3"
  "cuda-bindings>=13.0.3,<14"
  "nvidia-cudnn-cu13==9.24.0.43"
  "nvidia-cusparselt-cu13==0.8.1"
  "nvidia-nccl-cu13==2.30.7"
  "nvidia-nvshmem-cu13==3.4.5"
)
# torch's own pure-Python requirements (triton deliberately left out).
TORCH_PY_DEPS=(filelock "typing-extensions>=4.10.0" "setuptools>=77.0.3" "sympy>=1.13.3"
               "networkx>=2.5.1" jinja2 "fsspec>=0.8.5")
# The light requirements vLLM's config and platform modules import (from the notes).
VLLM_LIGHT_DEPS=(packaging pydantic regex numpy cbor2 psutil pyzmq urllib3
                 "transformers>=5.16.1,<5.21.0" aiohttp requests oss-harmony openai pillow
                 pybase64 cachetools msgspec cloudpickle uvloop py-cpuinfo prometheus_client
                 "fastapi<0.137" partial-json-parser "llguidance<1.8"
                 "apache-tvm-ffi==$TVM_FFI_VERSION")
# What the tests need to import harness.judge.finalize, harness.cli.finalize and run pytest.
HARNESS_TEST_DEPS=(pytest pytest-timeout pyyaml click)

say() { printf 'upstream-venv: %s\n' "$*"; }

probe() {
  # Succeeds when the venv imports vLLM at the pinned version and the test deps are there.
  [ -x "$VENV/bin/python" ] || return 1
  VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" - "$VLLM_VERSION" >/dev/null 2>&1 <<'EOF'
import sys
import click, pytest, pytest_timeout, yaml  # noqa: F401
import vllm
from vllm.config import CompilationConfig, VllmConfig  # noqa: F401
sys.exit(0 if vllm.__version__ == sys.argv[1] else 1)
EOF
}

pip_install() {
  # Download into the wheel folder (files already there are reused), then install from it.
  say "pip install $*"
  "$VENV/bin/python" -m pip download --disable-pip-version-check -q -d "$WHEELS" "$@"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-index \
    --find-links "$WHEELS" "$@"
}

if [ "${UPSTREAM_VENV_REBUILD:-0}" = 1 ] && [ -d "$VENV" ]; then
  say "UPSTREAM_VENV_REBUILD=1: removing $VENV"
  rm -rf "$VENV"
fi

if probe; then
  say "$VENV already imports vllm==$VLLM_VERSION; nothing to do"
  exit 0
fi

started=$(date +%s)
say "building $VENV (vllm==$VLLM_VERSION, torch==$TORCH_VERSION; CPU-only)"
say "wheels downloaded to (and reused from) $WHEELS"
mkdir -p "$WHEELS"
if [ ! -x "$VENV/bin/python" ]; then
  command -v "$PYTHON" >/dev/null || { say "$PYTHON not found (set UPSTREAM_PYTHON)"; exit 3; }
  say "creating the venv with $($PYTHON --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
fi

say "step 1/5: torch==$TORCH_VERSION without its dependencies (PyPI's build is the CUDA one)"
pip_install --no-deps "torch==$TORCH_VERSION"
say "step 2/5: the CUDA runtime libraries torch loads at import, and its Python deps (no triton)"
pip_install "${TORCH_CUDA_LIBS[@]}" "${TORCH_PY_DEPS[@]}"
say "step 3/5: vllm==$VLLM_VERSION and xgrammar==$XGRAMMAR_VERSION without their dependencies"
pip_install --no-deps "vllm==$VLLM_VERSION" "xgrammar==$XGRAMMAR_VERSION"
say "step 4/5: the light pure-Python requirements of vllm.config and vllm.platforms"
say "(pip may warn that vllm's GPU-only requirements are missing: expected, they are left out)"
pip_install "${VLLM_LIGHT_DEPS[@]}"
say "step 5/5: what the tests need (pytest, pytest-timeout, pyyaml, click)"
pip_install "${HARNESS_TEST_DEPS[@]}"

"$VENV/bin/python" -m pip freeze --disable-pip-version-check > "$VENV/freeze.txt"
if ! probe; then
  say "the venv was built but does not import vllm==$VLLM_VERSION; the import says:"
  VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c "import vllm.config" 2>&1 | tail -n 20 || true
  exit 3
fi
say "done in $(( $(date +%s) - started )) s; size $(du -sh "$VENV" | cut -f1); package list in $VENV/freeze.txt"
