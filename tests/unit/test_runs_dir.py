"""The runs dir: one resolution (option, HARNESS_RUNS_DIR, harness.toml, default) for every
command, each answer saying where it came from; a missing one is exit 2, never empty."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness.base.errors import InvalidInput
from harness.cli.params import runs_dir_option
from harness.config import runsdir
from harness.config.runsdir import ProjectConfig, choose, parse_config


def test_the_option_beats_the_environment_beats_the_config_beats_the_default() -> None:
    cfg = ProjectConfig(Path("/proj/harness.toml"), "../shared/runs")
    cwd = Path("/proj/sub")
    assert choose("r", "/env", cfg, cwd) == runsdir.RunsDir(Path("/proj/sub/r"), "--runs-dir")
    assert choose(None, "/env", cfg, cwd) == runsdir.RunsDir(Path("/env"), runsdir.ENV)
    assert choose(None, "", cfg, cwd).path == Path("/shared/runs")  # VAR= is unset
    assert choose(None, None, cfg, cwd).source == "/proj/harness.toml"
    assert choose(None, None, None, cwd) == runsdir.RunsDir(Path("/proj/sub/gpu-runs"),
                                                            "the default")


def test_the_default_is_found_beside_the_config_file_even_without_runs_dir() -> None:
    found = choose(None, None, ProjectConfig(Path("/proj/harness.toml"), None), Path("/proj/a/b"))
    assert found.path == Path("/proj/gpu-runs")
    assert not found.named


def test_relative_environment_values_are_taken_from_the_current_folder() -> None:
    assert choose(None, "runs", None, Path("/here")).path == Path("/here/runs")


def test_config_parsing_is_strict_about_runs_dir() -> None:
    assert parse_config(b'runs_dir = "runs"\n', "f") == "runs"
    assert parse_config(b"# nothing\n", "f") is None
    for bad in (b"runs_dir = 3\n", b'runs_dir = ""\n', b"runs_dir = [\n", b"\xff"):
        with pytest.raises(InvalidInput, match=r"^f: "):
            parse_config(bad, "f")


def test_the_config_is_found_upwards_and_the_search_stops_at_a_git_root(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "a" / "b").mkdir(parents=True)
    (tmp_path / runsdir.CONFIG).write_text('runs_dir = "outside"\n')
    assert config_file(project / "a" / "b") == tmp_path / runsdir.CONFIG
    (project / ".git").mkdir()
    assert config_file(project / "a" / "b") is None  # never above the project's root
    (project / runsdir.CONFIG).write_text('runs_dir = "runs"\n')
    assert config_file(project / "a" / "b") == project / runsdir.CONFIG


def config_file(start: Path) -> Path | None:
    """The harness.toml `runsdir.search` obeys from `start` upwards, or None."""
    found = runsdir.search(start).config
    return None if found is None else found.file


def test_resolve_reads_the_environment_and_the_config(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / runsdir.CONFIG).write_text('runs_dir = "evidence"\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.delenv(runsdir.ENV, raising=False)
    assert runsdir.resolve(None, tmp_path / "sub").path == tmp_path / "evidence"
    monkeypatch.setenv(runsdir.ENV, str(tmp_path / "env"))
    assert runsdir.resolve(None, tmp_path / "sub").path == tmp_path / "env"
    assert runsdir.resolve("x", tmp_path / "sub").path == tmp_path / "sub" / "x"


def test_a_missing_runs_dir_says_where_it_came_from(tmp_path: Path) -> None:
    named = runsdir.RunsDir(tmp_path / "nope", runsdir.ENV)
    with pytest.raises(InvalidInput, match=r"no such runs dir: .*nope \(from HARNESS_RUNS_DIR\)"):
        runsdir.require_existing(named)
    default = runsdir.RunsDir(tmp_path / "gpu-runs", "the default")
    with pytest.raises(InvalidInput, match="the default; give --runs-dir"):
        runsdir.require_existing(default)
    assert runsdir.require_creatable(named) == tmp_path / "nope"  # its parent exists
    with pytest.raises(InvalidInput, match=r"its parent .* is not a folder either"):
        runsdir.require_creatable(runsdir.RunsDir(tmp_path / "a" / "b", "--runs-dir"))
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidInput, match="is not a folder"):
        runsdir.require_existing(runsdir.RunsDir(tmp_path / "file", "--runs-dir"))


@click.command()
@runs_dir_option("reads")
def _reader(runs_dir: Path) -> None:
    click.echo(str(runs_dir))


def test_the_option_factory_resolves_checks_and_says_where_the_default_comes_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runsdir.ENV, str(tmp_path))
    r = CliRunner().invoke(_reader, [])
    assert r.exit_code == 0 and r.output.strip() == str(tmp_path)
    r = CliRunner().invoke(_reader, ["--runs-dir", str(tmp_path / "missing")])
    assert isinstance(r.exception, InvalidInput) and "(from --runs-dir)" in r.exception.message
    help_text = " ".join(CliRunner().invoke(_reader, ["--help"]).output.split())
    assert "default: $HARNESS_RUNS_DIR, else runs_dir in the project's harness.toml" in help_text


# ---- a command given a campaign: its project, not the current folder ------------------------

def test_a_campaign_project_holds_the_default_when_no_config_names_one() -> None:
    proj, here = Path("/srv/ops"), Path("/tmp/elsewhere")
    assert choose(None, None, None, here, proj) == runsdir.RunsDir(Path("/srv/ops/gpu-runs"),
                                                                   "the default")
    cfg = ProjectConfig(Path("/srv/ops/harness.toml"), "runs")
    assert choose(None, None, cfg, here, proj) == runsdir.RunsDir(Path("/srv/ops/runs"),
                                                                  "/srv/ops/harness.toml")
    # the operator's own words stay where they were typed
    assert choose("r", None, cfg, here, proj).path == Path("/tmp/elsewhere/r")
    assert choose(None, "e", cfg, here, proj).path == Path("/tmp/elsewhere/e")


def _two_projects(tmp_path: Path) -> tuple[Path, Path]:
    """A campaign in project `ops` (its harness.toml: runs), and an unrelated git folder
    `here` with a harness.toml of its own (runs_dir = here-runs)."""
    ops, here = tmp_path / "ops", tmp_path / "here"
    for folder in (ops, here):
        (folder / ".git").mkdir(parents=True)
    (ops / "campaigns").mkdir()
    (ops / runsdir.CONFIG).write_text('runs_dir = "runs"\n')
    (here / runsdir.CONFIG).write_text('runs_dir = "here-runs"\n')
    campaign = ops / "campaigns" / "c.yaml"
    campaign.write_text("name: c\n")
    return campaign, here


def test_resolve_with_a_campaign_reads_the_campaign_projects_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign, here = _two_projects(tmp_path)
    ops = campaign.parent.parent
    monkeypatch.delenv(runsdir.ENV, raising=False)
    monkeypatch.chdir(here)
    assert runsdir.resolve(None).path == here / "here-runs"  # no campaign: this folder's
    found = runsdir.resolve(None, campaign=campaign)
    assert found == runsdir.RunsDir(ops / "runs", str(ops / runsdir.CONFIG))
    monkeypatch.chdir(ops / "campaigns")  # a relative campaign path, as typed
    assert runsdir.resolve(None, campaign=Path("c.yaml")).path == ops / "runs"
    (ops / runsdir.CONFIG).unlink()  # no config in the campaign's project: its default
    monkeypatch.chdir(here)
    assert runsdir.resolve(None, campaign=campaign) == runsdir.RunsDir(ops / "gpu-runs",
                                                                       "the default")
    assert runsdir.resolve("x", campaign=campaign).path == here / "x"
    monkeypatch.setenv(runsdir.ENV, "env-runs")
    assert runsdir.resolve(None, campaign=campaign) == runsdir.RunsDir(here / "env-runs",
                                                                       runsdir.ENV)


@click.command()
@click.argument("campaign", type=click.Path(path_type=Path))
@runs_dir_option("creates", campaign="campaign")
def _runner(campaign: Path, runs_dir: Path) -> None:
    if not campaign.is_file():
        raise InvalidInput(f"{campaign}: no such campaign file")
    click.echo(str(runs_dir))


@pytest.mark.parametrize("order", ["campaign first", "option first", "no option"])
def test_the_option_follows_the_campaign_whatever_the_order_on_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str) -> None:
    campaign, here = _two_projects(tmp_path)
    monkeypatch.delenv(runsdir.ENV, raising=False)
    monkeypatch.chdir(here)
    args = {"campaign first": [str(campaign), "--runs-dir", "mine"],
            "option first": ["--runs-dir", "mine", str(campaign)],
            "no option": [str(campaign)]}[order]
    r = CliRunner().invoke(_runner, args)
    assert r.exit_code == 0, r.output
    want = here / "mine" if "--runs-dir" in args else campaign.parent.parent / "runs"
    assert r.output.strip() == str(want)
    assert sorted(p.name for p in here.iterdir()) == [".git", runsdir.CONFIG]  # nothing made


def test_a_missing_campaign_is_refused_for_itself_not_for_its_runs_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(runsdir.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(_runner, [str(tmp_path / "nowhere" / "campaigns" / "c.yaml")])
    assert isinstance(r.exception, InvalidInput)
    assert "no such campaign file" in r.exception.message
    help_text = " ".join(CliRunner().invoke(_runner, ["--help"]).output.split())
    assert "runs_dir in the campaign project's harness.toml" in help_text
