"""Test double of the `uni` executor: one worker, in this process, sharing the config."""

from vllm.v1.worker.worker_base import WorkerWrapperBase, run_method


class UniProcExecutor:
    def __init__(self, vllm_config) -> None:
        self.vllm_config = vllm_config
        self.driver_worker = WorkerWrapperBase(vllm_config, rank=0)
        self.driver_worker.init_worker()
        self.collective_rpc("init_device")
        self.collective_rpc("load_model")

    def collective_rpc(self, method, args=(), kwargs=None) -> list:
        return [run_method(self.driver_worker, method, args, kwargs or {})]

    def determine_available_memory(self) -> int:
        return self.collective_rpc("determine_available_memory")[0]

    def initialize_from_config(self, num_tokens: int) -> None:
        self.collective_rpc("initialize_from_config", args=(num_tokens,))

    def compile_or_warm_up_model(self) -> None:
        self.collective_rpc("compile_or_warm_up_model")

    def execute_model(self, scheduler_output) -> int:
        return self.collective_rpc("execute_model", args=(scheduler_output,))[0]
