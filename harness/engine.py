"""The one place the harness talks to the Docker engine through the SDK."""

from __future__ import annotations

import functools
from typing import Any

import docker
import docker.errors

from harness.errors import EnvironmentFault, InvalidInput


@functools.lru_cache(maxsize=1)
def client() -> docker.DockerClient:
    """A pinged client, or exit 3 with a clear message: nothing is locked or launched first."""
    try:
        c = docker.from_env(timeout=60)
        c.ping()
    except Exception as e:  # the SDK raises many kinds here: all mean "no engine"
        raise EnvironmentFault(
            f"cannot reach the Docker engine ({type(e).__name__}: {e}); is dockerd running "
            "and is DOCKER_HOST right?", rule="ENV-NO-ENGINE") from None
    return c


def image_store() -> str:
    """Which image store the engine uses: with containerd, the Id is the manifest digest."""
    info: dict[str, Any] = client().info()
    for pair in info.get("DriverStatus") or []:
        if pair and pair[0] == "driver-type" and "containerd" in str(pair[1]):
            return "containerd"
    return str(info.get("Driver") or "unknown")


def local_image(ref: str) -> dict[str, Any] | None:
    """`docker image inspect` of `ref`, or None when the engine has no such image."""
    if not ref or not ref.strip():  # the SDK raises NullResource, not a lookup miss
        raise InvalidInput("an image reference must not be empty")
    try:
        return client().api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as e:
        if e.status_code == 404:
            return None
        raise EnvironmentFault(f"docker image inspect {ref}: {e}") from None
