"""Keeping the hook's credentials out of every text it leaves: one mask, before any cut.

Errors seldom quote a secret whole (a URL's path, `user:password`, a token without its
scheme, encoded, or cut by a line limit), so every part of a secret in each encoding is
masked, and any WINDOW characters of one in a row, before the text is made inert and cut.
Values shorter than MIN_PART are no credential (masking them would garble every text).
`Redactor.clean` is the one way a hook's text leaves; no writer cuts a text before it."""

from __future__ import annotations

import base64
import binascii
import re
import string
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

from harness.readers.report.inert import inert

REDACTED = "<redacted>"
WINDOW = 8  # a fragment of a secret this long identifies it
MIN_PART = 4  # shorter (a 3-letter user name) is masked only within the longer parts
LINE_CHARS = 2000
_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # keeps every length
_WORDS = re.compile(r"[\s,;]+")


def _url_parts(value: str) -> list[str]:
    """The parts of a URL that carry its secret: everything after `scheme://` (host, path,
    query), the user info and its user and password (and the Basic token an HTTP library
    makes of them), host+path, the path, the query and each of its values, the fragment."""
    split = urlsplit(value)
    userinfo, _, hostport = split.netloc.rpartition("@")
    host = hostport.rsplit(":", 1)[0] if hostport.count(":") == 1 else hostport
    parts = [value.partition("://")[2], split.path if len(split.path) > 1 else "",
             hostport + split.path, host + split.path, split.query, split.fragment]
    for pair in re.split(r"[&;]", split.query):
        parts.append(pair.partition("=")[2])
    if userinfo:
        user, _, password = userinfo.partition(":")
        basic = f"{unquote(user)}:{unquote(password)}".encode("utf-8", "replace")
        parts += [userinfo, user, password, base64.b64encode(basic).decode("ascii")]
    return parts


def _credential_parts(value: str) -> list[str]:
    """The parts of a header value: the credential after its scheme ("Bearer x" -> x; the
    value itself when it is one word), each later word and each `key=value`'s value
    (Digest's), and the user:password of a Basic token."""
    words = [w for w in _WORDS.split(value) if w]
    if len(words) < 2:
        return [value]
    parts = [value.split(None, 1)[1], *words[1:],
             *(w.partition("=")[2].strip("\"'") for w in words[1:] if "=" in w)]
    if words[0].lower() == "basic":
        try:
            decoded = base64.b64decode(words[1], validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            decoded = ""
        parts += [decoded, *decoded.partition(":")[::2]]
    return parts


def secret_parts(value: str) -> list[str]:
    """Pure: the parts of one secret value that identify it, any run of WINDOW characters of which
    is masked (a URL's parts when it is one, a header value's otherwise). A `scheme://` or a
    header's scheme word is not one: it would mask every other URL or token in a text."""
    split = urlsplit(value) if "://" in value else None
    parts = _url_parts(value) if split and split.scheme and split.netloc \
        else _credential_parts(value)
    return [p for p in dict.fromkeys(parts) if p]


def encodings(part: str) -> set[str]:
    """Pure: the forms a part is printed in: as given, percent-decoded (`+` as space or
    not), percent-encoded (whole or keeping `/`, once or twice), `/` escaped as JSON may."""
    plain = {part, unquote(part), unquote_plus(part)}
    out = set(plain)
    for text in plain:
        out |= {quote(text, safe=""), quote(text), quote_plus(text, safe="")}
    out |= {quote(text, safe="") for text in list(out) if "%" in text}
    out |= {text.replace("/", "\\/") for text in list(out) if "/" in text}
    return out


@dataclass(frozen=True)
class Redactor:
    """What to mask: every WINDOW-long run of a secret part (`windows`) and the short parts
    and whole values to mask where they stand (`exact`), all ASCII-folded."""

    windows: frozenset[str] = frozenset()
    exact: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str]) -> Redactor:
        """Pure: the redactor for these secret values."""
        windows: set[str] = set()
        exact: set[str] = set()
        for value in (v for v in values if len(v) >= MIN_PART):
            exact.update(form.translate(_FOLD) for form in encodings(value))
            for part in secret_parts(value):
                for form in encodings(part):
                    form = form.translate(_FOLD)
                    if len(form) >= WINDOW:
                        windows.update(form[i:i + WINDOW]
                                       for i in range(len(form) - WINDOW + 1))
                    elif len(form) >= MIN_PART:
                        exact.add(form)
        return cls(frozenset(windows), tuple(sorted(exact, key=len, reverse=True)))

    def _mask(self, text: str) -> str:
        folded = text.translate(_FOLD)
        hit = bytearray(len(text))
        if self.windows:
            for i in range(len(folded) - WINDOW + 1):
                if folded[i:i + WINDOW] in self.windows:
                    hit[i:i + WINDOW] = b"\1" * WINDOW
        for secret in self.exact:
            at = folded.find(secret)
            while at >= 0:
                hit[at:at + len(secret)] = b"\1" * len(secret)
                at = folded.find(secret, at + 1)
        if not any(hit):
            return text
        out, i = [], 0
        while i < len(text):
            j = i
            while j < len(text) and hit[j] == hit[i]:
                j += 1
            out.append(REDACTED if hit[i] else text[i:j])
            i = j
        return "".join(out)

    def clean(self, text: str, limit: int = LINE_CHARS, *, keep_end: bool = False) -> str:
        """`text` masked whole, as one inert line, then bounded to `limit` characters: its
        start (or its end with `keep_end`, where a command's last words are)."""
        line = inert(self._mask(text), sys.maxsize)  # escaped, not yet cut
        if len(line) <= limit:
            return line
        if keep_end:
            return f"({len(line) - limit} characters before) …{line[-limit:]}"
        return f"{line[:limit]}… ({len(line) - limit} more characters)"

    def clean_tree(self, value: Any, limit: int = LINE_CHARS) -> Any:
        """A JSON document with every string value in it through `clean`."""
        if isinstance(value, str):
            return self.clean(value, limit)
        if isinstance(value, dict):
            return {k: self.clean_tree(v, limit) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.clean_tree(v, limit) for v in value]
        return value
