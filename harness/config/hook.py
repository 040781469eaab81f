"""A campaign's `hook:` block: what `harness night` tells someone when a night ends
(docs/scheduling.md). The campaign file is sealed and travels in bundles, so it never holds
a credential: URL and headers are named by environment variable, a literal is invalid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from harness.config.schema import Duration, Strict
from harness.config.yamlsafe import Document, Fault

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")  # as a control's env names
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")  # an RFC 9110 token
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_HEADERS = 16
MAX_URL = 4096
MAX_TIMEOUT = 600.0
USE_ENV = {  # a literal value where only a variable's name belongs -> the form to use
    "webhook": "a webhook URL embeds its secret: put it in an environment variable and "
               "use `webhook_env: NAME` with that variable's name",
    "url": "a webhook URL embeds its secret: put it in an environment variable and use "
           "`webhook_env: NAME` with that variable's name",
    "headers": "a header value is a credential: put it in an environment variable and use "
               "`headers_env: {Header: NAME}` with that variable's name",
}


def _env_name(value: Any) -> str:
    """A variable's name; the refused value is never quoted (it may be the secret)."""
    if not isinstance(value, str) or not ENV_NAME.match(value):
        looks = isinstance(value, str) and ("://" in value or " " in value)
        raise ValueError(
            "expected the NAME of an environment variable (letters, digits and '_', not "
            "starting with a digit), not a value" + (
                "; the value itself (a URL, a token) goes into that variable, never into "
                "the campaign" if looks else ""))
    return value


EnvVar = Annotated[str, BeforeValidator(_env_name)]


def _header_name(value: str) -> str:
    if not HEADER_NAME.match(value):
        raise ValueError("a header name is 1 to 64 letters, digits or !#$%&'*+.^_`|~-")
    return value


HeaderName = Annotated[str, AfterValidator(_header_name)]


def _argv(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("command must be an argv list (e.g. [/usr/local/bin/notify, "
                         "--night]), never a shell string")
    return value


Arg = Annotated[str, Field(min_length=1, max_length=4096)]


def _timeout(seconds: float) -> float:
    """The night's end waits for the hook: a bound, well under an hour."""
    if seconds > MAX_TIMEOUT:
        raise ValueError(f"a hook's timeout is at most {MAX_TIMEOUT:.0f} s (10m), not "
                         f"{seconds:g} s")
    return seconds


class HookConfig(Strict):
    """The `hook:` block as written; the readers' night hook is what runs it."""

    command: Annotated[list[Arg], BeforeValidator(_argv)] | None = Field(
        default=None, min_length=1, max_length=256)
    webhook_env: EnvVar | None = None
    headers_env: dict[HeaderName, EnvVar] = Field(default_factory=dict,
                                                  max_length=MAX_HEADERS)
    bundle: bool = False
    timeout: Annotated[Duration, AfterValidator(_timeout)] = 30.0
    webhook: Any = None  # refused when given: see USE_ENV
    url: Any = None
    headers: Any = None

    @field_validator("webhook", "url", "headers")
    @classmethod
    def _no_literal(cls, value: Any, info: Any) -> Any:
        if value is not None:
            raise ValueError(USE_ENV[info.field_name])
        return value

    @model_validator(mode="after")
    def _something_to_run(self) -> HookConfig:
        if self.command is None and self.webhook_env is None:
            raise ValueError("a hook needs `command` (an argv) or `webhook_env` (the name of "
                             "the environment variable holding the URL), or both")
        if self.headers_env and self.webhook_env is None:
            raise ValueError("headers_env is sent with the webhook: give webhook_env too")
        return self


class HookBlock(Strict):
    """The wrapper the loader validates `{"hook": ...}` with, for positions."""

    hook: HookConfig


def url_problem(url: str) -> str | None:
    """Pure: why `url` may not receive a night's summary, in words that never quote it
    (it embeds a secret). https anywhere; plain http only to this machine."""
    if len(url) > MAX_URL or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        return (f"is not one URL (spaces, control characters or over {MAX_URL} "
                "characters)")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return "is not a URL"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and host in LOCAL_HOSTS:
        return None
    if parts.scheme == "http" and host:
        return ("holds an http:// URL to another host: only https:// URLs, or http:// to "
                "localhost, 127.0.0.1 or ::1, may receive a night's summary")
    return "does not hold an https:// URL (or http:// to localhost, 127.0.0.1 or ::1)"


def header_value_problem(value: str) -> str | None:
    """Pure: why `value` cannot be sent as a header's value (never quoting it)."""
    if not value or len(value) > 8192:
        return "is empty or over 8192 characters"
    if any((ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F or ord(ch) > 0xFF
           for ch in value):
        return "holds a newline, a control character or a character outside Latin-1"
    return None


def secret_values(hook: HookConfig, environ: Mapping[str, str]) -> tuple[str, ...]:
    """Pure over `environ`: the values of the variables the hook names (the webhook's URL,
    each header's value), where set: what no text the hook leaves may hold, whole or in
    part (the readers' hook masks them in every line it writes or says)."""
    names = [hook.webhook_env, *hook.headers_env.values()]
    return tuple(environ[n] for n in names if n and environ.get(n))


def environment_faults(hook: HookConfig, doc: Document,
                       environ: Mapping[str, str]) -> list[Fault]:
    """Pure over `environ`: the variables the hook names that are set but unusable, at
    the key that names them. An unset variable is no fault here (`harness check` on a
    machine without the secret); the hook says so when it runs."""
    faults = []
    url = environ.get(hook.webhook_env) if hook.webhook_env else None
    if url is not None and (why := url_problem(url)) is not None:
        faults.append(doc.fault(("hook", "webhook_env"), f"hook.webhook_env: the "
                                    f"variable {hook.webhook_env} {why}"))
    for header, name in hook.headers_env.items():
        if (value := environ.get(name)) is not None \
                and (why := header_value_problem(value)) is not None:
            faults.append(doc.fault(("hook", "headers_env", header), f"hook.headers_env."
                                    f"{header}: the variable {name} {why}"))
    return faults
