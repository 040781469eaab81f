"""TEST ONLY. Gate-0 cases the real engine never gives by itself, made in the engine.

A `vllm.general_plugins` entry point (found through PYTHONPATH, mounted read-only by the
engine tier's case controls, never installed) that does one thing, chosen by
$ENGINE_TEST_CASE, in the processes vLLM loads plug-ins in. The engine, its files and the
observer stay the real ones; only the named change is made. Standard library only.

- `hidden`: the unguarded-append pattern of the seed (every `VllmConfig.__post_init__`
  changes the configuration again), on a field vLLM hashes but the observer does not
  encode: `parallel_config._allow_auto_resolve_cp_interleave_size` (a private field, which
  the observer never reads, and which only matters with a NixlConnector). The engine
  core's second post-init, after its handshake, flips it: every compared field agrees, and
  only vLLM's own configuration hash (the second witness) sees the change.
- `build`: the model-running worker says it is another vLLM build than the engine core
  and the front-end (`vllm.__version__` in the worker's process only): each process's
  pair agrees with itself; only the comparison across processes sees it.
"""

from __future__ import annotations

import functools
import multiprocessing
import os

CASE = "ENGINE_TEST_CASE"
HIDDEN = "_allow_auto_resolve_cp_interleave_size"
OTHER_BUILD = "+harness-test-other-build"
MARK = "__harness_engine_cases__"


def _flip_on_every_post_init() -> None:
    from vllm.platforms import current_platform

    platform = type(current_platform)
    original = platform.__dict__.get("apply_config_platform_defaults")
    if original is None:  # inherited: wrap what the class resolves to
        original = classmethod(platform.apply_config_platform_defaults.__func__)
    func = original.__func__ if isinstance(original, classmethod) else original
    if getattr(func, MARK, False):
        return

    @functools.wraps(func)
    def apply_config_platform_defaults(cls, vllm_config, *args, **kwargs):
        result = func(cls, vllm_config, *args, **kwargs)
        parallel = vllm_config.parallel_config
        setattr(parallel, HIDDEN, not getattr(parallel, HIDDEN))  # unguarded, as the seed's
        return result

    setattr(apply_config_platform_defaults, MARK, True)
    platform.apply_config_platform_defaults = classmethod(apply_config_platform_defaults)


def _another_build_in_the_worker() -> None:
    if not multiprocessing.current_process().name.startswith("VllmWorker"):
        return
    import vllm

    if not vllm.__version__.endswith(OTHER_BUILD):
        vllm.__version__ += OTHER_BUILD


def register() -> None:
    case = os.environ.get(CASE)
    if case == "hidden":
        _flip_on_every_post_init()
    elif case == "build":
        _another_build_in_the_worker()
    else:
        raise RuntimeError(f"{CASE} must be 'hidden' or 'build', not {case!r}")
