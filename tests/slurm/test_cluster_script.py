"""scripts/slurm-cluster.sh: usage errors, idempotent `up`, `down` of nothing."""

from __future__ import annotations

import subprocess
import time

from .conftest import GPUS, NODES, SCRIPT, Cluster


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120)


def test_usage_errors_exit_2(tmp_path) -> None:
    for args in ((), ("up",), ("sideways", str(tmp_path)), ("up", str(tmp_path), "0"),
                 ("up", str(tmp_path), "1", "99"), ("up", str(tmp_path), "x; rm -rf /")):
        r = run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stdout == ""


def test_down_of_a_missing_folder_is_a_no_op(tmp_path) -> None:
    assert run("down", str(tmp_path / "never-up")).returncode == 0


def test_up_again_on_a_running_cluster_only_prints_its_conf(cluster: Cluster) -> None:
    started = time.monotonic()
    r = run("up", str(cluster.dir), str(NODES), str(GPUS))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"export SLURM_CONF={cluster.conf}\n"
    assert time.monotonic() - started < 30  # a bring-up takes minutes; this only looks
    nodes = cluster.cli("sinfo", "-h", "-N", "-o", "%N %T").stdout.split("\n")
    assert sorted(n for n in nodes if n) == ["node1 idle", "node2 idle"]
