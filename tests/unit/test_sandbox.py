"""The sandbox, without Docker: no value changes a docker argument's meaning, mount sources
are judged where they lead at launch, engine secrets never in clear, orphans judged."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.base import tree
from harness.base.errors import InvalidInput
from harness.config import mountable
from harness.config.loader import check, load_campaign
from harness.config.mountable import MountSource, plain_path_problem, system_paths
from harness.config.schema import Control
from harness.instrument.harness_observer.driver import engine_args
from harness.measure import vector
from harness.measure.ui import Reporter
from harness.measure.vector import (
    BindMount,
    VectorInput,
    build,
    mount_arg,
    split_engine_secrets,
)
from harness.pipeline import launch, orphans, sanitize
from harness.pipeline.context import RunContext
from harness.pipeline.results import Preflight

IMAGE = "sha256:" + "ab" * 32
# Each of these, in a path, could change what docker reads in `--mount`, or hide a path.
HOSTILE = [",source=/etc", "=x", '"', "'", " ", "\t", "\n", "\r", "\x00", "\x1b", "\u2028",
           "\u00a0", "\\"]
NOT_PLAIN = ["//m", "/m/", "/m/./x", "/m/../x", "/m/..", "m", "./m", ""]


def control(**kw) -> Control:
    base = {"name": "c1", "image": "img", "device": "cpu", "command": ["true"]}
    return Control.model_validate({**base, **kw})


def vinput(ctl: Control, **kw) -> VectorInput:
    base = dict(control=ctl, image_id=IMAGE, run_id="c1-r", campaign="camp",
                lock_path=Path("/locks/gpu.lock"), cidfile=Path("/runs/r/container.cid"),
                observations_dir=Path("/runs/r/observations"),
                instrument_dir=Path("/src/harness/instrument"))
    return VectorInput(**{**base, **kw})


# ---- item 1: the mount argument ----------------------------------------------------------

@pytest.mark.parametrize("bad", HOSTILE)
def test_a_target_with_any_special_character_is_refused_by_the_schema(bad):
    with pytest.raises(ValidationError):
        control(mounts=[{"source": "d", "target": f"/m{bad}"}])
    with pytest.raises(ValidationError):
        control(model={"source": "d", "target": f"/m{bad}"})
    with pytest.raises(ValidationError):
        control(mounts=[{"source": f"d{bad}", "target": "/m"}])
    with pytest.raises(ValidationError):
        control(model={"source": f"d{bad}", "target": "/m"})


@pytest.mark.parametrize("bad", [*NOT_PLAIN, "/", "/harness/out", "/harness/out/x",
                                 "/opt/harness-instrument"])
def test_a_target_must_be_a_plain_normalised_absolute_path(bad):
    with pytest.raises(ValidationError):
        control(mounts=[{"source": "d", "target": bad}])


def test_the_issue_control_fails_check_with_its_position(tmp_path):
    (tmp_path / "controls").mkdir()
    p = tmp_path / "controls/c1.yaml"
    p.write_text(textwrap.dedent("""\
        name: c1
        image: img
        device: cpu
        command: [x]
        mounts:
          - source: data
            target: "/m,source=/some/host/dir"
            read_only: false
        """))
    [fault] = [str(f) for f in check([p])[0]]
    assert fault.startswith(f"{p}:7:13: mounts.0.target: must not contain ','"), fault


def test_a_source_that_resolves_to_a_comma_fails_check(tmp_path, monkeypatch):
    for d in ("controls", "campaigns"):
        (tmp_path / d).mkdir()
    (tmp_path / "images.lock").write_text(f"images:\n  img:\n    id: {IMAGE}\n")
    (tmp_path / "campaigns/camp.yaml").write_text("name: camp\nrow: R\ncontrols: [c1]\n")
    (tmp_path / "controls/c1.yaml").write_text(
        "name: c1\nimage: img\ndevice: cpu\ncommand: [x]\n"
        "mounts:\n  - {source: $EVIL/d, target: /m}\n")
    monkeypatch.setenv("EVIL", f"{tmp_path}/a,source=/etc")
    out = [str(f) for f in check([tmp_path / "campaigns/camp.yaml"])[0]]
    assert len(out) == 1 and "mounts.0.source: resolves to" in out[0], out
    assert ":6:" in out[0]


@pytest.mark.parametrize("bad", [f"/x{h}" for h in HOSTILE] + NOT_PLAIN)
@pytest.mark.parametrize("role", ["model", "instrument", "observations", "control"])
def test_every_mount_the_vector_emits_refuses_an_unsafe_source(bad, role):
    with pytest.raises(InvalidInput) as e:
        mount_arg(BindMount(role, bad, "/t", True))
    assert e.value.rule == "MOUNT-UNSAFE-PATH"


def test_a_runs_dir_with_a_comma_never_reaches_docker():
    with pytest.raises(InvalidInput, match="observations mount"):
        build(vinput(control(), observations_dir=Path("/runs,source=/etc/r/observations")))
    with pytest.raises(InvalidInput, match="instrument mount"):
        build(vinput(control(instrument=True), instrument_dir=Path("/a b/instrument")))
    ctl = control(mounts=[{"source": "d", "target": "/m"}],
                  model={"source": "m", "target": "/mm"})
    with pytest.raises(InvalidInput, match="control mount"):
        build(vinput(ctl, mount_sources=(Path("/h/d,source=/"),), model_source=Path("/h/m")))
    with pytest.raises(InvalidInput, match="model mount"):
        build(vinput(ctl, mount_sources=(Path("/h/d"),), model_source=Path("/h/m=x")))


def test_a_safe_mount_has_exactly_its_fields():
    arg = mount_arg(BindMount("control", "/h/dé-1.2_x@y:z", "/m", False))
    assert arg.split(",") == ["type=bind", "source=/h/dé-1.2_x@y:z", "target=/m"]


def test_no_other_value_can_change_an_argument():
    """Every other control value is one whole argv element, after its flag."""
    ctl = control(env={"A": "1,source=/etc --privileged\nB=2"}, workdir="/w",
                  entrypoint="--privileged", user="1000:1000",
                  command=["--privileged", "-v", "/:/host"])
    argv = build(vinput(ctl)).argv
    assert argv[argv.index("--entrypoint") + 1] == "--privileged"
    assert "A=1,source=/etc --privileged\nB=2" in argv
    flags = argv[:argv.index(IMAGE)]
    assert [i for i, a in enumerate(flags) if a == "--privileged"] == [
        flags.index("--entrypoint") + 1]
    assert argv[argv.index(IMAGE) + 1:] == ["--privileged", "-v", "/:/host"]
    for bad in ("/w,x", "/w x", "w"):
        with pytest.raises(ValidationError):
            control(workdir=bad)
    for bad in ("root --privileged", "0:0,x", "a\n"):
        with pytest.raises(ValidationError):
            control(user=bad)


@pytest.mark.parametrize("good", ["/", "/a", "/a/b.c", "/home/jörg/m-1"])
def test_plain_paths(good):
    assert plain_path_problem(good) is None


# ---- item 2: sources judged at launch, where they lead ------------------------------------

def _project(tmp_path: Path, mount: str, read_only: bool = True, model: str | None = None):
    root = tmp_path / "proj"
    for d in ("controls", "campaigns", "data"):
        (root / d).mkdir(parents=True)
    (root / "images.lock").write_text(f"images:\n  img:\n    id: {IMAGE}\n")
    (root / "campaigns/camp.yaml").write_text("name: camp\nrow: R\ncontrols: [c1]\n")
    body = (f"name: c1\nimage: img\ndevice: cpu\ncommand: [x]\n"
            f"mounts:\n  - {{source: {mount}, target: /m, read_only: {str(read_only).lower()}}}\n")
    if model:
        body += f"model: {{source: {model}, sha256: {{w: {'ab' * 32}}}}}\n"
    (root / "controls/c1.yaml").write_text(body)
    return root


def _ctx(root: Path) -> RunContext:
    loaded, faults = load_campaign(root / "campaigns/camp.yaml")
    assert loaded is not None, faults
    ctl, path = loaded.controls["c1"]
    run_dir = root / "runs" / "r1"
    run_dir.mkdir(parents=True)
    return RunContext(loaded, ctl, path, "r1", run_dir, Reporter(io.StringIO()))


def test_a_symlink_planted_after_check_is_refused_at_launch(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = _project(tmp_path, "../data/later")
    (root / "data/later").mkdir()
    ctx = _ctx(root)  # checks clean: data/later is a folder inside the project
    (root / "data/later").rmdir()
    (root / "data/later").symlink_to(outside)  # what a previous rw control can do
    _, _, reasons = launch.resolve_sources(ctx)
    assert [r.rule for r in reasons] == ["MOUNT-OUTSIDE-ROOTS"]
    assert str(outside) in reasons[0].detail and "data/later" in reasons[0].detail


def test_an_ancestor_swapped_for_a_symlink_is_refused_too(tmp_path):
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    root = _project(tmp_path, "../data/a/x")
    (root / "data/a/x").mkdir(parents=True)
    ctx = _ctx(root)
    os.rename(root / "data/a", root / "data/a-old")
    (root / "data/a").symlink_to(outside)
    assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["MOUNT-OUTSIDE-ROOTS"]


def test_the_resolved_path_is_what_docker_gets(tmp_path):
    root = _project(tmp_path, "../data/link")
    (root / "data/real").mkdir()
    (root / "data/link").symlink_to(root / "data/real")
    ctx = _ctx(root)
    mounts, _, reasons = launch.resolve_sources(ctx)
    assert reasons == []
    ctx.took("preflight", Preflight(image_id=IMAGE))
    vec = launch.build_vector(ctx, mounts, None)
    [m] = [m for m in vec.evidence()["mounts"] if m["role"] == "control"]
    assert m["declared"] == str(root / "data/link") and m["source"] == str(root / "data/real")
    assert f"type=bind,source={root / 'data/real'},target=/m,readonly" in vec.argv


@pytest.mark.parametrize("where", ["runs", "runs/r0", ".", "locks"])
def test_a_read_write_mount_over_evidence_or_the_lock_is_refused(tmp_path, where):
    root = _project(tmp_path, f"../{where}", read_only=False)
    (root / "runs/r0").mkdir(parents=True)
    (root / "locks").mkdir()
    (root / "campaigns/camp.yaml").write_text(
        f"name: camp\nrow: R\nlock: {root}/locks/gpu.lock\ncontrols: [c1]\n")
    ctx = _ctx(root)
    assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["MOUNT-OVER-HARNESS"]


@pytest.mark.parametrize("name", mountable.PROJECT_CODE)
def test_a_read_write_mount_over_the_projects_code_is_refused(tmp_path, name):
    """What the operator runs next (`make image`, scripts, tests, other campaigns, sealed
    runs of other nights in gpu-runs/): the place itself, anything inside it."""
    root = _project(tmp_path, f"../{name}", read_only=False)
    place = root / name
    if name in ("Makefile", "pyproject.toml"):
        place.write_text("x\n")
    else:
        (place / "sub").mkdir(parents=True, exist_ok=True)
    ctx = _ctx(root)
    [r] = launch.resolve_sources(ctx)[2]
    assert r.rule == "MOUNT-OVER-HARNESS" and name in r.detail, r
    if place.is_dir():
        (root / "controls/c1.yaml").write_text(
            (root / "controls/c1.yaml").read_text().replace(f"../{name}", f"../{name}/sub"))
        ctx = dataclasses.replace(ctx, control=load_campaign(  # the mount one level down
            root / "campaigns/camp.yaml")[0].controls["c1"][0])
        assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["MOUNT-OVER-HARNESS"]
        assert launch.trusted_paths(ctx).count(place) == 1


@pytest.mark.parametrize("where", ["scratch", "data", "data/deep"])
def test_other_folders_under_the_roots_may_still_be_read_write(tmp_path, where):
    root = _project(tmp_path, f"../{where}", read_only=False)
    for name in ("images", "scripts", "gpu-runs", "docs"):
        (root / name).mkdir()
    (root / where).mkdir(parents=True, exist_ok=True)
    assert launch.resolve_sources(_ctx(root))[2] == []


def test_every_file_git_tracks_is_protected(tmp_path):
    root = _project(tmp_path, "../notes", read_only=False)
    (root / "notes").mkdir()
    (root / "notes/tracked.txt").write_text("x\n")
    (root / "scratch").mkdir()
    (root / "scratch/untracked.txt").write_text("x\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (["init", "-q"], ["add", "notes/tracked.txt"]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, env=env)
    ctx = _ctx(root)
    assert root / "notes/tracked.txt" in launch.trusted_paths(ctx)
    [r] = launch.resolve_sources(ctx)[2]
    assert r.rule == "MOUNT-OVER-HARNESS" and "notes/tracked.txt" in r.detail
    assert mountable.git_files(root) == [root / "notes/tracked.txt"]


def test_a_git_that_fails_protects_the_fixed_places_still(tmp_path):
    root = _project(tmp_path, "../scratch", read_only=False)
    (root / "scratch").mkdir()
    (root / ".git").write_text("gitdir: /nowhere\n")  # git exits non-zero
    assert mountable.git_files(root) == []
    ctx = _ctx(root)
    assert launch.resolve_sources(ctx)[2] == []
    assert root / ".git" in launch.trusted_paths(ctx)


def test_missing_and_special_sources_are_named(tmp_path):
    root = _project(tmp_path, "../data/gone")
    (root / "data/gone").mkdir()
    ctx = _ctx(root)
    (root / "data/gone").rmdir()
    assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["ENV-MOUNT-SOURCE"]
    os.mkfifo(root / "data/gone")
    assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["MOUNT-SOURCE-KIND"]


def test_a_model_folder_swapped_after_hashing_is_refused(tmp_path):
    root = _project(tmp_path, "../data", model="../models/m")
    (root / "models/a").mkdir(parents=True)
    (root / "models/b").mkdir()
    (root / "models/m").symlink_to(root / "models/a")
    ctx = _ctx(root)
    # as preflight hashed it
    ctx.took("preflight", Preflight(model_real=Path(os.path.realpath(ctx.model_declared))))
    assert ctx.model_source == root / "models/a"
    assert launch.resolve_sources(ctx)[2] == []
    (root / "models/m").unlink()
    (root / "models/m").symlink_to(root / "models/b")
    assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["MODEL-PATH-CHANGED"]


# ---- item 3: engine secrets ---------------------------------------------------------------

def test_secret_engine_values_go_by_reference_at_any_depth():
    engine = {"hf_token": "s3cr3t", "dtype": "bf16",
              "nested": {"api_key": {"a": 1}, "list": [{"password": 7}, {"ok": "x"}]}}
    shown, secrets = split_engine_secrets(engine)
    text = json.dumps(shown)
    assert "s3cr3t" not in text and '"a": 1' not in text and "7" not in text.replace(
        "HARNESS_ENGINE_SECRET_", "")
    assert shown["dtype"] == "bf16" and shown["nested"]["list"][1] == {"ok": "x"}
    got = engine_args(json.dumps(shown), dict(secrets))
    assert {k: v for k, v in got.items() if k != "worker_extension_cls"} == engine


def test_engine_secrets_are_passed_by_name_and_redacted_in_evidence():
    vec = build(vinput(control(engine={"hf_token": "s3cr3t-value", "dtype": "bf16"})))
    assert not any("s3cr3t-value" in a for a in vec.argv)
    assert "s3cr3t-value" not in json.dumps(vec.evidence())
    [name] = [k for k in vec.passed_env if k.startswith("HARNESS_ENGINE_SECRET_")]
    assert name in vec.argv and json.loads(vec.passed_env[name]) == "s3cr3t-value"
    args = next(a for a in vec.argv if a.startswith("HARNESS_ENGINE_ARGS="))
    assert json.loads(args.partition("=")[2])["dtype"] == "bf16"


@pytest.mark.parametrize("ref", ["PATH", 3, "HARNESS_ENGINE_SECRET_9"])
def test_the_driver_resolves_only_harness_references_that_exist(ref):
    with pytest.raises(ValueError):
        engine_args(json.dumps({"x": {"$harness_secret_env": ref}}), {"PATH": '"/bin"'})


# ---- orphans ------------------------------------------------------------------------------

def _c(state: str, **labels) -> dict:
    base = {vector.LAUNCHER_HOST: "h", vector.LAUNCHER_PID: "42",
            vector.LAUNCHER_STARTED: "100.0"}
    return {"Id": "x", "State": state, "Labels": {**base, **labels}}


@pytest.mark.parametrize("state", ["exited", "created", "dead"])
def test_an_exited_container_of_a_dead_launcher_is_reapable(state):
    assert orphans.reapable(_c(state), "h", lambda pid, t: False)


@pytest.mark.parametrize("container,alive", [
    (_c("running"), False), (_c("paused"), False), (_c("restarting"), False),
    (_c("exited"), True),  # its harness still reads its exit state
    (_c("exited", **{vector.LAUNCHER_HOST: "other"}), False),  # never judge another host's
    ({"Id": "x", "State": "exited", "Labels": {}}, False),  # unknown launcher
    (_c("exited", **{vector.LAUNCHER_PID: "x"}), False),
])
def test_other_containers_are_never_reaped(container, alive):
    assert not orphans.reapable(container, "h", lambda pid, t: alive)


def test_launcher_identity_matches_this_process():
    me = orphans.launcher_identity()
    assert orphans.launcher_alive(int(me["pid"]), float(me["started"]))
    assert not orphans.launcher_alive(int(me["pid"]), float(me["started"]) - 5)
    labels = build(vinput(control(), launcher=me)).argv
    assert f"org.harness.launcher-pid={me['pid']}" in labels


# ---- red team: the campaign's inputs, system paths, roots fixed at load, one lock ---------

@pytest.mark.parametrize("where", ["campaigns", "campaigns/camp.yaml", "controls",
                                   "controls/c1.yaml", "controls/sub", "images.lock", ".git",
                                   ".git/hooks"])
def test_a_read_write_mount_over_any_input_of_the_next_run_is_refused(tmp_path, where):
    """A workload that could rewrite its campaign or a control (`mount_roots: [/]`, a new
    control mounting the Docker socket, a host-side post-step) owns the next run."""
    root = _project(tmp_path, f"../{where}", read_only=False)
    (root / "controls/sub").mkdir()
    (root / ".git/hooks").mkdir(parents=True)
    ctx = _ctx(root)
    assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["MOUNT-OVER-HARNESS"]


def test_inputs_reached_through_symlinks_are_protected_where_they_lead(tmp_path):
    root = _project(tmp_path, "../data", read_only=False)
    shared = tmp_path / "proj/data"  # inside the roots, read-write mounted by c1
    (shared / "c1.yaml").write_text((root / "controls/c1.yaml").read_text())
    (root / "controls/c1.yaml").unlink()
    (root / "controls/c1.yaml").symlink_to(shared / "c1.yaml")
    ctx = _ctx(root)
    assert [r.rule for r in launch.resolve_sources(ctx)[2]] == ["MOUNT-OVER-HARNESS"]


SYSTEM = system_paths({})


@pytest.mark.parametrize("real", ["/", "/run", "/run/docker.sock", "/var", "/var/run",
                                  "/etc", "/etc/shadow", "/proc/1", "/sys", "/dev/shm",
                                  "/boot/x"])
@pytest.mark.parametrize("read_only", [True, False])
def test_any_mount_of_a_system_path_is_refused_even_read_only(real, read_only):
    src = MountSource("mounts[0]", Path(real), Path(real), "dir", read_only)
    reasons = mountable.judge(src, [Path("/")], [], SYSTEM)
    assert [r.rule for r in reasons] == ["MOUNT-SYSTEM-PATH"]


def test_the_docker_host_socket_and_its_folder_are_system_paths(tmp_path):
    sock = tmp_path / "d/docker.sock"
    system = system_paths({"DOCKER_HOST": f"unix://{sock}"})
    for real, refused in [(tmp_path, True), (tmp_path / "d", True), (sock, True),
                          (tmp_path / "d/x", True), (tmp_path / "other", False)]:
        src = MountSource("m", real, real, "dir", True)
        rules = [r.rule for r in mountable.judge(src, [Path("/")], [], system)]
        assert rules == (["MOUNT-SYSTEM-PATH"] if refused else []), real


def test_a_control_mounting_a_system_path_fails_check(tmp_path):
    root = _project(tmp_path, "/run")
    (root / "campaigns/camp.yaml").write_text(
        "name: camp\nrow: R\nmount_roots: [/run]\ncontrols: [c1]\n")
    faults = check([root / "campaigns/camp.yaml"])[0]
    assert [f"{f.line}" for f in faults if "MOUNT-SYSTEM-PATH" in f.message] == ["6"], faults


def test_root_as_a_mount_root_fails_check_at_its_position(tmp_path):
    root = _project(tmp_path, "../data")
    camp = root / "campaigns/camp.yaml"
    camp.write_text("name: camp\nrow: R\nmount_roots:\n  - /tmp\n  - /\ncontrols: [c1]\n")
    [fault] = check([camp])[0]
    assert (fault.line, "'/'" in fault.message) == (5, True), fault
    (tmp_path / "slash").symlink_to("/")
    camp.write_text(f"name: camp\nrow: R\nmount_roots: [{tmp_path}/slash]\n"
                    "controls: [c1]\n")
    [fault] = check([camp])[0]
    assert fault.line == 3 and "resolves to '/'" in fault.message, fault


def test_mount_roots_are_fixed_when_the_campaign_is_loaded(tmp_path):
    """The red team's repro: roots [scratch, scratch/models]; a control with `../scratch`
    read-write swaps `models` for a link to `/`; the next control mounts models/etc."""
    root = _project(tmp_path, "../scratch/models/etc")
    (root / "scratch/models/etc").mkdir(parents=True)
    (root / "campaigns/camp.yaml").write_text(
        f"name: camp\nrow: R\nmount_roots: [{root}/scratch, {root}/scratch/models]\n"
        "controls: [c1]\n")
    ctx = _ctx(root)
    before = ctx.loaded.mount_roots()
    assert before == [root / "scratch", root / "scratch/models"]
    os.rename(root / "scratch/models", root / "scratch/old")
    (root / "scratch/models").symlink_to("/")
    assert ctx.loaded.mount_roots() == before
    reasons = launch.resolve_sources(ctx)[2]
    assert [r.rule for r in reasons] == ["MOUNT-OUTSIDE-ROOTS"] and "/etc" in reasons[0].detail


def test_one_lock_has_one_spelling_and_its_file_is_never_followed(tmp_path):
    root = _project(tmp_path, "../data")
    (root / "locks").mkdir()
    (tmp_path / "via").symlink_to(root / "locks")
    camp = root / "campaigns/camp.yaml"
    paths = []
    for folder in (root / "locks", tmp_path / "via", tmp_path / "via/../proj/locks"):
        camp.write_text(f"name: camp\nrow: R\nlock: {folder}/gpu.lock\ncontrols: [c1]\n")
        loaded, faults = load_campaign(camp)
        assert loaded is not None, faults
        paths.append(loaded.lock_path)
    assert paths == [root / "locks/gpu.lock"] * 3
    (root / "victim").write_text("precious\n")
    (root / "locks/gpu.lock").symlink_to(root / "victim")  # planted by a group member
    camp.write_text(f"name: camp\nrow: R\nlock: {tmp_path}/via/gpu.lock\ncontrols: [c1]\n")
    loaded, _ = load_campaign(camp)
    assert loaded is not None and loaded.lock_path == root / "locks/gpu.lock"


# ---- item 5: what a root workload plants in a read-write mount ----------------------------

def _entry(rel: str, kind: str, mode: int) -> tree.Entry:
    return tree.Entry(rel, kind, 0, mode)


def test_sanitize_decides_on_setid_bits_and_device_nodes_only():
    entries = [
        _entry("", "dir", stat.S_IFDIR | 0o2775),
        _entry("euid", "file", stat.S_IFREG | 0o4755),
        _entry("egid", "file", stat.S_IFREG | 0o2711),
        _entry("both", "file", stat.S_IFREG | 0o6777),
        _entry("sticky", "dir", stat.S_IFDIR | 0o1777),
        _entry("plain", "file", stat.S_IFREG | 0o755),
        _entry("link", "symlink", stat.S_IFLNK | 0o777),
        _entry("sda", "block-device", stat.S_IFBLK | 0o660),
        _entry("mem", "char-device", stat.S_IFCHR | 0o4640),
        _entry("fifo", "fifo", stat.S_IFIFO | 0o4644),
    ]
    got = {a.rel: (a.do, a.new_mode) for a in sanitize.decide(entries)}
    assert got == {"": ("clear-setid", 0o775), "euid": ("clear-setid", 0o755),
                   "egid": ("clear-setid", 0o711), "both": ("clear-setid", 0o777),
                   "sda": ("unlink", 0o660), "mem": ("unlink", 0o640)}


def test_sanitize_clears_the_bits_unlinks_devices_and_records_them(tmp_path):
    src, outside = tmp_path / "scratch", tmp_path / "outside"
    (src / "d").mkdir(parents=True)
    outside.mkdir()
    (src / "euid").write_bytes(b"\x7fELF")
    (src / "euid").chmod(0o4755)
    (src / "d").chmod(0o2755)
    (outside / "keep").write_bytes(b"x")
    (outside / "keep").chmod(0o4750)
    (src / "link").symlink_to(outside / "keep")  # never followed
    deep = src.joinpath(*["n"] * (tree.MAX_DEPTH + 3))
    deep.mkdir(parents=True)
    (deep / "low").write_bytes(b"x")
    (deep / "low").chmod(0o6700)
    try:
        os.mknod(src / "sda", stat.S_IFBLK | 0o600, os.makedev(7, 200))
        device = True
    except PermissionError:
        device = False
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    reasons = sanitize.sanitize(run_dir, [("mounts[0]", src)])
    assert stat.S_IMODE((src / "euid").stat().st_mode) == 0o755
    assert stat.S_IMODE((src / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE((deep / "low").stat().st_mode) == 0o700
    assert stat.S_IMODE((outside / "keep").stat().st_mode) == 0o4750
    assert not os.path.lexists(src / "sda")
    rules = [r.rule for r in reasons]
    assert rules == ["MOUNT-SETUID-PLANTED"] + (["MOUNT-DEVICE-PLANTED"] if device else [])
    doc = json.loads((run_dir / "mounts-sanitized.json").read_text())
    [m] = doc["mounts"]
    assert m["complete"] and m["source"] == str(src)
    rows = {e["path"]: (e["old_mode"], e["kind"], e["done"]) for e in m["entries"]}
    assert rows["euid"] == ("4755", "file", True) and rows["d"] == ("2755", "dir", True)
    assert rows["/".join(["n"] * (tree.MAX_DEPTH + 3)) + "/low"] == ("6700", "file", True)
    if device:
        assert rows["sda"] == ("0600", "block-device", True)
    assert sanitize.sanitize(run_dir / "again", [("mounts[0]", src)]) == []  # all undone


def test_sanitize_of_a_clean_mount_writes_nothing_and_a_huge_one_is_refused(tmp_path):
    src = tmp_path / "scratch"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_text("x")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert sanitize.sanitize(run_dir, [("mounts[0]", src)]) == []
    assert not (run_dir / "mounts-sanitized.json").exists()
    [r] = sanitize.sanitize(run_dir, [("mounts[0]", src)], max_entries=3)
    assert r.rule == "MOUNT-SANITIZE-INCOMPLETE" and "more than 3 entries" in r.detail
    [m] = json.loads((run_dir / "mounts-sanitized.json").read_text())["mounts"]
    assert m["complete"] is False


def test_a_single_file_mount_is_sanitized_too(tmp_path):
    f = tmp_path / "tool"
    f.write_bytes(b"x")
    f.chmod(0o4711)
    [r] = sanitize.sanitize(tmp_path, [("mounts[1]", f)])
    assert r.rule == "MOUNT-SETUID-PLANTED" and stat.S_IMODE(f.stat().st_mode) == 0o711
