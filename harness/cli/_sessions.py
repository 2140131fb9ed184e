"""``harness sessions``: list, show, tree, fork and delete sessions (DESIGN §4-§5).

Every command takes ``--root DIR``. A session is named by a path, its id or a prefix of its id
(``_common.resolve_ref`` holds the one rule); ids are validated before any file is touched.
Reading never writes: ``show`` and ``tree`` leave the file as it was, and ``fork``
leaves its source byte-identical.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import click

from hooks import HarnessError
from repos import (
    EntryNotFoundError,
    ForkPosition,
    JsonlSessionRepo,
    Session,
    SessionInfo,
    SessionRepo,
    encode_message,
    open_session,
)

from ._common import (
    HarnessGroup,
    describe_store,
    one_line,
    open_repo,
    resolve_ref,
    root_option,
    run_async,
    short_id,
)
from ._escape import echo, json_line, terminal
from ._lazy import LazyGroup
from ._opening import opened, shown_path
from ._render import (
    DEFAULT_MAX_CHARS,
    Totals,
    context_lines,
    cost_json,
    info_json,
    origin_note,
    session_table,
    totals,
    tree_view,
)

__all__ = ["fork", "sessions"]

_REF = "ID|PATH"


def _dump(value: object) -> str:
    return json_line(value, indent=True)


class _SessionsGroup(LazyGroup, HarnessGroup):
    """``harness sessions``: the commands below, and those of other modules, imported when
    used (registered at the end of this module)."""


@click.group(cls=_SessionsGroup)
def sessions() -> None:
    """List, inspect, fork and delete sessions (pi-compatible JSONL files)."""


@sessions.command("list")
@root_option
@click.option(
    "--cwd",
    metavar="DIR",
    default=None,
    help="Only sessions whose header cwd is DIR (resolved as run and chat record it: `.` is "
    "the current folder, symlinks followed).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of session infos.")
@click.option(
    "--cost",
    "with_cost",
    is_flag=True,
    help="Add what each session cost (reads every listed session whole; replies that "
    "recorded no cost are priced from their tokens, marked ~).",
)
def list_command(root: str | None, cwd: str | None, as_json: bool, with_cost: bool) -> None:
    """List sessions under the root, most recent activity first.

    ID is the start of the session id (8 characters, more where two ids share them), which every
    command accepts. MSGS counts the message entries in the file, every branch included (the
    first count `sessions show` prints). FORK OF names the session a fork was copied from.
    Files that cannot be read (no valid header) are skipped and named on stderr. A --root that
    does not exist is an error.
    """
    repo = open_repo(root, must_exist=True)
    if cwd is not None:
        cwd = os.path.realpath(cwd)  # as run and chat record it (getcwd's name)
    infos = run_async(repo.list(cwd))
    for path, reason in getattr(repo, "list_problems", ()):
        echo(f"warning: skipped {path}: {one_line(reason)}", err=True)
    costs = _costs(repo, infos) if with_cost else None
    if as_json:
        rows = [info_json(i) for i in infos]
        if costs is not None:
            for row, info in zip(rows, infos, strict=True):
                row["cost"] = cost_json(costs[info.id]) if info.id in costs else None
        echo(_dump(rows))
    elif infos:
        for line in session_table(infos, costs):
            echo(line)
    else:
        where = f" with cwd {cwd!r}" if cwd is not None else ""
        echo(f"no sessions{where} in {describe_store(repo)}", err=True)


def _costs(repo: SessionRepo, infos: Iterable[SessionInfo]) -> dict[str, Totals]:
    """Every branch's usage and cost of each listed session; one that cannot be read is left
    out and named on stderr."""
    from harness import load_registry  # the model registry: only with --cost

    registry = load_registry().registry
    found: dict[str, Totals] = {}
    for info in infos:
        try:
            session = (
                open_session(info.path) if info.path is not None else run_async(repo.open(info.id))
            )
            with session:
                found[info.id] = totals(session.entries(), registry)
        except (HarnessError, OSError) as exc:
            where = info.path or info.id
            echo(f"warning: no cost for {where}: {one_line(str(exc))}", err=True)
    return found


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option("--json", "as_json", is_flag=True, help="Print the context messages as a JSON array.")
@click.option(
    "--max-chars",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_CHARS,
    show_default=True,
    help="Cut tool results to this many characters, tool-call arguments to at most 500 (0: never).",
)
@click.option(
    "--page/--no-page",
    default=None,
    help="Show the output through a pager ($PAGER, else less). Default: when stdout is a terminal.",
)
def show(root: str | None, ref: str, as_json: bool, max_chars: int, page: bool | None) -> None:
    """Print the context the model would see at the session's active leaf.

    First the derived state, the message counts (in the file, as `sessions list` counts them;
    on the active branch; in the context) and the token usage and cost totals where the replies
    carry them. Then the context: the last compaction's summary first, then the kept messages;
    tool results whose call is not in the context and empty assistant messages are left out, as
    they are for the model.
    """
    with opened(open_repo(root), ref) as session:
        context = session.build_context()
        if as_json:
            echo(_dump([encode_message(m) for m in context.messages]))
            return
        from harness import load_registry

        registry = load_registry().registry
        _emit(context_lines(session, context, max_chars=max_chars, registry=registry), page)


def _emit(lines: Iterable[str], page: bool | None) -> None:
    """Print ``lines``, through click's pager when asked (``page``) or, by default, when stdout
    is a terminal; click writes straight through when it is not."""
    if page is None:
        page = sys.stdout.isatty()
    pager = _pager() if page else None
    if pager is not None:
        # click runs $PAGER (its first word found on $PATH); less gets no lesskey file and no
        # input preprocessor: a sandboxed command can write ~/.config/lesskey, whose
        # `#env LESSOPEN=|-CMD` less would run, unsandboxed (review 13, finding 4)
        changes = {
            "PAGER": pager,
            "LESSKEYIN": os.devnull,
            "LESSKEY": os.devnull,
            "LESSSECURE": "1",
        }
        dropped = ("LESSOPEN", "LESSCLOSE", "LESSKEY_CONTENT")
        saved = {k: os.environ.get(k) for k in (*changes, *dropped)}
        os.environ.update(changes)
        for name in dropped:
            os.environ.pop(name, None)
        try:
            click.echo_via_pager(f"{terminal(line)}\n" for line in lines)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        return
    for line in lines:
        echo(line)


def _pager() -> str | None:
    """The pager command to run: ``$PAGER`` (the user's setting), else ``less``, else
    ``more``, its program looked up as the harness looks up ``bash`` and ``git``
    (:func:`program_path`: absolute ``$PATH`` entries only, a root-only copy first), since
    click's own lookup takes the working folder's ``less`` through an empty ``$PATH`` entry,
    or one a sandboxed command left in ``~/.local/bin`` (review 12, finding 6). None when
    none is found: the lines are printed as they are."""
    import shlex

    from .._fs import program_path

    setting = os.environ.get("PAGER", "").strip()
    try:
        choices = [shlex.split(setting)] if setting else [["less"], ["more"]]
    except ValueError:
        return None
    for words in choices:
        if not words:
            continue
        program = words[0] if os.path.isabs(words[0]) else program_path(words[0])
        if os.path.isabs(program):
            return shlex.join([program, *words[1:]])
    return None


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option(
    "--all", "show_all", is_flag=True, help="Also draw `label` and `leaf` entries as entries."
)
def tree(root: str | None, ref: str, show_all: bool) -> None:
    """Print every entry of the session as a tree.

    A first line names the session (its id's first 8 characters, which every command accepts),
    its file, the session it was forked from (for a sub-agent's session: its agent, the parent
    session and the parent's tool call) and its name. Then one line per entry: id, type
    (the role for messages) and a short text (a `task` call's result names the sub-agent's
    session: [agent NAME: session ID]), with markers [compaction], [branch summary],
    [label: X] (a label is shown on the entry it names) and [N branches] where the tree splits.
    Lines on the active path start with `> `, the active leaf's with `* ` (it ends with
    `(leaf)`). A linear path stays at one indent; branches are indented where they split. Label
    entries, leaf moves and a name set off the active path with nothing after it (a fork writes
    its name so) are bookkeeping: not drawn unless --all.
    """
    with opened(open_repo(root), ref) as session:
        view = tree_view(session, show_all=show_all)
        echo(
            f"session {short_id(session.id)}  {shown_path(session)}"
            + origin_note(session)
            + (f"  name: {one_line(session.name)}" if session.name else "")
        )
        for line in view.lines:
            echo(line)
        n = view.hidden_entries
        hidden = (
            f", {n} label/leaf/name {'entry' if n == 1 else 'entries'} not drawn (--all draws them)"
            if n
            else ""
        )
        leaf = session.leaf_id or "(before the first entry)"
        echo(f"({view.shown} entries shown{hidden}; active leaf: {leaf})")


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option(
    "--at",
    "at_entry",
    metavar="ENTRY",
    help="Cut at ENTRY, including it (a checkpoint's id from `harness checkpoints list`: at the "
    "end of its tool batch, its results included).",
)
@click.option(
    "--before", "before_entry", metavar="ENTRY", help="Cut just before ENTRY (at its parent)."
)
@click.option(
    "--tree", "whole_tree", is_flag=True, help="Copy every entry, not only the active branch."
)
@click.option(
    "--cwd",
    metavar="DIR",
    default=None,
    help="The fork's cwd (default: the source's); `.` is the current folder.",
)
@click.option(
    "--workspace",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also make DIR (new or empty) hold the files as they were at the cut, from the "
    "current folder (the session's): a git worktree in a repository, a copy otherwise.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the new session as a JSON object.")
def fork(
    root: str | None,
    ref: str,
    at_entry: str | None,
    before_entry: str | None,
    whole_tree: bool,
    cwd: str | None,
    workspace: Path | None,
    as_json: bool,
) -> None:
    """Copy a session's branch into a new session file under the root.

    Without --at/--before the branch up to the active leaf is copied. The new header links the
    source (parentSession) and the source file is not modified. Prints the new id and path.
    With --workspace the files come along (docs/checkpoints.md): the fork's cwd is that folder.
    """
    if at_entry is not None and before_entry is not None:
        raise click.UsageError("give at most one of --at and --before")
    if whole_tree and (at_entry is not None or before_entry is not None):
        raise click.UsageError("--tree copies every entry; it takes no --at or --before")
    entry_id = at_entry if at_entry is not None else before_entry
    position: ForkPosition | None = (
        "at" if at_entry is not None else "before" if before_entry is not None else None
    )
    repo = open_repo(root)
    if at_entry is not None:
        from .._checkpoints import conversation_landing

        with opened(repo, ref) as session, contextlib.suppress(EntryNotFoundError):
            # At a checkpoint entry: at the end of its tool batch, as `harness rewind` moves
            # the leaf, so the fork's model sees the call's results (issue 26 trial). An
            # unknown entry is the fork's to refuse, as always.
            entry_id = conversation_landing(session, at_entry)
    if workspace is not None:
        if cwd is not None or whole_tree:
            raise click.UsageError("--workspace makes the fork's cwd; give no --cwd or --tree")
        new = _fork_with_files(repo, ref, entry_id, position, workspace)
    else:
        new = run_async(
            repo.fork(
                resolve_ref(repo, ref),
                entry_id=entry_id,
                position=position,
                scope="tree" if whole_tree else "branch",
                # A header's cwd is absolute: a relative one would name another folder later.
                cwd=None if cwd is None else os.path.realpath(cwd),
            )
        )
    with new:
        if as_json:
            echo(
                _dump(
                    {
                        "id": new.id,
                        "path": str(new.path) if new.path is not None else None,
                        "parent_session": new.header.parent_session,
                        "leaf_id": new.leaf_id,
                        "entries": len(new),
                    }
                )
            )
        else:
            echo(f"id: {new.id}")
            echo(f"path: {new.path or describe_store(repo)}")
            if workspace is not None:
                echo(f"workspace: {new.cwd}")


def _fork_with_files(
    repo: SessionRepo,
    ref: str,
    entry_id: str | None,
    position: ForkPosition | None,
    workspace: Path,
) -> Session:
    # The harness is heavy; only fork --workspace needs it.
    from .._checkpoints import CheckpointStore
    from .._harness import AgentHarness
    from ._checkpoints import working_folder_for_files

    with opened(repo, ref) as session:
        # fork's --cwd names the fork's folder, not the one its files are copied from
        advice = (
            f"run this command from {session.cwd!r} (cd there first) to copy its files "
            "(a --workspace given as a relative path is taken from there)"
        )
        here = working_folder_for_files(session, None, advice=advice)
        harness = AgentHarness(
            session=session, cwd=here, checkpoints=CheckpointStore.for_repo(repo), resources=None
        )
        return run_async(harness.fork(repo, entry_id, position=position, workspace=workspace))


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
def delete(root: str | None, ref: str) -> None:
    """Delete a session under the root, and its project folder once that is empty.

    A session that does not exist is an error (exit 1): a mistyped id must not look deleted.
    """
    repo = open_repo(root)
    found = resolve_ref(repo, ref)
    run_async(repo.delete(found))
    echo(f"deleted {found}")
    if not isinstance(repo, JsonlSessionRepo) or not isinstance(found, Path):
        return
    folder = found.parent
    if folder.resolve() != repo.root.resolve() and not any(folder.iterdir()):
        try:
            folder.rmdir()
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            return  # another process wrote a session there meanwhile: the folder stays
        echo(f"removed the empty folder {folder}")


# The commands of `harness sessions` that other modules define (they import the agent loop,
# checkpoints or compaction, which `list` does not need); the summary is the first paragraph of
# each one's help, what `harness sessions --help` lists.
for _name, _target, _summary in (
    (
        "copy",
        "._copy:copy",
        "Copy sessions between stores, line for line (byte-identical on a round trip).",
    ),
    (
        "verify",
        "._maintenance:verify",
        "Check a session file for every problem, without writing to it.",
    ),
    (
        "repair",
        "._maintenance:repair",
        "Rewrite a session file without the problems `verify` reports.",
    ),
    (
        "migrate",
        "._maintenance:migrate",
        "Rewrite a v1/v2 session file as v3, with the same entry ids a read gives.",
    ),
    (
        "stats",
        "._stats:stats",
        "Usage of the sessions under the root (or of ID|PATH...): tokens in, out and cached, "
        "cache hit rate, cost, turns, tool calls and how many failed, compactions; every "
        "branch counts.",
    ),
    (
        "compact",
        "._tree_ops:compact",
        "Compact a session: summarise all but the recent messages into one compaction entry.",
    ),
    (
        "checkout",
        "._tree_ops:checkout",
        "Move the session's active leaf to ENTRY (persisted as a leaf entry).",
    ),
    ("label", "._tree_ops:label", 'Label ENTRY with TEXT ("" clears the label).'),
):
    sessions.add_lazy_command(_name, _target, _summary)
del _name, _target, _summary
