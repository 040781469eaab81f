"""`harness finalize` and `harness refinalize`: the Gate-0 finalizer on the command line.

Exit 0 accepted, 1 refused, 2 unreadable or invalid documents, contract or arguments.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click

from harness.base.atomic import dumps_json, write_json
from harness.base.errors import InvalidInput
from harness.cli.params import REFS_RUNS_DIR, RUN
from harness.config.fieldlist import ALL, resolve
from harness.judge.finalize.contract import ContractError, load_contract
from harness.judge.finalize.documents import DocumentError, read_document
from harness.judge.finalize.explain import render
from harness.judge.finalize.refinalize import refinalize as refinalize_run
from harness.judge.finalize.refinalize import standing
from harness.judge.finalize.rules import exit_code, judge

FILE = click.Path(dir_okay=False, path_type=Path)


def _contract(path: Path | None, all_fields: bool) -> list[str] | str | None:
    """The contract file through the one safe loader (every fault is FILE:LINE:COL), `all`
    for --all-fields, None for neither."""
    if all_fields and path is not None:
        raise click.UsageError("--contract and --all-fields exclude each other")
    if all_fields:
        return ALL
    if path is None:
        return None
    try:
        return load_contract(path)
    except ContractError as e:
        raise InvalidInput(f"invalid contract {path}", faults=e.faults) from None


def _documents(*paths: Path) -> list[dict]:
    docs, faults = [], []
    for path in paths:
        try:
            docs.append(read_document(path))
        except DocumentError as e:
            faults += e.faults
    if faults:
        raise InvalidInput("unreadable or invalid observation documents", faults=faults)
    return docs


@click.command("finalize")
@click.option("--startup", "startup", type=FILE, required=True,
              help="start-up observation (observations/startup.json)")
@click.option("--generation", "generation", type=FILE, required=True,
              help="generation observation (observations/generation.json)")
@click.option("--contract", type=FILE, default=None,
              help="YAML/JSON list of dotted fields, or {fields: [...]}; default: the vLLM "
                   "identity contract (docs/gate0-contract.md)")
@click.option("--all-fields", is_flag=True,
              help="compare every field either observation holds, instead of a contract")
@click.option("--json", "as_json", is_flag=True, help="print the verdict as JSON")
@click.option("--out", type=FILE, default=None, help="also write the verdict here (new file)")
def finalize(startup: Path, generation: Path, contract: Path | None, all_fields: bool,
             as_json: bool, out: Path | None) -> None:
    """Gate 0: refuse unless the start-up and generation observations name the same engine.

    Without --contract the vLLM identity contract is compared (docs/gate0-contract.md);
    --all-fields compares every field."""
    fields = resolve(_contract(contract, all_fields))
    start_doc, gen_doc = _documents(startup, generation)
    verdict = judge(start_doc, gen_doc, contract=fields)
    if out is not None:
        try:
            write_json(out, verdict, exclusive=True)
        except FileExistsError:
            raise InvalidInput(f"{out} exists; a verdict is never overwritten") from None
        except OSError as e:
            raise InvalidInput(f"cannot write {out}: {e}") from None
    click.echo(dumps_json(verdict) if as_json else render(verdict), nl=False)
    if exit_code(verdict):
        raise click.exceptions.Exit(exit_code(verdict))


@click.command("refinalize")
@click.argument("run_dir", type=RUN)
@REFS_RUNS_DIR
@click.option("--contract", type=FILE, default=None,
              help="contract to judge by; default: the one the gate0 post-step used (every "
                   "field if it used none; the vLLM identity contract if it left no verdict)")
@click.option("--all-fields", is_flag=True, help="compare every field either observation holds")
@click.option("--json", "as_json", is_flag=True, help="print the new verdict as JSON")
def refinalize(run_dir: Path, contract: Path | None, all_fields: bool, as_json: bool) -> None:
    """Re-judge a sealed run into a new addendum; the run's recorded status stands."""
    record, folder = refinalize_run(run_dir, datetime.now(UTC), _contract(contract, all_fields))
    if as_json:
        click.echo(json.dumps({**record, "addendum": str(folder)}, indent=2, sort_keys=True))
    else:
        click.echo(render(record), nl=False)
        original = record["refinalize"]["original_status"]
        click.echo(f"addendum: {folder}")
        click.echo(f"run status stands: {original} (refinalize never changes a recorded status)")
    code = standing(record)
    if code:
        raise click.exceptions.Exit(code)
