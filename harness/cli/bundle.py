"""`harness bundle export|verify`: evidence bundles for reviewers who were not there."""

from __future__ import annotations

from pathlib import Path

import click

from harness.bundle import export_bundle, verify_bundle
from harness.bundle.export import ExportRefused
from harness.bundle.sums import one_line
from harness.cli.jsonout import as_json_errors, emit
from harness.errors import REFUSED, Refused


@click.group("bundle")
def bundle() -> None:
    """Export run folders as a verifiable evidence bundle, or verify one offline.

    A bundle is a BagIt bag in a tar: the run folders unchanged, sha256 manifests, an
    in-toto statement, and optionally an SSH signature. See docs/bundles.md.
    """


@bundle.command("export")
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="New archive: FILE.tar or FILE.tar.gz; never overwritten.")
@click.option("--sign-key", type=click.Path(path_type=Path),
              help="SSH private key: sign tagmanifest-sha256.txt (namespace harness-evidence).")
def export_command(folders: tuple[Path, ...], output: Path, sign_key: Path | None) -> None:
    """Bundle RUN_DIR or NIGHT_DIR folders into one deterministic archive.

    A NIGHT_DIR (RUNS/nights/<night>/) brings every run folder its journal names, reruns
    included, from RUNS/<run-id>/; give a run kept elsewhere as well.
    Exporting the same folders twice gives byte-identical archives. Exit 1, naming each
    problem, when a run does not verify (`harness verify`) or a SHA256SUMS lies outside a
    run; exit 2 for symlinks, FIFOs, devices or odd names in the folders.
    """
    try:
        result = export_bundle(list(folders), output, sign_key)
    except ExportRefused as e:
        for problem in e.problems:
            click.echo(f"FAIL {one_line(str(problem))}", err=True)
        raise
    signed = "signed" if result.signed else "unsigned"
    click.echo(
        f"wrote {one_line(str(result.output))}: {result.files} files, {len(result.runs)} run(s), "
        f"top folder {one_line(str(result.top))}, {signed}"
    )


@bundle.command("verify")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--allowed-signers", type=click.Path(path_type=Path),
              help="OpenSSH allowed_signers file; required to accept a signed bundle.")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout: ok, "
              "exit_code, files, runs, signature, problems (or error)")
def verify_command(source: Path, allowed_signers: Path | None, as_json: bool) -> None:
    """Verify a bundle FILE (or an unpacked bundle folder) offline.

    Exit 0 when every file matches and the signature (if any) is valid; 1 naming each
    bad file otherwise; 2 for a hostile or unreadable archive.
    """
    with as_json_errors(as_json, source=str(source)):
        report = verify_bundle(source, allowed_signers)
    if as_json:
        code = 0 if report.ok else REFUSED
        emit({"source": str(source), "ok": report.ok, "exit_code": code,
              "files": report.files, "runs": list(report.runs),
              "signature": report.signature,
              "problems": [{"kind": p.kind, "path": p.path, "detail": p.detail}
                           for p in report.problems]})
        raise click.exceptions.Exit(code)
    shown = one_line(str(source))  # every printed value is one escaped line: no raw ESC/OSC
    if report.ok:
        click.echo(
            f"OK {shown}: {report.files} payload files, {len(report.runs)} run(s), "
            f"{one_line(report.signature)}"
        )
        return
    for problem in report.problems:
        click.echo(f"FAIL {one_line(str(problem))}")
    raise Refused(f"{shown}: bundle verification failed: {len(report.problems)} problem(s)")
