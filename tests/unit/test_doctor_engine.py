"""The engine and image checks against the real local Docker engine (never mocked).

The engine is always present on these machines: if it is not, these tests fail, they do not skip.
"""

from __future__ import annotations

import io
import tarfile

import docker
import pytest

from harness.probe.doctor.allchecks import run_checks

pytestmark = pytest.mark.docker


def by_name(checks):
    return {c.name: c for c in checks}


@pytest.fixture(scope="module")
def tiny_image():
    """A FROM-scratch image built locally (no registry); removed afterwards by its Id."""
    client = docker.from_env(timeout=60)
    ctx = io.BytesIO()
    with tarfile.open(fileobj=ctx, mode="w") as tar:
        for name, data in (
            ("Dockerfile", b"FROM scratch\nCOPY marker /marker\n"),
            ("marker", b"harness doctor test\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    ctx.seek(0)
    image, _ = client.images.build(fileobj=ctx, custom_context=True, rm=True, pull=False)
    yield image.id
    client.images.remove(image.id, force=True)


def test_engine_line_from_the_real_engine(tmp_path):
    checks = by_name(
        run_checks(lock_path=tmp_path / "l", runs_dir=tmp_path, images=None, profile="cpu")
    )
    engine = checks["engine"]
    assert engine.status == "ok", engine.detail
    api = docker.from_env().version()["ApiVersion"]
    assert f"(API {api})" in engine.detail
    assert "image store" in engine.detail


def test_locked_image_present_by_id_and_a_missing_one(tmp_path, tiny_image):
    images = {"tiny": {"id": tiny_image}, "ghost": {"id": "sha256:" + "0" * 64, "ref": None}}
    checks = by_name(
        run_checks(lock_path=tmp_path / "l", runs_dir=tmp_path, images=images, profile="cpu")
    )
    assert checks["image tiny"].status == "ok", checks["image tiny"].detail
    assert checks["image ghost"].status == "fail"
    assert "not present locally" in checks["image ghost"].detail


def test_unreachable_engine_is_a_fail_line_not_an_exception(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    checks = by_name(
        run_checks(
            lock_path=tmp_path / "l",
            runs_dir=tmp_path,
            images={"x": {"id": "sha256:" + "1" * 64}},
            profile="cpu",
        )
    )
    assert checks["engine"].status == "fail"
    assert checks["images"].status == "fail" and "engine unreachable" in checks["images"].detail
