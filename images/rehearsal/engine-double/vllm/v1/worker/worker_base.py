"""Test double of vllm/v1/worker/worker_base.py: the wrapper that builds the worker and mixes
the worker extension class into the worker class, appended to its bases as upstream does
(so an extension adds methods and can never override the worker's own)."""

import importlib


class WorkerBase:
    def __init__(self, vllm_config, rank: int = 0) -> None:
        self.vllm_config = vllm_config  # the same object the engine core holds (uni)
        self.rank = rank


def resolve_obj_by_qualname(qualname: str):
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name)


def run_method(obj, method, args, kwargs):
    func = getattr(obj, method) if isinstance(method, str) else method.__get__(obj)
    return func(*args, **kwargs)


class WorkerWrapperBase:
    def __init__(self, vllm_config, rank: int = 0) -> None:
        self.vllm_config = vllm_config
        self.rank = rank
        self.worker = None

    def init_worker(self) -> None:
        from vllm.v1.worker.gpu_worker import Worker

        qualname = self.vllm_config.parallel_config.worker_extension_cls
        if qualname:
            extension = resolve_obj_by_qualname(qualname)
            if extension not in Worker.__bases__:
                for attr in dir(extension):
                    if not attr.startswith("__") and hasattr(Worker, attr):
                        raise AssertionError(f"worker extension conflicts on {attr}")
                Worker.__bases__ = (*Worker.__bases__, extension)
        self.worker = Worker(self.vllm_config, rank=self.rank)

    def __getattr__(self, attr: str):
        return getattr(self.worker, attr)
