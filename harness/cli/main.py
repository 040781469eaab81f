"""The `harness` command: a click group whose errors all map to the project's exit codes."""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from harness.base import signals, terminal
from harness.base.errors import ENVIRONMENT, HarnessError, InvalidInput, ruled
from harness.base.iofault import as_fault
from harness.cli.commands import COMMANDS, SECTIONS
from harness.measure.origin import describe
from harness.measure.provenance import harness_state
from harness.readers.report.inert import inert


class LazyGroup(click.Group):
    """Commands are imported when invoked, not when the program starts: `harness run` does
    not load the bundle or report code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's lookup, with git's "did you mean" for a mistyped command (exit 2)."""
        name = args[0] if args else ""
        if (name and name not in COMMANDS and not name.startswith("-")
                and not ctx.resilient_parsing):
            near = difflib.get_close_matches(name, sorted(COMMANDS), n=1, cutoff=0.6)
            ctx.fail(f"No such command {inert(name, 200)!r}."
                     + (f" Did you mean {near[0]!r}?" if near else ""))
        return super().resolve_command(ctx, args)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names with their short help, read without importing any command (click's
        own would import every command the prefix matches); then the group's options."""
        names = [CompletionItem(name, help=self._listed(ctx, name).get_short_help_str())
                 for name in self.list_commands(ctx) if name.startswith(incomplete)]
        return names + click.Command.shell_complete(self, ctx, incomplete)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command's first sentence, whole (wrapped, never cut), under its task's
        heading (`SECTIONS`), aligned across headings; read from each command's docstring."""
        width = max(len(name) for name in COMMANDS)
        for title, names in SECTIONS.items():
            with formatter.section(title):
                formatter.write_dl([(name.ljust(width),
                                     self._listed(ctx, name).get_short_help_str(10_000))
                                    for name in names])

    def _listed(self, ctx: click.Context, name: str) -> click.Command:
        """A stand-in holding `name`'s docstring read from its source, so a listing imports
        no command (together they take seconds); else the command itself."""
        module, _, attr = COMMANDS[name].partition(":")
        spec = importlib.util.find_spec(module)
        try:
            tree = ast.parse(Path(spec.origin if spec and spec.origin else "").read_bytes())
            doc = next(ast.get_docstring(node) for node in tree.body
                       if isinstance(node, ast.FunctionDef) and node.name == attr)
        except (OSError, SyntaxError, StopIteration):
            doc = None
        if doc is None:
            return self.get_command(ctx, name) or click.Command(name)
        return click.Command(name, help=doc)


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """`--version`: the version and where this harness runs from, as run.json records it."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(describe(harness_state()))
    ctx.exit(0)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and where this harness runs from, and exit.")
def cli() -> None:
    """Run pinned-image GPU controls under the host GPU lock and seal their evidence.

    Exit codes: 0 ok/accepted, 1 refused or verification failed, 2 invalid input or usage,
    3 environment (no engine, lock timeout, missing image), 130 Ctrl-C. SIGTERM or SIGHUP
    seal the run `interrupted` (exit 1); a second Ctrl-C kills the container at once.
    """


def _say(line: str) -> None:
    """One line on stderr, made inert: an error names hostile input (a file name, a value
    from a run folder), and its control or escape characters must not reach the terminal."""
    click.echo(inert(str(line), 20_000), err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the group and turn every failure into a message and an exit code;
    output is best effort from the first line on (`harness.base.terminal`)."""
    if COMPLETE_VAR in os.environ:  # the shell asks for completions: see `_complete`
        _complete(argv)
    terminal.install()
    signals.install()
    sys.exit(signals.exit_code(_run(argv)))


COMPLETE_VAR = "_HARNESS_COMPLETE"  # click's name for `harness`: docs/completion.md


def _complete(argv: list[str] | None) -> None:
    """Shell completion (click reads `_HARNESS_COMPLETE` and exits), before
    `terminal.install`: click writes the script to the binary stream under sys.stdout."""
    cli.main(args=argv, prog_name="harness", complete_var=COMPLETE_VAR)


def _interrupted(e: BaseException) -> int:
    """A stop signal that reached the top: Ctrl-C is 130; SIGTERM or SIGHUP (an
    `Interrupted` no run caught) is 1, as an interrupted run is."""
    _say(f"harness: interrupted{f' by {e}' if isinstance(e, signals.Interrupted) else ''}")
    return 1 if isinstance(e, signals.Interrupted) else signals.SIGINT_EXIT


def _run(argv: list[str] | None) -> int:
    """The command's exit code; every error it raised said in one line on stderr."""
    try:
        rv = cli.main(args=argv, prog_name="harness", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort as e:  # click's form of a KeyboardInterrupt or an EOF at a prompt
        if isinstance(e.__context__, KeyboardInterrupt):
            return _interrupted(e.__context__)
        _say("harness: aborted")
        return ENVIRONMENT
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except InvalidInput as e:
        for fault in e.faults:
            _say(fault)
        if e.message and (not e.faults or e.message not in e.faults):
            _say(f"harness: {e.message}")
        return e.code
    except (HarnessError, OSError) as e:
        fault = as_fault(e)
        _say(f"harness: {ruled(fault.rule, fault.message)}")
        return fault.code
    except (KeyboardInterrupt, signals.Interrupted) as e:
        return _interrupted(e)
    except Exception as e:  # a bug, not bad input: say so plainly, keep the trace for debugging
        _say(f"harness: internal error: {type(e).__name__}: {e}")
        if os.environ.get("HARNESS_DEBUG"):
            traceback.print_exc()
        else:
            click.echo("harness: set HARNESS_DEBUG=1 for the traceback", err=True)
        return ENVIRONMENT
    return rv if isinstance(rv, int) else 0
