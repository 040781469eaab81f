"""Hostile logs and hostile run folders never crash the metrics, `show` or `report`
(`make fuzz`; bounded by HARNESS_FUZZ_EXAMPLES like tests/fuzz/test_fuzz_inputs.py).

The metrics parser must be total over any text: whatever digits land in each vLLM pattern,
`feed` returns, every value is finite, and the document dumps with allow_nan=False. `show`
and `report` must render any JSON a run folder may hold (rich markup, ANSI escapes,
non-finite numbers, naive and aware times) with exit 0 (`show --json` of NaN or Infinity:
exit 2, as JSON has no form for them); `show` of a sealed run whose
run.json is not of a run record's shape (`runfolder.shape`: wrong types, a status no run
can have) ends in exit 2 naming the fault, and `report` lists it as that run's problem:
never a traceback, never live markup.
"""

from __future__ import annotations

import json
import math
import os
import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base import names
from harness.base.atomic import dumps_json
from harness.base.states import STATUSES
from harness.measure.metrics import METRICS, MetricsParser, _document, parse_lines
from harness.measure.runfolder import shape
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.runfolder.runjson import SCHEMA
from tests.inprocess import invoke

EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=10000,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])

TEMPLATES = (
    "Available KV cache memory: {a} GiB",
    "(EngineCore pid=1) INFO GPU KV cache size: {a} tokens",
    "Maximum concurrency for {a} tokens per request: {b}x",
    "Model loading took {a} GiB memory and {b} seconds",
    "Graph capturing finished in {a} secs, took {b} GiB",
    "init engine (profile, create kv cache, warmup model) took {a} seconds "
    "(compilation: {b} s)",
)
digits = st.one_of(
    st.text("0123456789", min_size=1, max_size=60),
    st.text("0123456789,.-eE+", min_size=1, max_size=40),
    st.integers(1, 12000).map(lambda n: "9" * n),  # past float range and the int digit limit
    st.tuples(st.integers(1, 6000), st.integers(1, 6000)).map(
        lambda t: "1" * t[0] + "." + "5" * t[1]),
    st.sampled_from(["1e999", "inf", "nan", "Infinity", "-0", "\u0661\u0662", "\uff11"]),
)




def assert_clean(code: int, output: str, allowed: tuple[int, ...] = (0, 2)) -> None:
    assert code in allowed, (code, output[-2000:])
    assert "Traceback" not in output and "internal error" not in output, output[-2000:]
    assert "\x1b" not in output, "an ANSI escape from the evidence reached the terminal"
    if code != 0:
        assert output.strip(), "a failure must say why"


def check_document(parser: MetricsParser) -> None:
    metrics = parser.metrics()
    assert set(metrics) == set(METRICS)
    for value in metrics.values():
        assert value is None or (not isinstance(value, bool) and math.isfinite(value))
    dumps_json(_document(parser, []))  # allow_nan=False: must not raise


@FUZZ
@given(st.lists(st.text(max_size=300), max_size=8))
def test_parse_lines_is_total_over_any_text(lines: list[str]) -> None:
    parser = MetricsParser()
    parse_lines(lines, parser)
    check_document(parser)


@FUZZ
@given(st.sampled_from(TEMPLATES), digits, digits, st.text(max_size=20), st.text(max_size=20))
def test_any_digits_in_each_pattern_are_a_value_or_a_note(template: str, a: str, b: str,
                                                          prefix: str, suffix: str) -> None:
    parser = MetricsParser()
    parse_lines([prefix + template.format(a=a, b=b) + suffix], parser)
    check_document(parser)
    for note in parser.notes:
        assert note["metric"] in METRICS and note["at"] == "1"


markup = st.sampled_from(["[/…]", "[/]", "[bold red]", "[/bold]", "[link=http://x]", ":smile:",
                          "\x1b[2J", "\x1b]8;;http://x\x07", "\u202e", "\n", "\r", "<script>",
                          "`", "|", "\ud800", "[x](javascript:1)"])
hostile_text = st.lists(st.one_of(markup, st.text(string.printable, max_size=8)),
                        max_size=6).map("".join)
times = st.one_of(hostile_text, st.sampled_from([
    "2026-01-01T00:00:00", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00+05:00",
    "0001-01-01T00:00:00", "9999-12-31T23:59:59+00:00"]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30),
                    st.floats(allow_nan=True, allow_infinity=True), hostile_text, times)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(hostile_text, inner, max_size=3)),
    max_leaves=12)
FIELDS = ("run_id", "status", "campaign", "control", "image", "seal", "reasons", "times",
          "lock", "outcome", "post_steps", "rerun_of", "attempt")


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """`good` three times in four, else `bad`."""
    return st.integers(0, 3).flatmap(lambda i: bad if i == 0 else good)


run_ids = mostly(st.from_regex(names.pattern(names.RUN_ID_MAX), fullmatch=True), hostile_text)
statuses = mostly(st.sampled_from(STATUSES), st.one_of(hostile_text, values))
step_names = mostly(hostile_text.map(lambda t: t or "p"), hostile_text)


@st.composite
def run_records(draw) -> dict:
    """Mostly a run record's shape with hostile text in its fields; at times a wrong id,
    status or type in some field (which the strict reader must name)."""
    record = {
        "schema": SCHEMA, "run_id": draw(run_ids), "status": draw(statuses),
        "campaign": {"name": draw(hostile_text), "row": draw(hostile_text)},
        "control": {"name": draw(hostile_text)},
        "reasons": draw(st.lists(hostile_text, max_size=3)),
        "times": {"started": draw(times), "ended": draw(times)},
        "lock": {"acquired": draw(times), "released": draw(times), "wait_s": draw(scalars)},
        "rerun_of": {"run_id": draw(hostile_text), "reason": draw(hostile_text)},
        "post_steps": [{"name": draw(step_names), "verdict": draw(values)}],
    }
    for key in draw(mostly(st.just([]), st.lists(st.sampled_from(FIELDS), max_size=3))):
        record[key] = draw(values)
    return record


def shown_code(doc: object, as_json: bool = False) -> int:
    """The exit `show` of a sealed run owes this run.json: 0 for a record, 2 otherwise; and
    2 for `--json` of a record holding NaN or Infinity (JSON has no form for them)."""
    if not isinstance(doc, dict) or shape.problems(doc):
        return 2
    try:
        json.dumps(doc, allow_nan=False)
    except ValueError:
        return 2 if as_json else 0
    return 0


def write(path: Path, doc: object) -> None:
    path.write_text(json.dumps(doc), encoding="utf-8", errors="surrogatepass")


@FUZZ
@given(record=run_records(), metrics=st.dictionaries(st.sampled_from(METRICS), scalars),
       rerun_reason=hostile_text)
def test_show_and_report_render_any_run_record(tmp_path_factory, record, metrics,
                                               rerun_reason) -> None:
    night = tmp_path_factory.mktemp("n") / "camp-20260101T000000Z"
    run = night / "r1"
    run.mkdir(parents=True)
    write(run / "run.json", record)
    write(run / "metrics.json", {"metrics": metrics})
    write(run / "recovered.json", {"note": rerun_reason})
    with open(night / "reruns.jsonl", "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(json.dumps({"original": {"run_id": "r1"}, "rerun": {"run_id": rerun_reason},
                            "reason": rerun_reason, "status": record.get("status"), "at": 1})
                + "\n")
    write_manifest(run)  # show reads only a sealed, intact run
    for args in (("show", str(run)), ("show", "--json", str(run))):
        code = shown_code(record, as_json="--json" in args)
        shown, out = invoke(*args)
        assert_clean(shown, out, allowed=(code,))
        if code and shape.problems(record):
            assert "not a run record" in out and shape.problems(record)[0] in out, out
        elif code:
            assert "NaN or Infinity" in out, out
    for fmt in ("md", "html", "json"):
        code, out = invoke("report", str(night), "--format", fmt)
        assert_clean(code, out, allowed=(0,))
        if fmt == "json":
            json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(c)))
        else:
            assert "<script>" not in out


@FUZZ
@given(doc=values)
def test_show_any_json_document_is_shown_or_invalid(tmp_path_factory, doc) -> None:
    run = tmp_path_factory.mktemp("r")
    write(run / "run.json", doc)
    write_manifest(run)
    code, out = invoke("show", str(run))
    assert_clean(code, out, allowed=(shown_code(doc),))
