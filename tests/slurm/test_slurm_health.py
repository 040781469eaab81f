"""`harness doctor --slurm-health` as the real cluster's HealthCheckProgram (no mock of Slurm).

Each simulated host runs the same wrapper, as a site's would: it names the campaign and the
host's GPU map (here one per node, chosen by $SLURMD_NODENAME, the one variable slurmd
gives its health check). node1's map names its fake render nodes as gres.conf does; node2's
names a device that does not exist, or (second test) node2 reads a gres.conf it cannot
parse (a range end of 5000 digits), which the wrapper names per node like the map. Slurm
runs the program every few seconds: node2 must be drained with the doctor's reason, node1
must stay in service. The cluster is restored (program removed, node2 resumed) whatever
happens, for the tests after this one.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness.measure.slurm.calls import DRAIN_REASON_MAX

from .conftest import REPO, Cluster

HARNESS = str(Path(sys.executable).parent / "harness")
CAMPAIGN = REPO / "campaigns" / "rehearsal-night.yaml"


def node_state(cluster: Cluster, node: str) -> tuple[str, str]:
    r = cluster.cli("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E")
    assert r.returncode == 0, r.stderr
    state, _, reason = r.stdout.strip().partition("|")
    return state, reason


def wrapper(tmp: Path, cluster: Cluster) -> Path:
    docker = os.environ.get("DOCKER_HOST")
    script = tmp / "harness-health"
    script.write_text(f"""#!/bin/sh
# A site's HealthCheckProgram: slurmd runs it with no arguments and SLURMD_NODENAME set.
SLURM_CONF={cluster.conf}
HOME={tmp}/home-$SLURMD_NODENAME
PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
export SLURM_CONF HOME PATH {f'DOCKER_HOST={docker}' if docker else ''}
mkdir -p "$HOME"
cd {REPO}
gres=""
[ -f {tmp}/gres-$SLURMD_NODENAME.conf ] && gres="--gres-conf {tmp}/gres-$SLURMD_NODENAME.conf"
{HARNESS} doctor {CAMPAIGN} --slurm-health --runs-dir {tmp}/runs $gres \\
  --gpu-map {tmp}/gpu-map-$SLURMD_NODENAME.yaml 2>{tmp}/stderr-$SLURMD_NODENAME
code=$?
echo $code > {tmp}/exit-$SLURMD_NODENAME
exit $code
""")
    script.chmod(0o755)
    return script


def drained_reason(cluster: Cluster, tmp_path: Path) -> str:
    """Install the wrapper as the HealthCheckProgram until node2 is drained and both nodes
    ran it; node2's drain reason. node1 must have passed silently and stayed in service."""
    program = wrapper(tmp_path, cluster)
    original = cluster.conf.read_text()
    try:
        cluster.conf.write_text(original + f"HealthCheckProgram={program}\n"
                                "HealthCheckInterval=5\n")
        assert cluster.cli("scontrol", "reconfigure").returncode == 0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            ran = all((tmp_path / f"exit-node{k}").exists() for k in (1, 2))
            if ran and node_state(cluster, "node2")[0].startswith("drain"):
                break
            time.sleep(0.5)
        else:
            logs = {p.name: p.read_text() for p in tmp_path.glob("stderr-*")}
            pytest.fail(f"node2 not drained: {node_state(cluster, 'node2')}; {logs}")
        _, reason = node_state(cluster, "node2")
        assert (tmp_path / "exit-node2").read_text().strip() == "1"
        assert "drained node node2" in (tmp_path / "stderr-node2").read_text()
        assert (tmp_path / "exit-node1").read_text().strip() == "0", \
            (tmp_path / "stderr-node1").read_text()
        assert (tmp_path / "stderr-node1").read_text() == ""  # a fit node says nothing
        # in service (another test's job may still be on it): never drained, no reason
        state, node1_reason = node_state(cluster, "node1")
        assert state in ("idle", "mixed", "allocated", "completing") \
            and node1_reason == "none", (state, node1_reason)
        return reason
    finally:
        cluster.conf.write_text(original)
        cluster.cli("scontrol", "reconfigure")
        cluster.cli("scontrol", "update", "NodeName=node2", "State=RESUME")
        cluster.wait_nodes_up()


def write_maps(tmp_path: Path, dev: Path, node2_second: str) -> None:
    (tmp_path / "gpu-map-node1.yaml").write_text(
        f"gpus:\n  0: {dev}/node1/renderD128\n  1: {dev}/node1/renderD129\n")
    (tmp_path / "gpu-map-node2.yaml").write_text(
        f"gpus:\n  0: {dev}/node2/renderD128\n  1: {dev}/node2/{node2_second}\n")


def said(reason: str, expected: str) -> None:
    """The drain reason is the doctor's line cut at calls.DRAIN_REASON_MAX characters (a
    pytest tmp path under a worker's folder is long): it says `expected` as far as it goes."""
    assert len(reason) >= min(len(expected), DRAIN_REASON_MAX), reason
    assert reason[:len(expected)] == expected[:len(reason)], reason


def test_a_broken_gpu_map_drains_its_node_only(cluster: Cluster, tmp_path) -> None:
    dev = cluster.dir / "dev"
    write_maps(tmp_path, dev, "renderD131")
    reason = drained_reason(cluster, tmp_path)
    said(reason, f"harness doctor: gpu-map: {tmp_path}/gpu-map-node2.yaml: "
                 f"GPU 1: {dev}/node2/renderD131 does not exist")


def test_an_unparseable_gres_conf_drains_its_node_only(cluster: Cluster, tmp_path) -> None:
    dev = cluster.dir / "dev"
    write_maps(tmp_path, dev, "renderD129")  # both maps right: gres.conf is the fault
    (tmp_path / "gres-node2.conf").write_text(
        f"NodeName=node2 Name=gpu File={dev}/node2/renderD[128-{'9' * 5000}]\n")
    reason = drained_reason(cluster, tmp_path)
    said(reason, f"harness doctor: gpu-map-gres: gres.conf at {tmp_path}/"
                 "gres-node2.conf cannot be parsed (line 1: range ")
