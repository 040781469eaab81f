"""Any bytes as a holder record never raise from read_holder, describe_holder, the night
lock's describe or status render (`make fuzz`; bounded by HARNESS_FUZZ_EXAMPLES)."""

from __future__ import annotations

import json
import os
import string
import tempfile
import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.measure.lock import describe_holder, holder_path, parse_holder, read_holder
from harness.measure.nightfolder.holder import describe, night_lock_path
from harness.readers.statuslines import lock_state, render

EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=5000,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FIELDS = ["pid", "pid_create_time", "host", "user", "run_id", "since", "kind", "campaign",
          "night_dir", "run_dir", "alive", "unreadable"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                    st.text(max_size=300), st.text(string.printable, max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=6)),
    max_leaves=30)
records = st.one_of(
    st.binary(max_size=2000),
    values.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    st.dictionaries(st.sampled_from(FIELDS), values, max_size=12).map(
        lambda d: json.dumps(d, allow_nan=True).encode()),
    st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from([b"1e999", b'{"pid": 1e999}', b'{"pid": ' + b"9" * 5000 + b"}",
                     b'{"user": "\xff"}', b'{"pid": NaN}']),
)


def safe_line(text: str) -> None:
    assert isinstance(text, str) and len(text) < 2000
    assert not [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


@FUZZ
@given(raw=records)
def test_any_bytes_as_a_holder_record_never_raise(raw: bytes) -> None:
    rec = parse_holder(raw)
    assert isinstance(rec, dict)
    with tempfile.TemporaryDirectory() as d:
        lock = Path(d) / "gpu.lock"
        holder_path(lock).write_bytes(raw)
        holder_path(night_lock_path(lock)).write_bytes(raw)
        holder = read_holder(lock)
        assert holder is not None and isinstance(holder["alive"], bool)
        safe_line(describe_holder(holder))
        safe_line(describe(holder))
        state = {"lock": lock_state(lock), "containers": [], "engine_error": None,
                 "night": None}
        for line in render(state):
            safe_line(line)
        json.dumps(state, allow_nan=False)
