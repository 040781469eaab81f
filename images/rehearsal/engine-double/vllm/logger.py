"""Test double: vLLM-shaped log lines (`INFO 08-31 17:43:37 [file.py:NN] message`) on stdout."""

import logging
import sys

_FORMAT = "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"


def configure(prefix: str = "") -> None:
    """(Re)install the one handler; the engine-core process adds `(EngineCore pid=N) `."""
    root = logging.getLogger("vllm")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(prefix + _FORMAT, datefmt="%m-%d %H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


def init_logger(name: str) -> logging.Logger:
    if not logging.getLogger("vllm").handlers:
        configure()
    return logging.getLogger(name)
