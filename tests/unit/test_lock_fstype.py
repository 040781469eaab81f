"""A GPU lock on a network file system (issue 13 item 7): found from the mount table,
refused under Slurm, a warning on one host, and reported by the doctor."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.judge.doctor.checks import judge_lock_fs
from harness.measure.host import fstype

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /home rw,relatime shared:20 - nfs4 fs1:/export/home rw,vers=4.2
41 40 8:2 / /home/alice/local rw,relatime shared:21 - xfs /dev/sdb1 rw
42 22 0:36 / /mnt/my\\040share rw - cifs //srv/share rw
43 22 0:37 / /scratch rw - lustre 10.0.0.1@o2ib:/fs rw
44 22 0:38 / /sshfs rw - fuse.sshfs me@h:/ rw
45 22 0:39 / /tmp rw - tmpfs tmpfs rw
46 22 0:40 / /home2 rw - ext4 /dev/sdc rw
bad line without a separator
47 22 0:41 / /home2 rw - nfs srv:/h2 rw
"""


@pytest.mark.parametrize(("path", "want"), [
    ("/home/alice/gpu.lock", "nfs4"),
    ("/home", "nfs4"),
    ("/home/alice/local/gpu.lock", "xfs"),  # a local disk mounted below an NFS home
    ("/homework/gpu.lock", "ext4"),  # a prefix of the text, not of the path
    ("/mnt/my share/gpu.lock", "cifs"),  # octal escapes in mount points
    ("/scratch/x", "lustre"),
    ("/sshfs/gpu.lock", "fuse.sshfs"),
    ("/tmp/gpu.lock", "tmpfs"),
    ("/home2/gpu.lock", "nfs"),  # stacked on the same point: the last mount wins
    ("/var/lib/harness/gpu.lock", "ext4"),
])
def test_the_mount_holding_a_path_is_the_longest_above_it(path: str, want: str) -> None:
    assert fstype.fs_type_of(MOUNTINFO, path) == want


def test_no_readable_mount_means_unknown() -> None:
    assert fstype.fs_type_of("", "/x") is None
    assert fstype.fs_type_of("garbage\n1 2 3\n", "/x") is None


@pytest.mark.parametrize("name", ["nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs",
                                  "fuse.sshfs", "ceph", "NFS4"])
def test_network_file_systems(name: str) -> None:
    assert fstype.is_network(name)


@pytest.mark.parametrize("name", ["ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", None])
def test_local_file_systems(name: str | None) -> None:
    assert not fstype.is_network(name)


def test_refused_under_slurm_warned_on_one_host_silent_on_local_disk() -> None:
    assert fstype.lock_fs_problem("/home/a/gpu.lock", "ext4", True) is None
    kind, message = fstype.lock_fs_problem("/home/a/gpu.lock", "nfs4", True)
    assert kind == "fail" and "/home/a/gpu.lock" in message and "nfs4" in message
    assert "local disk" in message
    assert fstype.lock_fs_problem("/home/a/gpu.lock", "nfs4", False)[0] == "warn"
    assert judge_lock_fs("/home/a/gpu.lock", "nfs4", True).status == "fail"
    assert judge_lock_fs("/home/a/gpu.lock", "nfs4", False).status == "warn"
    assert judge_lock_fs("/home/a/gpu.lock", "ext4", True).status == "ok"


def test_under_slurm_from_the_environment() -> None:
    assert fstype.under_slurm({"SLURM_JOB_ID": "12"})
    assert fstype.under_slurm({"SLURM_CONF": "/etc/slurm/slurm.conf"})
    assert not fstype.under_slurm({"SLURM_JOB_ID": "", "HOME": "/root"})


def test_this_machines_lock_folder_has_a_type(tmp_path: Path) -> None:
    """The shell reads the real mount table, for a lock file that does not exist yet."""
    assert fstype.fs_type(tmp_path / "not" / "yet" / "gpu.lock") is not None
