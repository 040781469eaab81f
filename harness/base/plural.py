"""Counts in words: "1 file", "2 files". One spelling, so no message says "1 files"."""

from __future__ import annotations


def noun(n: int, word: str) -> str:
    """Pure: `word` as it goes with `n` ("control", "controls"); regular plurals only."""
    return word if n == 1 else f"{word}s"


def counted(n: int, word: str) -> str:
    """Pure: `n` and its noun: "1 fault", "2 faults", "0 files"."""
    return f"{n} {noun(n, word)}"
