"""``harness run [PROMPT]`` (also ``harness -p PROMPT``): one prompt, non-interactive, for
scripts and CI; Claude Code's print mode (``claude -p``).

The prompt is the argument (``--prompt TEXT`` too), or stdin when it is not a terminal, or
both joined (``cat notes.md | harness -p "summarize"``: the argument, a blank line, then
stdin). With an argument, stdin that is a pipe sending nothing for
``$HARNESS_STDIN_WAIT_S`` (3) seconds is left alone, with a note.

``--output-format`` (``--output``): ``text`` (default) prints the reply (terminal controls
shown escaped); ``json`` prints Claude Code's ``result`` record; ``stream-json`` prints its
``system``/``init`` record, an ``assistant``/``user`` record per message and the ``result``
record, one JSON object per line (``_print.py``), and ``--verbose`` adds our events;
``--output events`` means ``stream-json --verbose``. ``--input-format stream-json`` reads user
messages as JSON lines from stdin, one prompt each (``{"type": "user", "message": {"role":
"user", "content": ...}}``). JSON output writes the characters a terminal would act on as
escapes (``\\u009b``...), so it still decodes to exactly the values.

A provider error, a prompt a hook refuses or ``--max-turns`` reached exit 1 (the error reply
is persisted first). Tool calls go to a :class:`~harness.SecuritySupervisor` with no approver:
controlled calls (``bash``, ``write``, ``edit``, paths outside the cwd) are denied unless
``--mode``, ``--allowed-tools`` or a rule in the settings allows them.
"""

from __future__ import annotations

import asyncio
import os
import select
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click
import orjson

from harness import (
    HarnessError,
    ImageContent,
    Model,
    Session,
    TextContent,
    ThinkingLevel,
    UserContent,
)

from .._permissions import Defer, PermissionRequest
from ._agent import (
    AgentOptions,
    Agents,
    agent_options,
    pick_resume,
    pick_session,
    working_folder,
)
from ._common import HarnessCliError, one_line, run_async
from ._escape import echo, json_line
from ._hooks import attach_hook_output, load_command_hooks
from ._mcp import show_mcp_errors
from ._models import DEFAULT_MODEL, ModelChoice
from ._offline import offline_model
from ._opening import warn_diagnostics
from ._otel import otel_tracing
from ._print import PrintRun, Record

__all__ = ["DEFAULT_MODEL", "STDIN_WAIT_ENV", "first_model", "run"]

STDIN_WAIT_ENV = "HARNESS_STDIN_WAIT_S"
"""Seconds ``run`` waits for a pipe on stdin to send something when a prompt argument is given
(default 3, as Claude Code waits)."""

MAX_STDIN_BYTES = 32 << 20
"""A prompt read from stdin holds at most this many bytes (a device such as ``/dev/zero``
would otherwise never end)."""


# --- the prompt -------------------------------------------------------------------------------


def _read_stdin(wait_s: float | None) -> str | None:
    """What stdin holds, when it is not a terminal; None when there is nothing to read.

    ``wait_s``: a pipe (or socket) that sends nothing for so long is left alone (None: wait
    for it to end: it is the prompt).

    Raises:
        click.BadParameter: more than :data:`MAX_STDIN_BYTES`, or bytes that are not UTF-8.
    """
    if sys.stdin is None or sys.stdin.isatty():
        return None
    fd = sys.stdin.fileno()
    mode = os.fstat(fd).st_mode
    if wait_s is not None and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        ready, _, _ = select.select([fd], [], [], wait_s)
        if not ready:
            echo(
                f"note: stdin sent nothing in {wait_s:g} s; going on with the prompt argument "
                f"only (< /dev/null skips stdin; ${STDIN_WAIT_ENV} waits longer)",
                err=True,
            )
            return None
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_STDIN_BYTES:
            raise click.BadParameter(
                f"stdin holds more than {MAX_STDIN_BYTES >> 20} MiB; nothing was written",
                param_hint="stdin",
            )
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise click.BadParameter(
            "is not valid UTF-8; nothing was written", param_hint="stdin"
        ) from None


def _prompt_text(words: Sequence[str], option: str | None) -> str:
    """The prompt of the arguments and stdin (see the module docstring)."""
    if words and option is not None:
        raise click.UsageError("give the prompt as an argument or as --prompt, not both")
    given = option if option is not None else " ".join(words) if words else None
    wait = float(os.environ.get(STDIN_WAIT_ENV) or 3)
    piped = _read_stdin(wait if given is not None else None)
    if piped is not None:
        piped = piped.rstrip("\r\n")  # `echo text |` ends with a newline nobody typed
    if given is not None and piped and piped.strip():
        text = f"{given}\n\n{piped}"
    elif given is not None:
        text = given
    elif piped:
        text = piped
    else:
        raise click.UsageError("no prompt: give one as an argument (or pipe it on stdin)")
    if not text.strip():
        raise click.BadParameter("is empty; nothing was written", param_hint="prompt")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes the locale could not decode (surrogate escapes)
        raise click.BadParameter(
            "is not valid UTF-8; nothing was written", param_hint="prompt"
        ) from None
    return text


class InputError(HarnessError):
    """A line of ``--input-format stream-json`` that is no user message (code
    ``invalid_input``); the prompts before it ran."""

    code = "invalid_input"


def _user_content(line: bytes, number: int) -> str | list[UserContent]:
    """A stream-json input line's user message content (text, or text and image blocks in
    the Messages API's shape).

    Raises:
        InputError: not JSON, not ``{"type": "user", "message": {...}}``, or an unknown block.
    """
    where = f"stdin line {number}"
    try:
        record: Any = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{where} is not JSON: {exc}") from None
    message = record.get("message") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or record.get("type") != "user"
        or not isinstance(message, dict)
    ):
        raise InputError(
            f'{where} is no user message: {{"type": "user", "message": {{"role": "user", '
            '"content": ...}} expected'
        )
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InputError(f"{where}: message.content must be a string or a list of blocks")
    blocks: list[UserContent] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            blocks.append(TextContent(text=block["text"]))
        elif kind == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            data, mime = source.get("data"), source.get("media_type")
            if (
                source.get("type") != "base64"
                or not isinstance(data, str)
                or not isinstance(mime, str)
            ):
                raise InputError(f"{where}: an image block needs a base64 source")
            blocks.append(ImageContent(data=data, mime_type=mime))
        else:
            raise InputError(f"{where}: unsupported content block {str(kind)[:40]!r}")
    if not blocks:
        raise InputError(f"{where}: the message is empty")
    return blocks


# --- the models -------------------------------------------------------------------------------


def first_model(
    opts: AgentOptions, choice: ModelChoice | None, *, paced: bool
) -> tuple[Model | None, ThinkingLevel | None]:
    """The model known before a session is opened: the offline one, ``--model``, or for a new
    session the default; None when the session's model decides. A model that cannot be made
    (no API key, an unknown name) fails here, before a new session file is written."""
    if choice is None:
        return offline_model(paced=paced), opts.thinking
    if choice.given or opts.new_session:
        model, level = choice.model()
        return model, opts.thinking or level
    return None, opts.thinking


def session_model(
    choice: ModelChoice | None, session: Session, level: ThinkingLevel | None
) -> tuple[Model, ThinkingLevel | None]:
    """The model a continued session names (else the settings' or the default)."""
    if choice is None:  # unreachable: offline has a model already
        raise click.UsageError("no model")
    model, named = choice.model(session)
    return model, level or named


# --- the command ------------------------------------------------------------------------------


@click.command()
@click.argument("words", nargs=-1, metavar="[PROMPT]")
@click.option(
    "-p", "--print", "print_", is_flag=True, help="Print mode: what run does (claude -p, pi -p)."
)
@click.option("--prompt", "option_text", metavar="TEXT", default=None, help="The prompt.")
@click.option(
    "--output-format",
    type=click.Choice(["text", "json", "stream-json"]),
    default=None,
    help="text: the reply (default); json: Claude Code's result record; stream-json: its "
    "init, assistant, user and result records, one JSON object per line.",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json", "events"]),
    default=None,
    help="The same as --output-format (events: stream-json --verbose).",
)
@click.option(
    "--input-format",
    type=click.Choice(["text", "stream-json"]),
    default="text",
    show_default=True,
    help='stream-json: read user messages ({"type": "user", "message": {...}}) as JSON lines '
    "from stdin, one prompt each (needs --output-format stream-json).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="With stream-json: also write our own events (docs/events.md).",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=None,
    help="End a run after N turns (model replies) if it would go on; the result is "
    "error_max_turns (exit 1).",
)
@click.option(
    "--defer-approvals",
    is_flag=True,
    help="A call that needs approval waits instead of being denied: the run stops "
    "`awaiting_approval`, and `harness approve ID` / `harness deny ID` answer it later and go "
    "on with the run (`harness approvals list` shows what waits).",
)
@agent_options
def run(
    words: tuple[str, ...],
    print_: bool,
    option_text: str | None,
    output_format: str | None,
    output: str | None,
    input_format: str,
    verbose: bool,
    max_turns: int | None,
    defer_approvals: bool,
    opts: AgentOptions,
) -> None:
    """Send one prompt and print the reply; for scripts and CI (Claude Code's print mode).

    PROMPT is the argument, stdin, or both (the argument first). Without --session, --resume
    or --continue a new session is created for the current folder (--no-session: in memory).
    There is no approver: tool calls that need approval are denied unless --mode,
    --allowed-tools or a settings rule allows them (a rule of the project's settings only with
    --trust-project). Command hooks of the user's settings run, and the MCP servers of the
    settings files are offered (a project's only with --trust-project). A provider error, a
    prompt a hook refuses, or --max-turns reached exits 1 (the error reply is persisted first).
    With --defer-approvals a call that needs approval waits for `harness approve`/`deny`
    instead (the run stops `awaiting_approval`; each waiting id is named on stderr).
    """
    fmt = _format(output_format, output)
    if output == "events":
        verbose = True
    if verbose and fmt != "stream-json":
        raise click.UsageError("--verbose adds our events to --output-format stream-json")
    streaming_input = input_format == "stream-json"
    if streaming_input and fmt != "stream-json":
        raise click.UsageError("--input-format stream-json needs --output-format stream-json")
    if streaming_input and (words or option_text is not None):
        raise click.UsageError("--input-format stream-json reads the prompts from stdin only")
    text = None if streaming_input else _prompt_text(words, option_text)
    repo = opts.repo()
    here = Path(os.path.realpath(opts.work_dir or Path.cwd()))  # as getcwd() names it
    if opts.resume == "":
        opts = _resumed(opts, pick_resume(repo, here))
    choice = opts.model_choice(here)
    model, level = first_model(opts, choice, paced=False)
    # Broken hook settings fail before a session file is written (run works in `here`).
    command_hooks = load_command_hooks(here, trust_project=opts.trusts(here))
    with run_async(pick_session(opts, repo, here)) as session:
        warn_diagnostics(session)
        seen = len(session.diagnostics)
        cwd = working_folder(session, here if opts.work_dir is not None else None)
        if model is None:
            model, level = session_model(choice, session, level)
        agents = Agents(
            opts,
            cwd,
            repo=repo,
            choice=choice,
            command_hooks=command_hooks,
            approver=_defer if defer_approvals else None,
        )
        harness = agents.make(session, model, level)
        attach_hook_output(harness, lambda said: echo(said, err=True))
        show_mcp_errors(harness)
        writer = _Writer()
        printer = PrintRun(
            harness,
            choice.registry if choice is not None else harness.registry,
            emit=writer if fmt == "stream-json" else None,
            verbose=verbose,
            max_turns=max_turns,
        )
        with otel_tracing(opts.otel):
            results = run_async(_main(printer, text, streaming_input, opts.thinking))
        warn_diagnostics(session, since=seen)  # damaged bodies found while building context
        if writer.broken:
            echo(f"warning: stdout was closed; the run finished in session {session.id}", err=True)
            raise SystemExit(1)
        _finish(fmt, results, session, max_turns)


async def _defer(request: PermissionRequest) -> Defer:
    """``--defer-approvals``: what needs asking waits for ``harness approve``/``deny``."""
    return Defer(reason="harness run --defer-approvals")


def _format(output_format: str | None, output: str | None) -> str:
    alias = {"events": "stream-json"}.get(output or "", output)
    if output_format is not None and alias is not None and alias != output_format:
        raise click.UsageError("give one of --output-format and --output (its alias)")
    return output_format or alias or "text"


def _resumed(opts: AgentOptions, ref: str) -> AgentOptions:
    return attrs.evolve(opts, resume=ref)


Result = tuple[Record, Any, HarnessError | None]


async def _main(
    printer: PrintRun, text: str | None, streaming_input: bool, thinking: ThinkingLevel | None
) -> list[Result]:
    """The prompts of one run, then the harness shuts down in the same event loop (the MCP
    servers stop, hooks get ``session_end``). ``--thinking`` is recorded in the session, as
    chat's and pi's are."""
    harness = printer.harness
    results: list[Result] = []
    try:
        if thinking is not None:
            await harness.set_thinking_level(thinking)
        servers = await harness.start_mcp_servers()
        printer.put(printer.init([{"name": s.name, "status": s.state} for s in servers]))
        if not streaming_input:
            assert text is not None
            results.append(await printer.prompt(text))
            return results
        number = 0
        while line := await asyncio.to_thread(sys.stdin.buffer.readline):
            number += 1
            if not line.strip():
                continue
            try:
                content = _user_content(line, number)
            except InputError as exc:
                results.append(({}, None, exc))
                return results
            results.append(await printer.prompt(content))
        return results
    finally:
        await harness.shutdown()


def _finish(fmt: str, results: list[Result], session: Session, max_turns: int | None) -> None:
    """Print what ``fmt`` asks for (stream-json printed as it went) and exit 1 on an error."""
    error = next((e for _, _, e in results if e is not None), None)
    last, reply = (results[-1][0], results[-1][1]) if results else ({}, None)
    pending = list(getattr(reply, "pending", ()))
    for waiting in pending:
        echo(
            f"awaiting approval {waiting.id}: {one_line(waiting.operation_key)} "
            f"(`harness approve {waiting.id}` or `harness deny {waiting.id}`)",
            err=True,
        )
    if fmt == "json" and last:
        extra = {
            "path": str(session.path) if session.path is not None else None,
            "leaf_id": session.leaf_id,
            "model": f"{reply.provider}/{reply.model}" if reply is not None else None,
            # The ids of the approvals the run left waiting (stop_reason awaiting_approval).
            "approvals": [a.id for a in pending],
        }
        echo(json_line({**last, **extra}, indent=True))
    elif fmt == "text" and reply is not None and (error is None or reply.text):
        # Terminal controls escaped even into a pipe (a reply holding ESC]52 would write the
        # clipboard of whoever views the log); `--output-format json` carries the exact text.
        echo(reply.text)
    if error is not None:
        raise HarnessCliError(error)
    if any(record.get("subtype") == "error_max_turns" for record, _, _ in results):
        echo(f"error: the run reached --max-turns {max_turns} and was ended", err=True)
        raise SystemExit(1)


class _Writer:
    """Writes each record as one JSON line on stdout, flushed (a pipe sees it at once).

    When the reader goes away (``harness run ... | head -1``) writing stops, but the run goes
    on to the end so that the session is complete; ``broken`` then says so.
    """

    def __init__(self) -> None:
        self.broken = False

    def __call__(self, record: Record) -> None:
        if self.broken:
            return
        try:
            echo(json_line(record, default=repr))
        except BrokenPipeError:
            self.broken = True
            # Python flushes stdout again at exit: point it at /dev/null so that cannot fail.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
