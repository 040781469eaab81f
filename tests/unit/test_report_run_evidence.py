"""The morning report's per-run evidence: each run's telemetry (a column of figures, a plot
with units) and the kernel log's faults with their lines, read from the run folder as
untrusted input (harness/readers/report/nights.py, summary.py, page.py)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.base.catalogue import KERNEL_LOG_AER
from harness.measure.runfolder import layout
from harness.readers.report.nights import kernel_excerpt, with_night_evidence
from harness.readers.report.page import render_html
from harness.readers.report.summary import build_summary, render_markdown

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernellog"
HOSTILE = "[    4.000001] pcieport 0000:00:1d.0: PCIe Bus Error: severity=Fatal <script>x</script>"


def run_folder(tmp_path: Path, name: str, kernel: str | None) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    lines = [{"t": float(t), "unix": 1000.0 + t,
              "figures": {"container": {"cpu_s": 0.5 * t, "memory_bytes": float((t + 1) << 20)}}}
             for t in range(12)]
    (folder / layout.TELEMETRY).write_text("".join(json.dumps(x) + "\n" for x in lines))
    if kernel is not None:
        (folder / layout.KERNEL_LOG).write_text(kernel)
    return folder


def record(folder: Path, n: int, status: str) -> dict:
    run = {"run_id": f"run-{n}", "status": status, "attempt": 1, "control": {"name": f"c{n}"},
           "telemetry": {"sampled": True, "cpu_pct_mean": 50.0, "energy_j": None,
                         "figures": {"container": {"memory_peak_bytes": {"peak": 12 << 20}}}}}
    return {"row": {"id": n, "plan_index": n, "control": f"c{n}", "attempt": 1,
                    "state": status, "run_id": f"run-{n}"},
            "run": run, "metrics": None, "problems": [], "reference": None,
            "path": str(folder), "gate0": None}


def test_the_kernel_faults_are_found_by_the_judges_rules_in_the_kept_log(tmp_path: Path) -> None:
    aer = (FIXTURES / "aer.dmesg").read_text()
    folder = run_folder(tmp_path, "a", aer + HOSTILE + "\n")
    found = kernel_excerpt(str(folder))
    assert [f["rule"] for f in found] == [KERNEL_LOG_AER]
    assert found[0]["count"] >= 2 and "PCIe Bus Error" in found[0]["lines"][0]
    clean = run_folder(tmp_path, "b", (FIXTURES / "clean-host.kmsg").read_text())
    assert kernel_excerpt(str(clean)) == [] and kernel_excerpt(str(tmp_path / "none")) == []
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / layout.KERNEL_LOG).symlink_to(folder / layout.KERNEL_LOG)
    assert kernel_excerpt(str(tmp_path / "c")) == []  # a link in a folder read anywhere


def test_the_page_and_the_markdown_show_telemetry_and_kernel_lines(tmp_path: Path) -> None:
    faulty = run_folder(tmp_path, "a", HOSTILE + "\n")
    quiet = run_folder(tmp_path, "b", None)
    records = with_night_evidence([record(faulty, 0, "refused"), record(quiet, 1, "accepted")])
    summary = json.loads(json.dumps(build_summary({"name": "n1"}, records)))  # as summary.json
    page = render_html(summary)
    assert "<h2>Telemetry per run</h2>" in page and page.count("<figure><svg") >= 2
    assert "row 1, c0 attempt 1" in page and "row 2, c1 attempt 1" in page
    assert "<h2>Kernel log</h2>" in page and "<script>" not in page
    assert "severity=Fatal &lt;script&gt;x&lt;/script&gt;" in page
    assert "peak memory" in page and "12.00 MiB" in page and "50.00 %" in page
    md = render_markdown(summary)
    assert "## Kernel log" in md and f"Row 1, c0 attempt 1: {KERNEL_LOG_AER}, 1 line" in md
    assert "severity=Fatal \\<script\\>x\\</script\\>" in md  # markup escaped, not raw
    assert "<script>" not in md
    aer = (FIXTURES / "aer.dmesg").read_text()
    plain = with_night_evidence([record(run_folder(tmp_path, "c", aer), 2, "refused")])
    assert "\n    pcieport 0000:00:1d.0: PCIe Bus Error: severity=Corrected" in \
        render_markdown(build_summary({"name": "n2"}, plain))  # a plain line: a code block
    assert "| peak memory | mean CPU |" in md.replace("energy | ", "")


def test_a_forged_summary_json_shows_no_plot_and_no_fault(tmp_path: Path) -> None:
    quiet = run_folder(tmp_path, "b", None)
    summary = build_summary({"name": "n1"}, with_night_evidence([record(quiet, 1, "accepted")]))
    summary["runs"][0]["series"] = {"container": {"memory_bytes": [["x", 1]]}}
    summary["runs"][0]["kernel"] = []
    page = render_html(summary)
    assert "Telemetry per run" not in page and "Kernel log" not in page


def test_a_night_of_many_sampled_runs_plots_the_first_and_counts_the_rest(tmp_path: Path,
                                                                          monkeypatch) -> None:
    from harness.readers.report import summary

    monkeypatch.setattr(summary, "MAX_RUN_PLOTS", 2)
    folders = [run_folder(tmp_path, f"r{n}", None) for n in range(3)]
    records = with_night_evidence([record(f, n, "accepted") for n, f in enumerate(folders)])
    built = build_summary({"name": "n1"}, records)
    assert [bool(e["series"]) for e in built["runs"]] == [True, True, False]  # not carried
    html = render_html(built)
    assert html.count("<figcaption>row ") == 2
    assert "and 1 more sampled runs: each keeps its samples in telemetry.jsonl" in html
