"""Nothing a workload prints can cost its run the real verdict (issue 10 item 6), on the real
Docker engine: the run is sealed with its own status, the bad metrics are null with a note,
and `show` / `report` print the workload's markup as text."""

from __future__ import annotations

import json

HOSTILE = """\
command:
  - python3
  - -c
  - |
    print('INFO Available KV cache memory: ' + '9' * 400 + ' GiB')
    print('INFO GPU KV cache size: ' + '7' * 5000 + ' tokens')
    print('INFO Maximum concurrency for ' + '1' * 5000 + ' tokens per request: 1.5x')
    print('[/bold] [red]forged[/red] \\x1b[2J accepted')
    print('INFO Graph capturing finished in 9 secs, took 0.66 GiB')
timeout: 2m
"""


def test_hostile_log_lines_keep_the_real_verdict(project):
    project.control("loud", HOSTILE)
    camp = project.campaign("camp", ["loud"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "accepted" and rec["outcome"]["exit_code"] == 0, rec
    assert not (run / "recovered.json").exists()
    doc = json.loads((run / "metrics.json").read_text())
    m = doc["metrics"]
    assert m["kv_cache_gib"] is None and m["kv_tokens"] is None and m["max_model_len"] is None
    assert m["max_concurrency"] == 1.5  # the sane number on the same line still counts
    assert m["graph_capture_s"] == 9.0 and m["graph_capture_gib"] == 0.66  # the sane line
    noted = {(n["metric"], n["at"]) for n in doc["notes"]}
    assert {("kv_cache_gib", "logs/stdout.log:1"), ("kv_tokens", "logs/stdout.log:2"),
            ("max_model_len", "logs/stdout.log:3")} <= noted
    v = project.harness("verify", str(run))
    assert v.returncode == 0 and "OK" in v.stdout, v.stdout + v.stderr
    s = project.harness("show", str(run))
    assert s.returncode == 0 and "Traceback" not in s.stderr, s.stderr
    assert "accepted" in s.stdout
