"""The run's checks are pure `(facts) -> (value, reasons)`: each judged here on facts
written down, with no engine, no folder and no environment behind them."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.base.catalogue import (
    ENV_DEVICE,
    ENV_GPU_MAP,
    ENV_LOCK_NETWORK_FS,
    ENV_MISSING_IMAGE,
    ENV_MODEL_DIR,
    ENV_NO_ENGINE,
    IMAGE_ID_MISMATCH,
    IMAGE_NOT_PINNED,
    MODEL_HASH,
    MODEL_MISSING,
    MODEL_PATH_CHANGED,
    MODEL_UNPINNED,
)
from harness.config.mountable import MountSource
from harness.config.schema import LockedImage, Model
from harness.pipeline.launch import model_moved
from harness.pipeline.preflight import (
    device_check,
    image_check,
    lock_fs_check,
    model_check,
    model_comparison,
    nodes_check,
)

ID = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
PINNED = LockedImage(id=ID, ref="rehearsal:local")
DIGEST = "sha256:" + "01" * 32


def _rules(reasons) -> list[str]:
    return [r.rule for r in reasons]


def test_the_pinned_image_present_under_its_id_is_used():
    assert image_check("img", PINNED, {"Id": ID}, None) == (ID, [])


@pytest.mark.parametrize(("pinned", "by_id", "by_ref", "error", "rule"), [
    (None, None, None, None, IMAGE_NOT_PINNED),
    (PINNED, None, None, "the engine does not answer", ENV_NO_ENGINE),
    (PINNED, None, {"Id": OTHER}, None, IMAGE_ID_MISMATCH),
    (PINNED, {"Id": OTHER}, None, None, ENV_MISSING_IMAGE),
    (PINNED, None, None, None, ENV_MISSING_IMAGE),
])
def test_an_image_that_is_not_the_pinned_one_names_why(pinned, by_id, by_ref, error, rule):
    image_id, reasons = image_check("img", pinned, by_id, by_ref, error)
    assert image_id is None and _rules(reasons) == [rule]


def test_a_mismatch_names_both_ids():
    [r] = image_check("img", PINNED, None, {"Id": OTHER})[1]
    assert r.detail == f"img: local rehearsal:local is {OTHER}, images.lock pins {ID}"


def test_a_model_must_be_pinned_and_its_folder_there():
    pinned = Model(source="m", sha256={"w.bin": "01" * 32})
    assert model_check(None, None, False) == []
    assert _rules(model_check(Model(source="m"), Path("/m"), True)) == [MODEL_UNPINNED]
    assert _rules(model_check(pinned, Path("/m"), False)) == [ENV_MODEL_DIR]
    assert model_check(pinned, Path("/m"), True) == []


def test_each_missing_or_different_model_file_is_named():
    pinned = {"a": DIGEST, "b": "01" * 32, "c": "02" * 32}  # with or without the prefix
    got = {"a": DIGEST, "b": DIGEST}
    reasons = model_comparison(Path("/m"), pinned, ["c"], got)
    assert [(r.rule, r.detail) for r in reasons] == [(MODEL_MISSING, "/m/c does not exist")]
    [r] = model_comparison(Path("/m"), {"a": "02" * 32}, [], {"a": DIGEST})
    assert (r.rule, r.detail) == (MODEL_HASH, f"a: {DIGEST} but pinned sha256:{'02' * 32}")


def test_absent_device_paths_refuse_with_the_profile_named():
    assert device_check("cpu", []) == []
    [r] = device_check("rocm", ["/dev/kfd"])
    assert (r.rule, r.detail) == (ENV_DEVICE, "the rocm profile needs /dev/kfd, which is absent")


def test_the_gpu_map_gives_the_nodes_or_refuses():
    assert nodes_check(("/dev/dri/renderD128",), None) == (("/dev/dri/renderD128",), [])
    nodes, reasons = nodes_check((), "no GPU map")
    assert nodes is None and _rules(reasons) == [ENV_GPU_MAP]


def test_a_lock_on_a_network_fs_warns_or_refuses():
    assert lock_fs_check(None) == (None, [])
    assert lock_fs_check(("warn", "nfs")) == ("nfs", [])
    warning, reasons = lock_fs_check(("fail", "nfs in a job"))
    assert warning is None and _rules(reasons) == [ENV_LOCK_NETWORK_FS]


def test_a_model_folder_that_leads_elsewhere_than_when_hashed_is_refused():
    now = MountSource("model", Path("/p/m"), Path("/p/b"), "dir", True)
    assert model_moved(now, Path("/p/b")) == []
    assert model_moved(now, None) == [] and model_moved(None, Path("/p/a")) == []
    [r] = model_moved(now, Path("/p/a"))
    assert (r.rule, r.detail) == (MODEL_PATH_CHANGED, "model: /p/m resolved to /p/a when it "
                                  "was hashed and to /p/b at launch")
