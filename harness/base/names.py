"""Names that become folder names, labels and arguments: one alphabet, checked once.

Every such name comes from a campaign, a control or a bundle, so it is hostile until
checked: letters, digits, '.', '_' and '-', starting with a letter or digit, is one path
component, never '.' or '..', never an option, never needs quoting.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.timeutil import stamp

ALPHABET = "A-Za-z0-9._-"
SAFE_NAME_MAX = 64
RUN_ID_MAX = 200


def pattern(longest: int) -> str:
    """The regular expression (anchored, for pydantic and people) of a name in the one
    alphabet of at most `longest` characters."""
    return rf"^[A-Za-z0-9][{ALPHABET}]{{0,{longest - 1}}}$"


def _matcher(longest: int) -> re.Pattern[str]:
    return re.compile(pattern(longest).removeprefix("^").removesuffix("$"))


_SAFE = _matcher(SAFE_NAME_MAX)
_RUN_ID = _matcher(RUN_ID_MAX)
SAFE_NAME = pattern(SAFE_NAME_MAX)  # what the campaign schema checks a name against


def is_name(text: object, longest: int = SAFE_NAME_MAX) -> bool:
    """A name in the one alphabet of at most `longest` characters (`longest` at most
    RUN_ID_MAX: a bundle's or journal's names are never longer than a run id)."""
    matcher = _SAFE if longest == SAFE_NAME_MAX else _RUN_ID
    return (isinstance(text, str) and len(text) <= longest and matcher.fullmatch(text)
            is not None)


class SafeName(str):
    """A checked name: `SafeName.parse(text)` or InvalidInput."""

    __slots__ = ()

    @classmethod
    def parse(cls, text: object, what: str = "name") -> SafeName:
        if not is_name(text):
            raise InvalidInput(f"{what} {str(text)[:100]!r}: expected 1 to {SAFE_NAME_MAX} "
                               "letters, digits, '.', '_' or '-', starting with a letter or "
                               "digit")
        return cls(text)


class RunId(str):
    """One run's id, which is also its folder's name under the runs folder."""

    __slots__ = ()

    @classmethod
    def mint(cls, control: str) -> RunId:
        """A new id for a run of `control`: operators sharing a runs folder may start in
        the same second, and 32 random bits keep their folders apart."""
        return cls.parse(f"{SafeName.parse(control, 'control')}-{stamp()}-"
                         f"{secrets.token_hex(4)}")

    @classmethod
    def parse(cls, text: object, what: str = "run id") -> RunId:
        if not is_name(text, RUN_ID_MAX):
            raise InvalidInput(f"{what} {str(text)[:100]!r}: not a run id (1 to {RUN_ID_MAX} "
                               "letters, digits, '.', '_' or '-', starting with a letter or "
                               "digit)")
        return cls(text)

    @classmethod
    def valid(cls, text: object) -> bool:
        return is_name(text, RUN_ID_MAX)

    def of_control(self, control: str) -> bool:
        """Whether this id was minted for `control` (`<control>-...`)."""
        return self.startswith(f"{control}-")

    def folder(self, runs_dir: Path) -> Path:
        """The run's folder: one component under `runs_dir`, by construction."""
        return Path(runs_dir) / self
