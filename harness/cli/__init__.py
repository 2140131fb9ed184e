"""The ``harness`` command line. It parses and prints; all work goes through the public API.

Adding a command: define it in its own module (e.g. ``_demo.py``), decorate it with
:func:`root_option` if it uses sessions, and register it below with
``main.add_lazy_command`` (its module is imported when it runs) or ``main.add_command``. Every
command registered on :data:`main` reports a ``HarnessError`` as ``error[<code>]: <message>`` on
stderr with exit code 1 (usage errors exit 2, click's default); see ``_common.py``.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import click

from ._escape import TerminalFormatter, echo, excepthook
from ._lazy import LazyGroup

if TYPE_CHECKING:
    from ._common import (
        HarnessCliError,
        HarnessGroup,
        handle_errors,
        open_repo,
        root_option,
        run_async,
    )

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
    from importlib.metadata import PackageNotFoundError, version  # slow to import: on use

    try:
        return version("jsonl-harness")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    # click's `version_option`, with the version looked up only when asked for.
    if value and not ctx.resilient_parsing:
        echo(f"harness, version {_version()}")
        ctx.exit()


_GROUP_OPTIONS = frozenset({"-v", "--verbose", "--version", "-h", "--help"})
_PRINT_FLAGS = frozenset({"-p", "--print"})


def __getattr__(name: str) -> Any:
    # The helpers for commands defined elsewhere live in `_common`, which imports the library.
    if name in __all__:
        from . import _common

        return getattr(_common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Main(LazyGroup):
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

    def invoke(self, ctx: click.Context) -> Any:
        # As `HarnessGroup` does (`_common` imports the library: not for `--help`).
        from ._common import handle_errors

        with handle_errors():
            return super().invoke(ctx)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="Also print the library's log messages (INFO and up)."
)
def main(verbose: bool) -> None:
    """An agent harness whose sessions are pi-compatible JSONL trees.

    `harness` alone starts a chat; `harness -p PROMPT` (or `harness run PROMPT`) sends one
    prompt and prints the reply; `harness rpc` serves pi's RPC protocol on stdin/stdout.
    """
    from ._common import make_streams_safe

    make_streams_safe()
    sys.excepthook = excepthook  # a bug's traceback may quote session text
    # The commands report problems themselves (skipped files, diagnostics); the library's own
    # warnings would repeat them, so they show only with --verbose. Log messages may quote
    # session text: escaped like every other line.
    handler = logging.StreamHandler()
    handler.setFormatter(TerminalFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR, handlers=[handler])


# Each command's module is imported when the command runs (or its own --help shows); the
# summary is the first paragraph of its help, what `harness --help` lists.
for _name, _target, _summary in (
    (
        "sessions",
        "._sessions:sessions",
        "List, inspect, fork and delete sessions (pi-compatible JSONL files).",
    ),
    # `harness fork` is `harness sessions fork`, as pi and Claude Code users type it
    (
        "fork",
        "._sessions:fork",
        "Copy a session's branch into a new session file under the root.",
    ),
    (
        "demo",
        "._demo:demo",
        "Run an offline demo: a blocked tool call, a redacted tool result, a fork.",
    ),
    (
        "run",
        "._run:run",
        "Send one prompt and print the reply; for scripts and CI (Claude Code's print mode).",
    ),
    (
        "chat",
        "._chat:chat",
        "Chat with an agent in the terminal (type /help for the commands).",
    ),
    (
        "rpc",
        "._rpc:rpc",
        "Serve pi's RPC protocol on stdin and stdout (JSON lines; pi's RpcClient drives it).",
    ),
    (
        "export",
        "._export:export",
        "Export a session as an HTML page, Markdown or JSONL; the source is not modified.",
    ),
    (
        "import",
        "._import:import_group",
        "Import other agents' transcripts as sessions.",
    ),
    (
        "skills",
        "._resources:skills",
        "List and show the skills an agent here would be offered.",
    ),
    (
        "templates",
        "._resources:templates",
        "List and show the prompt templates an agent here would expand (``/name args``).",
    ),
    (
        "hooks",
        "._hooks:hooks",
        "The command hooks (Claude Code's shape) that run or chat would run here.",
    ),
    (
        "mcp",
        "._mcp:mcp",
        "The MCP servers of the settings files: list, add, remove (docs/mcp.md).",
    ),
    (
        "models",
        "._models:models",
        "The models --model can name: the package's, and those of the user settings "
        "(with their window, output limit and prices per million tokens, input / "
        "output).",
    ),
    (
        "rewind",
        "._checkpoints:rewind",
        "Put the files (and the conversation) back as they were at ENTRY.",
    ),
    (
        "checkpoints",
        "._checkpoints:checkpoints_group",
        "The checkpoint store: file contents the sessions' checkpoints refer to.",
    ),
    (
        "serve",
        "._serve:serve",
        "Serve a web app listing the sessions (search and filters), showing each one "
        "(the export's page), following a running one live, and labelling, naming, "
        "checking out and forking from the page. Every request needs a token, new at "
        "each start: open the URL printed (with ?token=...), which keeps it in a "
        "cookie. Ctrl-C stops it.",
    ),
    (
        "approvals",
        "._approvals:approvals_group",
        "Tool calls waiting for a person's answer (runs stopped `awaiting_approval`).",
    ),
    (
        "approve",
        "._approvals:approve",
        "Approve the waiting call APPROVAL_ID; once no call of its run waits any "
        "more, the run goes on here. Shows the call before it runs.",
    ),
    (
        "deny",
        "._approvals:deny",
        "Deny the waiting call APPROVAL_ID (it gets the reason as its result); once "
        "no call of its run waits any more, the run goes on here.",
    ),
):
    main.add_lazy_command(_name, _target, _summary)
del _name, _target, _summary
