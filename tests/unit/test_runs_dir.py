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
from harness.config.runsdir import ProjectConfig, choose, find_config, parse_config


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
    assert find_config(project / "a" / "b") == tmp_path / runsdir.CONFIG
    (project / ".git").mkdir()
    assert find_config(project / "a" / "b") is None  # never above the project's root
    (project / runsdir.CONFIG).write_text('runs_dir = "runs"\n')
    assert find_config(project / "a" / "b") == project / runsdir.CONFIG


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
