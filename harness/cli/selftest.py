"""`harness selftest [--junitxml FILE]` and `harness selftest --image-gate CAMPAIGN`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from harness.base.atomic import write_bytes
from harness.base.errors import ENVIRONMENT, OK, REFUSED, EnvironmentFault, InvalidInput
from harness.cli.core import after_night
from harness.cli.params import DURATION, runs_dir_option
from harness.config import runsdir
from harness.config.loader import require_campaign
from harness.driver import imagescenario as gate
from harness.judge import gate0cases as cases
from harness.judge.gate0cases import CaseResult
from harness.measure.origin import describe
from harness.measure.provenance import harness_state
from harness.measure.ui import reporter
from harness.readers.report.inert import inert

GATE0_SUITE = "harness.selftest.gate0"
IMAGE_SUITE = "harness.selftest.image-gate"


def _harness() -> tuple[str, dict[str, str]]:
    """Which harness runs this selftest: one line, and the JUnit properties naming it."""
    state = harness_state()
    props = {f"harness.{key}": str(value) for key, value in state.items() if value is not None}
    return describe(state), props


def _echo(result: CaseResult) -> None:
    status = "passed" if result.passed else "FAILED"
    click.echo(f"{status}  {inert(result.name, 200)}: {inert(result.got, 4000)}")
    if not result.passed:
        click.echo(f"    why: {inert(result.why, 4000)}")
        if result.proves:
            click.echo(f"    proves: {inert(result.proves, 1000)}")


def _write(junitxml: Path | None, suite: str, results: list[CaseResult],
           props: dict[str, str]) -> None:
    if junitxml is None:
        return
    try:
        write_bytes(junitxml, cases.junit_xml(suite, results, props))
    except OSError as e:
        raise InvalidInput(f"--junitxml {junitxml}: cannot write it: {e.strerror or e}") from None


def _gate0(junitxml: Path | None, names: tuple[str, ...], listing: bool) -> int:
    try:
        found = cases.load_cases()
    except cases.CasesMissing as e:
        raise EnvironmentFault(f"no Gate-0 cases ({e}): this installation lacks the harness's "
                               "package data (harness/data/selftest/gate0/); reinstall the "
                               "wheel") from None
    missing = cases.unknown(found, names)
    if missing:
        raise InvalidInput(f"--case {', '.join(missing)}: no such case (`harness selftest "
                           "--list` names them)")
    chosen = cases.select(found, names)
    if listing:
        for case in chosen:
            click.echo(inert(cases.describe_case(case), 2000))
        return OK
    who, props = _harness()
    results = []
    for case in chosen:
        results.append(cases.run_case(case))
        _echo(results[-1])
    _write(junitxml, GATE0_SUITE, results, props)
    passed, total = cases.summary(results)
    click.echo(f"selftest: {passed} of {total} Gate-0 cases passed; {inert(who, 2000)}")
    return OK if passed == total and total else REFUSED


def _image_gate(campaign: Path, images: tuple[str, ...], runs: Any,
                lock_timeout: float | None, junitxml: Path | None) -> int:
    """The image gate in each chosen image, through the one loop; the worst exit."""
    loaded = require_campaign(campaign)
    chosen = gate.images_of(loaded, images)
    runs_dir = runsdir.require_creatable(runs)
    runs_dir.mkdir(exist_ok=True)
    who, props = _harness()
    lock = loaded.image_lock
    pinned = {name: lock.images[name].id for name in chosen} if lock is not None else {}
    props.update({"campaign": str(loaded.campaign_file),
                  "images": ", ".join(f"{n}={i}" for n, i in pinned.items())})
    proofs, results, worst = gate.proofs(), [], OK
    ui = reporter(None)
    try:
        for image in chosen:
            with tempfile.TemporaryDirectory(prefix="harness-image-gate-") as tmp:
                staged = gate.stage(loaded, image, Path(tmp))
                wait = after_night(staged, ui, lock_timeout or staged.campaign.lock_timeout)
                outcomes = gate.run_staged(staged, runs_dir, ui, lock_timeout=lock_timeout,
                                           before_launch=wait)
            worst = max([worst, *(o.exit_code for o in outcomes)])
            for outcome in outcomes:
                results.append(gate.result_of(image, proofs, outcome))
                _echo(results[-1])
    finally:
        ui.close()
    _write(junitxml, IMAGE_SUITE, results, props)
    passed, total = cases.summary(results)
    shown = ", ".join(f"{n} ({i})" for n, i in pinned.items())
    click.echo(f"selftest: image gate {passed} of {total} runs accepted in {inert(shown, 2000)};"
               f" {inert(who, 2000)}")
    if worst == ENVIRONMENT:
        return ENVIRONMENT
    return OK if passed == total == len(chosen) * len(gate.CONTROLS) else REFUSED


@click.command("selftest")
@click.option("--junitxml", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="also write the results as JUnit XML (one testcase per case or run, the "
                   "harness's distribution and version as properties), the file a gate's "
                   "`expect: {junit: ...}` reads")
@click.option("--case", "names", multiple=True, metavar="NAME",
              help="run only this Gate-0 case (repeatable)")
@click.option("--list", "listing", is_flag=True,
              help="list the Gate-0 cases and what each proves; judge none")
@click.option("--image-gate", "campaign", type=click.Path(path_type=Path), metavar="CAMPAIGN",
              help="run the image gate in the images CAMPAIGN's controls use (launched by "
                   "their pinned Ids from its images.lock, under its GPU lock)")
@click.option("--image", "images", multiple=True, metavar="NAME",
              help="with --image-gate: this images.lock name only (repeatable)")
@runs_dir_option("lazy", help="with --image-gate: where its run folders go",
                 campaign="campaign")
@click.option("--lock-timeout", type=DURATION, help="with --image-gate: how long to wait for "
              "the GPU lock (default: the campaign's lock_timeout)")
def selftest(junitxml: Path | None, names: tuple[str, ...], listing: bool,
             campaign: Path | None, images: tuple[str, ...], runs_dir: Any,
             lock_timeout: float | None) -> None:
    """Check this harness's Gate 0 against the cases shipped with it, or run the image gate.

    Without --image-gate: each Gate-0 case in the package data is laid out as a run
    folder, judged by the real Gate 0 and held against its expected verdict, rules and
    differences; needs no Docker and no source tree. With --image-gate CAMPAIGN: in each
    image its controls use (or each --image), the instrument's CPU scenario runs as two
    sealed controls through the normal pipeline: the seed's multiprocess layout must be
    refused on exactly compilation.custom_ops, its in-process pair accepted
    (docs/gate0-contract.md). As a campaign gate: `run: [harness, selftest, --junitxml,
    "{gate_dir}/junit.xml"]` with `expect: {junit: junit.xml}`.

    Exit codes: 0 every case passed (every run accepted); 1 one failed, saying why; 2 bad
    usage or campaign; 3 no selftest data, or a run could not be made (image, engine,
    lock)."""
    if campaign is None:
        given = click.get_current_context().get_parameter_source("runs_dir")
        if images or lock_timeout is not None or given == ParameterSource.COMMANDLINE:
            raise InvalidInput("--image, --runs-dir and --lock-timeout go with --image-gate "
                               "CAMPAIGN")
        raise click.exceptions.Exit(_gate0(junitxml, names, listing))
    if names or listing:
        raise InvalidInput("--case and --list choose Gate-0 cases; they do not go with "
                           "--image-gate")
    raise click.exceptions.Exit(_image_gate(campaign, images, runs_dir, lock_timeout,
                                            junitxml))
