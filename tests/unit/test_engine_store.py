"""One answer to "which image store?": images.lock pins, the doctor and host snapshots agree.

The store decides what an image Id means (manifest digest on containerd, config digest on a
graph driver), so two answers for one daemon made the doctor report a store mismatch that
was not there. The Docker test uses the real local engine (never mocked).
"""

from __future__ import annotations

import io
import tarfile
import uuid

import docker
import pytest

from harness.judge.doctor.checks import judge_images
from harness.measure import images, imagestore
from harness.measure.host import identity
from harness.probe.doctor.allchecks import run_checks

ID_A = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("recorded", "kind"),
    [
        (None, None),
        ("", None),
        ("overlay2", "graph-driver"),  # pins made before there was one answer
        ("fuse-overlayfs", "graph-driver"),
        ("graph-driver", "graph-driver"),
        ("containerd", "containerd"),
    ],
)
def test_a_recorded_store_reads_in_the_one_vocabulary(recorded, kind):
    assert imagestore.store_kind(recorded) == kind


def test_an_old_driver_name_pin_is_not_reported_as_another_store():
    [line] = judge_images({"x": {"id": ID_A, "store": "overlay2"}}, {"x": None}, {}, "graph-driver")
    assert line.status == "fail" and "locked on a" not in line.detail


def test_an_old_driver_name_pin_on_a_containerd_daemon_says_why_the_id_differs():
    [line] = judge_images({"x": {"id": ID_A, "store": "overlay2"}}, {"x": None}, {}, "containerd")
    assert "locked on a graph-driver daemon, this one uses containerd" in line.detail


@pytest.fixture(scope="module")
def tiny_image():
    """A FROM-scratch image built locally (no registry); removed afterwards by its Id."""
    client = docker.from_env(timeout=60)
    ctx = io.BytesIO()
    with tarfile.open(fileobj=ctx, mode="w") as tar:
        for name, data in (
            ("Dockerfile", b"FROM scratch\nCOPY marker /marker\n"),
            ("marker", f"harness store test {uuid.uuid4()}\n".encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    ctx.seek(0)
    image, _ = client.images.build(fileobj=ctx, custom_context=True, rm=True, pull=False)
    yield image.id
    client.images.remove(image.id, force=True)


@pytest.mark.docker
def test_pin_doctor_and_host_snapshot_name_the_same_store(tmp_path, tiny_image):
    decision = images.pin(tmp_path / "images.lock", "tiny", tiny_image)
    store = decision.entry.store
    assert store in ("containerd", "graph-driver")
    assert identity.docker_engine()["image_store"] == store
    checks = {
        c.name: c
        for c in run_checks(
            lock_path=tmp_path / "l",
            runs_dir=tmp_path,
            images={"tiny": {"id": tiny_image, "store": store}},
            profile="cpu",
        )
    }
    assert f"{store} image store" in checks["engine"].detail
    assert checks["image tiny"].status == "ok", checks["image tiny"].detail
