"""The ``harness`` command line. It parses and prints; all work goes through the public API.

Adding a command: define it in its own module (e.g. ``_demo.py``), decorate it with
:func:`root_option` if it uses sessions, and register it below with ``main.add_command``. Every
command registered on :data:`main` reports a ``HarnessError`` as ``error[<code>]: <message>`` on
stderr with exit code 1 (usage errors exit 2, click's default); see ``_common.py``.
"""

from __future__ import annotations

import logging
import sys
from importlib.metadata import PackageNotFoundError, version

import click

# Imported for their side effect: they register commands on `sessions` (_tree_ops: compact,
# checkout, label; _maintenance: verify, repair, migrate; _copy: copy; _stats: stats).
from . import _copy, _maintenance, _stats, _tree_ops  # noqa: F401
from ._approvals import approvals_group, approve, deny
from ._chat import chat
from ._checkpoints import checkpoints_group, rewind
from ._common import (
    HarnessCliError,
    HarnessGroup,
    handle_errors,
    make_streams_safe,
    open_repo,
    root_option,
    run_async,
)
from ._demo import demo
from ._escape import TerminalFormatter, excepthook
from ._export import export
from ._hooks import hooks
from ._import import import_group
from ._mcp import mcp
from ._models import models
from ._resources import skills, templates
from ._rpc import rpc
from ._run import run
from ._serve import serve
from ._sessions import fork, sessions

__all__ = [
    "HarnessCliError",
    "HarnessGroup",
    "handle_errors",
    "main",
    "open_repo",
    "root_option",
    "run_async",
]


def _version() -> str:
    try:
        return version("jsonl-harness")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


_GROUP_OPTIONS = frozenset({"-v", "--verbose", "--version", "-h", "--help"})
_PRINT_FLAGS = frozenset({"-p", "--print"})


class _Main(HarnessGroup):
    """``harness`` alone starts ``chat`` (pi's and Claude Code's habit; help stays on
    ``--help``), and options before any command go to ``chat``, or to ``run`` when they hold
    ``-p``/``--print`` (``harness -p "question"``, ``harness -c``, ``harness --model M``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((i for i, arg in enumerate(args) if arg not in _GROUP_OPTIONS), len(args))
        rest = args[first:]
        if first == len(args) and not any(a in ("-h", "--help", "--version") for a in args):
            args = [*args, "chat"]
        elif rest and rest[0].startswith("-") and rest[0] != "--":
            before_end = rest[: rest.index("--")] if "--" in rest else rest
            command = "run" if any(a in _PRINT_FLAGS for a in before_end) else "chat"
            args = [*args[:first], command, *rest]
        return super().parse_args(ctx, args)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", prog_name="harness")
@click.option(
    "-v", "--verbose", is_flag=True, help="Also print the library's log messages (INFO and up)."
)
def main(verbose: bool) -> None:
    """An agent harness whose sessions are pi-compatible JSONL trees.

    `harness` alone starts a chat; `harness -p PROMPT` (or `harness run PROMPT`) sends one
    prompt and prints the reply; `harness rpc` serves pi's RPC protocol on stdin/stdout.
    """
    make_streams_safe()
    sys.excepthook = excepthook  # a bug's traceback may quote session text
    # The commands report problems themselves (skipped files, diagnostics); the library's own
    # warnings would repeat them, so they show only with --verbose. Log messages may quote
    # session text: escaped like every other line.
    handler = logging.StreamHandler()
    handler.setFormatter(TerminalFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR, handlers=[handler])


main.add_command(sessions)
main.add_command(
    fork
)  # `harness fork` is `harness sessions fork`, as pi and Claude Code users type it
main.add_command(demo)
main.add_command(run)
main.add_command(chat)
main.add_command(rpc)
main.add_command(export)
main.add_command(import_group)
main.add_command(skills)
main.add_command(templates)
main.add_command(hooks)
main.add_command(mcp)
main.add_command(models)
main.add_command(rewind)
main.add_command(checkpoints_group)
main.add_command(serve)
main.add_command(approvals_group)
main.add_command(approve)
main.add_command(deny)
