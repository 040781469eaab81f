"""The range grammar fuzzed (harness.base.bounds; bounded by HARNESS_FUZZ_EXAMPLES).

Any text as a range list, a gres.conf hostlist, a whole gres.conf, a Slurm array range or a
job's GPU list is either read within its bound or refused with the one typed error its
parser raises, and quickly: a bound is checked before anything is expanded. What is read
is what was written: spans rendered back to text parse to the same spans, and whether a
hostlist names a node (counted, never expanded) agrees with its expansion.
"""

from __future__ import annotations

import os
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base import bounds
from harness.base.bounds import BadText
from harness.measure.slurm import gres, identity, query

EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=5000,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

GRAMMAR = "0123456789-,[]%"
numbers = st.one_of(st.integers(0, 10**30).map(str), st.sampled_from(
    ["9" * 5000, "0" * 40, "99999999", "-1", "", "\x00", "\udcff", "\u0661", " 1", "1_0"]))
pieces = st.one_of(numbers, st.text(GRAMMAR, max_size=12), st.sampled_from(["-", ",", "%"]))
ranges = st.one_of(st.lists(pieces, max_size=8).map("".join), st.text(max_size=40),
                   st.lists(st.tuples(numbers, numbers), max_size=5).map(
                       lambda pairs: ",".join(f"{a}-{b}" for a, b in pairs)))
hostlists = st.one_of(
    st.tuples(st.text("abn/.", max_size=4), ranges, st.text("x-.", max_size=2)).map(
        lambda t: f"{t[0]}[{t[1]}]{t[2]}"),
    st.text(GRAMMAR + "abn", max_size=40))


def quick(started: float) -> None:
    assert time.monotonic() - started < 2, "a bound must be checked before any expansion"


@FUZZ
@given(text=ranges, limit=st.integers(1, 5000))
def test_any_range_list_is_spans_within_the_bound_or_bad_text(text: str, limit: int) -> None:
    started = time.monotonic()
    try:
        spans = bounds.parse_ranges(text, max_elements=limit)
    except BadText as e:
        assert e.message and len(e.message) < 400, e.message
        quick(started)
        return
    assert sum(len(s) for s in spans) <= limit
    assert all(0 <= s.low <= s.high < 10**18 for s in spans)
    names = [n for s in spans for n in s.names()]
    assert len(names) == sum(len(s) for s in spans)
    assert all(n.isascii() and n.isdigit() for n in names)
    quick(started)


@FUZZ
@given(spans=st.lists(st.tuples(st.integers(0, 10**13), st.integers(0, 40),
                                st.integers(0, 4)), min_size=1, max_size=6))
def test_spans_written_out_read_back_the_same(spans: list[tuple[int, int, int]]) -> None:
    text = ",".join(f"{low:0{pad + len(str(low))}d}-{low + n}" for low, n, pad in spans)
    got = bounds.parse_ranges(text, max_elements=10**6)
    assert [(s.low, len(s)) for s in got] == [(low, n + 1) for low, n, _ in spans]
    for span, (low, _, pad) in zip(got, spans, strict=True):
        assert span.width == (pad + len(str(low)) if pad or low == 0 else 0)
        assert next(span.names()) == f"{low:0{span.width}d}"


@FUZZ
@given(pattern=hostlists, node=st.one_of(st.text("abn0123456789x-.", max_size=10),
                                         st.sampled_from(["n1", "n01", "a0", "b7x"])))
def test_a_hostlist_is_read_or_refused_and_membership_matches_expansion(
        pattern: str, node: str) -> None:
    started = time.monotonic()
    try:
        names = gres.expand(pattern)
    except (BadText, gres.Unsupported):
        quick(started)
        return
    assert len(names) <= gres.MAX_EXPAND
    assert gres.names_node(pattern, node) == (node in names)
    quick(started)


@FUZZ
@given(files=hostlists, nodes=hostlists, node=st.sampled_from(["n1", "a0", "x"]),
       noise=st.text(max_size=20))
def test_any_gres_conf_is_files_none_or_a_typed_error(files: str, nodes: str, node: str,
                                                       noise: str) -> None:
    text = f"NodeName={nodes} Name=gpu File={files} {noise}\nName=gpu File={files}\n"
    started = time.monotonic()
    try:
        got = gres.gpu_files(text, node)
    except (BadText, gres.Unsupported) as e:
        assert str(e).startswith("gres.conf "), e
        quick(started)
        return
    assert got is None or (0 < len(got) <= gres.MAX_EXPAND)
    quick(started)


@FUZZ
@given(text=st.one_of(ranges, st.tuples(ranges, numbers).map(lambda t: f"{t[0]}%{t[1]}")))
def test_any_slurm_array_range_is_tasks_or_unreadable(text: str) -> None:
    started = time.monotonic()
    try:
        tasks = query.expand_array("12", text)
    except query.Unreadable:
        quick(started)
        return
    assert len(tasks) <= query.MAX_ARRAY_TASKS and all(t.startswith("12_") for t in tasks)
    parsed = query.parse_sacct(f"12_[{text}]|n|PENDING|0:0|\n")
    assert len(parsed.jobs) + len(parsed.skipped) >= 1
    quick(started)


@FUZZ
@given(value=st.one_of(ranges, numbers))
def test_any_job_gpu_list_is_indexes_or_none(value: str) -> None:
    got = identity.gpu_indexes({"SLURM_JOB_ID": "1", "SLURM_JOB_GPUS": value})
    assert got is None or all(0 <= i <= 9999 for i in got)
