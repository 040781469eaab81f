"""Test double of vllm.plugins.load_general_plugins: entry points of group
`vllm.general_plugins`, filtered by the comma-separated VLLM_PLUGINS, once per process."""

import importlib.metadata
import os

from vllm.logger import init_logger

logger = init_logger(__name__)
plugins_loaded = False


def load_general_plugins() -> None:
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    allowed = os.environ.get("VLLM_PLUGINS")
    names = None if allowed is None else [n for n in allowed.split(",") if n]
    for ep in importlib.metadata.entry_points(group="vllm.general_plugins"):
        if names is not None and ep.name not in names:
            continue
        logger.info("Loading general plugin %s", ep.name)
        try:
            ep.load()()
        except Exception:
            logger.exception("Failed to load general plugin %s", ep.name)
