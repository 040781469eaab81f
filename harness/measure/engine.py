"""The one place the harness talks to the Docker engine through the SDK (a test checks it)."""

from __future__ import annotations

import functools
from typing import Any

import docker
import docker.errors

from harness.base.catalogue import ENV_NO_ENGINE
from harness.base.errors import EnvironmentFault, InvalidInput


@functools.lru_cache(maxsize=1)
def client() -> docker.DockerClient:
    """A pinged client, or exit 3 with a clear message: nothing is locked or launched first."""
    try:
        c = docker.from_env(timeout=60)
        c.ping()
    except Exception as e:  # the SDK raises many kinds here: all mean "no engine"
        raise EnvironmentFault(
            f"cannot reach the Docker engine ({type(e).__name__}: {e}); is dockerd running "
            "and is DOCKER_HOST right?", rule=ENV_NO_ENGINE) from None
    return c


def try_client(timeout: int = 10) -> tuple[docker.DockerClient | None, str | None]:
    """A client for the doctor and host snapshot, or why there is none: never pings or raises."""
    try:
        return docker.from_env(timeout=timeout), None
    except (docker.errors.DockerException, OSError) as e:
        return None, short_error(e)


def short_error(e: BaseException) -> str:
    """The first line of an SDK error, at most 200 characters: fit for one report line."""
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


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


def facts(c: Any | None) -> tuple[dict | None, dict | None, str | None]:
    """(`docker version`, `docker info`, error): error is set when the engine does not answer."""
    if c is None:
        return None, None, "no Docker client"
    try:
        return c.version(), c.info(), None
    except (docker.errors.DockerException, OSError) as e:
        return None, None, short_error(e)
