"""The second witness: vLLM's own configuration hash, compared within each process's pair.

The instrument records, beside its own encoding of every field, the hash vLLM computes of
its configuration (`VllmConfig.compute_hash()`, the key of its compile cache: the fields
that shape the computation graph, read by vLLM's own code). The seed's failure was in an
encoder; this witness does not go through ours. Pure functions.

- Fields agree and the hash changed: something vLLM hashes changed that the compared fields
  did not show (a field outside the contract or outside our encoding, or an encoding that
  wrote two values one way). It refuses: the run did not generate under the configuration
  it started with, whatever our fields say.
- A field differs and the hash agrees: the field lies outside vLLM's hash. The field's own
  rule refuses; the difference is marked, so the reader knows vLLM would not have noticed.
- Hash recorded at one phase only: the witness was lost in between, which refuses.
- Recorded at neither (a document written before the witness, an engine without the
  method): nothing to compare, said in the process's entry.
"""

from __future__ import annotations

from typing import Any

from harness.base.catalogue import GATE0_HASH_DIFFERS, GATE0_HASH_MISSING
from harness.base.reason import Reason
from harness.base.tree import printable
from harness.instrument.harness_observer.encode import canonical
from harness.instrument.harness_observer.interface import PHASES

MAX_NAMED = 10  # uncompared fields named in a reason; the rest counted
MAX_NOTE = 300


def recorded(doc: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the hash, the instrument's note on why there is none) of one readable document."""
    witness = doc.get("engine_hash")
    if not isinstance(witness, dict):
        return None, None
    return witness.get("value"), witness.get("note")


def uncompared_changes(startup: dict[str, Any], generation: dict[str, Any],
                       compared: set[str]) -> list[str]:
    """The recorded fields that changed between the phases but were not compared."""
    names = set(startup) | set(generation)
    return sorted(n for n in names - compared
                  if n not in startup or n not in generation
                  or canonical(startup[n]) != canonical(generation[n]))


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def witness(name: str, pair: dict[str, dict[str, Any]], differences: list[dict[str, Any]],
            compared: set[str]) -> tuple[list[Reason], dict[str, Any]]:
    """(reasons, the process's `engine_hash` entry) for one process's complete pair.
    `differences` are the pair's compared-field differences, `compared` the field names
    compared (to name, when the hash alone changed, the recorded fields that were not)."""
    startup, generation = (pair[phase] for phase in PHASES)
    (before, before_note), (after, after_note) = recorded(startup), recorded(generation)
    entry: dict[str, Any] = {"startup": before, "generation": after}
    notes = [printable(n)[:MAX_NOTE] for n in (before_note, after_note) if isinstance(n, str)]
    if before is None and after is None:
        entry.update(compared=False, note="; ".join(dict.fromkeys(notes))
                     or "not recorded (no engine_hash in the documents)")
        return [], entry
    if before is None or after is None:
        lost = "generation" if after is None else "start-up"
        why = f" ({'; '.join(notes)})" if notes else ""
        entry.update(compared=False, note=f"not recorded at {lost}{why}")
        return [Reason(GATE0_HASH_MISSING, f"vLLM's configuration hash was recorded at "
                       f"{'start-up' if lost == 'generation' else 'generation'} "
                       f"({printable(before or after)}) and not at {lost}{why}, in {name}")], entry
    entry.update(compared=True, agrees=before == after)
    if before != after and not differences:
        changed = uncompared_changes(startup["fields"], generation["fields"], compared)
        seen = (f"; recorded fields left out of the comparison that changed: {_named(changed)}"
                if changed else "; no recorded field changed: the change is outside what "
                "the instrument encodes")
        return [Reason(GATE0_HASH_DIFFERS, f"vLLM's configuration hash changed from "
                       f"{printable(before)} at start-up to {printable(after)} at generation "
                       f"while every compared field agrees, in {name}{seen}")], entry
    return [], entry


def mark(differences: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Each difference, marked `outside_engine_hash` when vLLM's hash agreed across it."""
    outside = entry.get("agrees") is True
    return [{**d, "outside_engine_hash": True} if outside else d for d in differences]
