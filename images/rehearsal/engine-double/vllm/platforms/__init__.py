"""Test double: the current platform is always the (double) ROCm platform."""

from vllm.platforms.rocm import RocmPlatform

current_platform = RocmPlatform()
