"""`harness bundle export|verify|merge|collect`: evidence bundles for reviewers who were
not there, and the drop where Slurm hosts leave theirs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import click

from harness.base.errors import REFUSED, Refused
from harness.cli.jsonout import as_json_errors, emit, fault_doc, json_option
from harness.cli.params import REFS_RUNS_DIR, RUN_OR_NIGHT, Named
from harness.readers.bundle.collect import collect_drop
from harness.readers.bundle.export import ExportRefused, ExportResult, export_bundle
from harness.readers.bundle.merge import MergeRefused, merge_bundles
from harness.readers.bundle.sums import one_line
from harness.readers.bundle.verify import verify_bundle


@click.group("bundle")
def bundle() -> None:
    """Export run folders as a verifiable evidence bundle, verify one offline, merge several
    into one, or collect those Slurm hosts left in a drop.

    A bundle is a BagIt bag in a tar: the run folders unchanged, sha256 manifests, an
    in-toto statement, and optionally an SSH signature. See docs/bundles.md.
    """


OUTPUT = click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
                      help="New archive: FILE.tar or FILE.tar.gz; never overwritten.")


@bundle.command("export")
@click.argument("folders", nargs=-1, required=True, type=RUN_OR_NIGHT,
                metavar="RUN|NIGHT...")
@REFS_RUNS_DIR
@OUTPUT
@click.option("--sign-key", type=click.Path(path_type=Path),
              help="SSH private key: sign tagmanifest-sha256.txt (namespace harness-evidence).")
@json_option("output, ok, exit_code, sha256, files, runs, top, signed, problems")
def export_command(folders: tuple[Named, ...], output: Path, sign_key: Path | None,
                   as_json: bool) -> None:
    """Bundle runs and nights (their folders) into one deterministic archive.

    A night brings every run its journal names, reruns included. A run may be given by
    id, unique prefix, `latest` or `@-1`, a night by id or unique prefix, either by its
    folder. Exit 1, naming each problem, when a run does not verify; 2 for symlinks, FIFOs,
    devices or odd names in the folders.
    """
    with as_json_errors(as_json, output=str(output)):
        try:
            result = export_bundle([f.path for f in folders], output, sign_key)
        except ExportRefused as e:
            if not as_json:
                _say_refused(e.problems)
                raise
            emit({"output": str(output), **fault_doc(e),
                  "problems": [one_line(str(p)) for p in e.problems]})
            raise click.exceptions.Exit(e.code) from None
    if as_json:
        emit({"output": str(result.output), "ok": True, "exit_code": 0, "sha256": result.sha256,
              "files": result.files, "runs": list(result.runs), "top": result.top,
              "signed": result.signed, "problems": []})
        return
    _say_written(result)


def _say_written(result: ExportResult) -> None:
    """The one line export and merge print for the bundle they wrote."""
    signed = "signed" if result.signed else "unsigned"
    shown = one_line(str(result.output))
    click.echo(f"wrote {shown}: {result.files} files, {len(result.runs)} run(s), "
               f"top folder {one_line(str(result.top))}, {signed}")
    # in `sha256sum` format: send it out of band; the reviewer checks with `sha256sum -c`
    click.echo(f"sha256 {result.sha256}  {shown}")


def _say_refused(problems: Iterable[object]) -> None:
    for problem in problems:
        click.echo(f"FAIL {one_line(str(problem))}", err=True)


@bundle.command("verify")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--allowed-signers", type=click.Path(path_type=Path),
              help="OpenSSH allowed_signers file; required to accept a signed bundle. Given, "
              "the bundle must be signed by a key it lists for harness-evidence, and every "
              "approval it carries by a key it lists for harness-approval@v1.")
@click.option("--reviewers", type=click.Path(path_type=Path),
              help="OpenSSH allowed_signers file of the reviewers' keys "
              "(harness-approval@v1), when not kept in --allowed-signers: every approval "
              "the bundle carries must be signed by a key it lists for harness-approval@v1.")
@json_option("ok, exit_code, sha256, files, runs, run_lines, signature, vouches, problems")
def verify_command(source: Path, allowed_signers: Path | None, reviewers: Path | None,
                   as_json: bool) -> None:
    """Verify a bundle FILE (or an unpacked bundle folder) offline.

    A line per run, then OK with the archive's sha256 (exit 0) when every file matches and
    every signature asked for is valid (`vouched:` lines say who vouches for what); FAIL
    naming each problem (exit 1); exit 2 for a hostile or unreadable archive.
    """
    with as_json_errors(as_json, source=str(source)):
        report = verify_bundle(source, allowed_signers, reviewers=reviewers)
    if as_json:
        code = 0 if report.ok else REFUSED
        emit({"source": str(source), "ok": report.ok, "exit_code": code,
              "sha256": report.sha256 or None, "files": report.files, "runs": list(report.runs),
              "run_lines": [line.as_dict() for line in report.lines],
              "signature": report.signature,
              "vouches": [v.as_dict() for v in report.vouches],
              "problems": [{"kind": p.kind, "path": p.path, "detail": p.detail}
                           for p in report.problems]})
        raise click.exceptions.Exit(code)
    shown = one_line(str(source))  # every printed value is one escaped line: no raw ESC/OSC
    for line in report.lines:  # inert already (listing): one line each, bounded
        click.echo(one_line(str(line)))
    if report.ok:
        digest = f", sha256 {report.sha256}" if report.sha256 else ""
        click.echo(f"OK {shown}: {report.files} payload files, {len(report.runs)} run(s), "
                   f"{one_line(report.signature)}{digest}")
        for vouch in report.vouches:  # who vouches for what: the bag, then each approval
            click.echo(f"  vouched: {vouch}")
        return
    for problem in report.problems:
        click.echo(f"FAIL {one_line(str(problem))}")
    raise Refused(f"{shown}: bundle verification failed: {len(report.problems)} problem(s)")


@bundle.command("merge")
@click.argument("bundles", nargs=-1, required=True, type=click.Path(path_type=Path))
@OUTPUT
@click.option("--sign-key", type=click.Path(path_type=Path),
              help="SSH private key: sign the merged tagmanifest-sha256.txt; needs "
              "--allowed-signers, so only authenticated inputs are signed for.")
@click.option("--allowed-signers", type=click.Path(path_type=Path),
              help="OpenSSH allowed_signers file; required to accept signed inputs, and "
              "then every input must be signed by a listed signer.")
def merge_command(bundles: tuple[Path, ...], output: Path, sign_key: Path | None,
                  allowed_signers: Path | None) -> None:
    """Merge BUNDLE files (one per host, say) into one bundle of all their runs.

    Each input must verify as `bundle verify --allowed-signers` does, and a run id two
    inputs hold with different bytes refuses the merge (exit 1); --sign-key needs
    --allowed-signers (exit 2).
    """
    try:
        result = merge_bundles(list(bundles), output, sign_key, allowed_signers)
    except MergeRefused as e:
        _say_refused(e.problems)
        raise
    vouches = dict(result.vouches)
    for name, digest in result.inputs:
        click.echo(f"input {name}: sha256 {digest}")
        for vouch in vouches.get(name, []):
            click.echo(f"  vouched: {vouch}")
    _say_written(result)


@bundle.command("collect")
@click.argument("drop", type=click.Path(path_type=Path))
@click.option("--runs-dir", required=True, type=click.Path(path_type=Path),
              help="Where the runs go (RUNS); collected.jsonl is kept there.")
@click.option("--allowed-signers", type=click.Path(path_type=Path),
              help="OpenSSH allowed_signers file; required to accept signed bundles.")
def collect_command(drop: Path, runs_dir: Path, allowed_signers: Path | None) -> None:
    """Verify each new bundle in DROP/bundles and unpack its run into RUNS.

    A drop bundle, <run-id>.tar.gz, places that one run only, else it is refused. Each
    one's sha256 goes to RUNS/collected.jsonl, so collect can run again; a run RUNS already
    holds is left as it is. Exit 1 when a bundle is refused, fails to verify or conflicts.
    """
    arrivals = collect_drop(drop, runs_dir, allowed_signers)
    bad = 0
    for a in arrivals:
        state = "OK" if a.ok and not a.problems else "FAIL"
        bad += state == "FAIL"
        digest = f"sha256 {a.sha256}" if a.sha256 else "not read"
        click.echo(f"{state} {a.bundle}: {digest}, unpacked {len(a.unpacked)}, "
                   f"already there {len(a.present)}")
        for problem in a.problems:
            click.echo(f"  {one_line(problem)}")
    click.echo(f"collected {len(arrivals)} new bundle(s), {bad} refused")
    if bad:
        raise Refused(f"{bad} bundle(s) in {one_line(str(drop))} refused")
