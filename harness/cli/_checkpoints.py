"""``harness rewind`` and ``harness checkpoints gc``; the ``--checkpoints`` option of ``run``
and ``chat``; the workspace check shared with ``sessions fork --workspace`` and
``sessions checkout --with-files``.

Files are restored in the working folder (the current folder, or ``--cwd DIR``), never in a
folder the session file names: when the session was recorded in another folder the command
refuses (``workspace_mismatch``) rather than write one folder's files into another.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click

from repos import CustomEntry, JsonlSessionRepo, Session

from .._checkpoints import (
    REWIND_ENTRY,
    CheckpointStore,
    NoCheckpointsError,
    RewindResult,
    WorkspaceMismatchError,
    checkpoints_setting,
    has_records,
    read_records,
    referenced_blobs,
)
from .._harness import AgentHarness
from ._common import (
    HarnessGroup,
    file_name,
    one_line,
    open_repo,
    resolve_entry,
    root_option,
    run_async,
    shown_leaf,
)
from ._escape import echo, json_line
from ._opening import opened

__all__ = [
    "checkpoint_option",
    "checkpoints_group",
    "report_rewind",
    "require_checkpoints",
    "rewind",
    "undo_hint",
    "use_checkpoints",
    "working_folder_for_files",
]


def checkpoint_option(command: Callable[..., None]) -> Callable[..., None]:
    """``--checkpoints/--no-checkpoints`` (passed as ``checkpoints``: None when not given)."""
    return click.option(
        "--checkpoints/--no-checkpoints",
        "checkpoints",
        default=None,
        help="Record what each tool call changes, so files can be rewound "
        '(default: "checkpoints" in the user settings, else off).',
    )(command)


def use_checkpoints(flag: bool | None) -> bool:
    """The flag when given, else the user settings' ``checkpoints`` key.

    Raises:
        click.UsageError: the settings file cannot be read.
    """
    if flag is not None:
        return flag
    try:
        return checkpoints_setting()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def working_folder_for_files(
    session: Session, work_dir: Path | None, *, advice: str | None = None
) -> Path:
    """The folder whose files a command restores: ``--cwd`` or the current folder, which must
    be the one the session recorded (its header's ``cwd``, a fork's workspace). ``advice``:
    what the error tells the user to do, for a command without ``--cwd``.

    Raises:
        WorkspaceMismatchError: the session was recorded in another folder.
    """
    here = Path(os.path.realpath(work_dir or Path.cwd()))
    recorded = session.cwd
    # "." or a relative path would be the current folder, wherever the command runs.
    if not recorded or not os.path.isabs(recorded) or os.path.realpath(recorded) != str(here):
        raise WorkspaceMismatchError(recorded or "(no folder)", str(here), advice=advice)
    return here


def require_checkpoints(session: Session) -> None:
    """Refuse to rewind the files of a session that holds no checkpoint at all (recorded
    without them): saying so, and how to record them, rather than "nothing to change".

    Raises:
        NoCheckpointsError: it holds none.
    """
    if not has_records(session):
        raise NoCheckpointsError()


def report_rewind(result: RewindResult) -> None:
    """One line per file restored, removed or skipped, then the rewind entry."""
    for path in result.restored:
        echo(f"restored {file_name(path)}")
    for path in result.removed:
        echo(f"removed {file_name(path)}")
    for skipped in result.skipped:
        echo(f"skipped {file_name(skipped.path)}: {skipped.reason}", err=True)
    for problem in result.problems:
        echo(f"note: a checkpoint change was not read: {problem}", err=True)
    for missed in result.missed:
        echo(
            f"not restored {file_name(missed.path)}: its change was not recorded ({missed.reason})",
            err=True,
        )
    if result.entry_id is None:
        echo(
            "files: nothing recorded to change; what was not recorded cannot be restored"
            if result.missed
            else "files: nothing to change"
        )
    else:
        echo(f"rewind entry: {result.entry_id}")


@click.command()
@root_option
@click.argument("ref", metavar="ID|PATH")
@click.argument("entry")
@click.option("--files-only", is_flag=True, help="Restore the files; the conversation stays.")
@click.option(
    "--conversation-only", is_flag=True, help="Move the conversation's leaf; the files stay."
)
@click.option("--both", is_flag=True, help="Files and conversation (default).")
@click.option("--force", is_flag=True, help="Overwrite files changed outside the session.")
@click.option(
    "--cwd",
    "work_dir",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The working folder (default: the current folder); must be the session's.",
)
def rewind(
    root: str | None,
    ref: str,
    entry: str,
    files_only: bool,
    conversation_only: bool,
    both: bool,
    force: bool,
    work_dir: Path | None,
) -> None:
    """Put the files (and the conversation) back as they were at ENTRY.

    Every file the session's checkpoints recorded is restored as it was when ENTRY was
    written (an id `harness checkpoints list` or `sessions tree` prints, or a unique prefix of
    one, 4 characters at least; a checkpoint's id gives the files after that change): created
    files are removed, deleted ones restored. A file changed since by
    something outside the session makes the rewind refuse, naming it (--force overwrites it).
    The rewind is recorded as an entry: rewinding to the entry before it undoes it (the
    command ends with the one that does). With the conversation, the leaf moves as `sessions
    checkout` moves it: for a checkpoint id, to the end of its tool batch (the tool results
    included), the files following it there. A session recorded without checkpoints has no
    files to rewind (record them with `harness run --checkpoints`): only --conversation-only
    works there.
    """
    if files_only + conversation_only + both > 1:
        raise click.UsageError("give at most one of --files-only, --conversation-only and --both")
    what: Literal["files", "conversation", "both"] = (
        "files" if files_only else "conversation" if conversation_only else "both"
    )
    repo = open_repo(root)
    with opened(repo, ref) as session:
        entry = resolve_entry(session, entry, root=root)
        if what != "conversation":
            require_checkpoints(session)
        if what == "conversation":
            harness = AgentHarness(session=session, resources=None)
            result = run_async(harness.navigate_tree(entry))
        else:
            cwd = working_folder_for_files(session, work_dir)
            harness = AgentHarness(
                session=session, cwd=cwd, checkpoints=CheckpointStore.for_repo(repo), resources=None
            )
            if what == "files":
                files = run_async(harness.rewind_files(entry, force=force))
                report_rewind(files)
                # The files as at the leaf the rewind started from: as they were.
                if files.undo_id is not None:
                    undo_hint(root, ref, work_dir, [files.undo_id, "--files-only"])
                return
            result = run_async(harness.navigate_tree(entry, with_files=True, force=force))
        if result.cancelled:
            echo("cancelled by a hook")
            return
        echo(f"leaf: {shown_leaf(result.old_leaf_id)} -> {shown_leaf(result.new_leaf_id)}")
        if result.files is not None:
            report_rewind(result.files)
        if result.editor_text is not None:
            echo("message to edit and resend:")
            echo(result.editor_text)
        if result.old_leaf_id is not None:
            # The old leaf was written before the rewind: its files are those before it.
            flags = ["--conversation-only"] if what == "conversation" else []
            undo_hint(root, ref, work_dir, [result.old_leaf_id, *flags])


def undo_hint(root: str | None, ref: str, work_dir: Path | None, words: list[str]) -> None:
    """Print ``to undo: harness rewind ...``: the command, as the user would type it, that
    rewinds ``ref`` (in ``--root`` and ``--cwd`` as given) with ``words`` (the entry to go
    back to, then flags)."""
    again = ["harness", "rewind", *(["--root", root] if root else []), ref]
    if work_dir is not None:
        again += ["--cwd", str(work_dir)]
    echo(f"to undo: {shlex.join([*again, *words])}")


@click.group("checkpoints", cls=HarnessGroup)
def checkpoints_group() -> None:
    """The checkpoint store: file contents the sessions' checkpoints refer to."""


@checkpoints_group.command("list")
@root_option
@click.argument("ref", metavar="ID|PATH")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of entries, same keys each.")
def list_checkpoints(root: str | None, ref: str, as_json: bool) -> None:
    """The checkpoint and rewind entries of a session, in file order: each entry's id, what
    wrote it (a tool, or a rewind), the files it changed and the changes it could not record
    (which no rewind restores). `harness rewind ID ENTRY` puts
    the files back as they were at an entry: an id listed here gives the files after its
    change; the id listed before it (for the first, the session's first entry), before it."""
    with opened(open_repo(root), ref) as session:
        records, problems = read_records(session)
        rows: list[dict[str, Any]] = []
        for record in records:
            entry = session.get_entry(record.entry_id)
            data = entry.data if isinstance(entry, CustomEntry) else None
            tool = data.get("toolName") if isinstance(data, dict) else None
            scan = data.get("scan") if isinstance(data, dict) else None
            rows.append(
                {
                    "entry_id": record.entry_id,
                    "kind": "rewind"
                    if isinstance(entry, CustomEntry) and entry.custom_type == REWIND_ENTRY
                    else "checkpoint",
                    "tool_name": tool if isinstance(tool, str) else None,
                    "scan": scan if isinstance(scan, str) else None,
                    "paths": [change.path for change in record.changes],
                    "missed": [m.to_json() for m in record.missed],
                    "complete": record.complete,
                    "unfinished": record.unfinished,
                }
            )
    for problem in problems:
        echo(f"note: a checkpoint change was not read: {problem}", err=True)
    if as_json:
        echo(json_line(rows, indent=True))
        return
    if not rows:
        echo(
            "no checkpoints in this session: it was recorded without them (harness run "
            "--checkpoints records them), or no tool call of it changed a file",
            err=True,
        )
    for row in rows:
        what = row["tool_name"] or row["kind"]
        paths = ", ".join(file_name(p) for p in row["paths"]) or "(none)"
        echo(f"{row['entry_id']}  {what}: {paths}")
        for missed in row["missed"]:
            echo(f"    not recorded: {file_name(missed['path'])}: {missed['reason']}")
        if row["unfinished"]:
            echo(
                "    killed midway (some files not written): a rewind to the entry before it "
                "gives back what it overwrote"
            )
        if not row["complete"] and row["scan"] != "path":
            # A write or edit scans nothing: its missed line says why its file was not stored.
            echo("    the scan did not see everything: changes past its cap are not recorded")


@checkpoints_group.command()
@root_option
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    default=None,
    help="Bring the store under N bytes (default: its cap, 2 GiB); the least recently used "
    "contents go first, those no session refers to before any other.",
)
@click.option(
    "--min-age",
    "min_age_s",
    type=click.FloatRange(min=0),
    default=3600.0,
    show_default=True,
    help="Keep contents no session refers to yet if newer than this many seconds (a run may "
    "be about to refer to them).",
)
def gc(root: str | None, max_bytes: int | None, min_age_s: float) -> None:
    """Remove contents no session under the root refers to, then the least recently used
    ones while the store is over its cap. Prints what was removed and what is left.

    For a database store the contents are in the user data folder's store, which other stores'
    sessions use too: there only the cap removes contents."""
    repo = open_repo(root, must_exist=True)
    # Where the sessions' checkpoints went: beside a folder of files, else the user's.
    store = CheckpointStore.for_repo(repo)
    # The user data folder's store is shared (every database store, code's checkpoints=True):
    # this store's sessions do not say what the others need, so only the cap removes blobs.
    shared = store.root == CheckpointStore.default().root
    referenced: set[str] = set()
    for info in run_async(repo.list()):
        with opened(repo, str(info.path or info.id)) as session:
            referenced |= referenced_blobs(session)
    # A session file the listing could not read may still need contents (once repaired):
    # what no session refers to is only "unreferenced" when every session was read.
    unread = repo.list_problems if isinstance(repo, JsonlSessionRepo) else ()
    for path, reason in unread:
        echo(f"warning: {path}: not read ({one_line(reason)}); keeping what it may need", err=True)
    report = store.gc(
        referenced,
        max_bytes=max_bytes,
        min_age_s=min_age_s,
        remove_unreferenced=not shared and not unread,
    )
    if shared:
        echo(
            f"{store.root} is shared with other stores' sessions: only the cap removes from it",
            err=True,
        )
    elif unread:
        echo("removed 0 unreferenced: some session files could not be read", err=True)
    else:
        echo(f"removed {report.removed} unreferenced ({report.removed_bytes} bytes)")
    if report.evicted:
        echo(
            f"removed {report.evicted} still referenced, to get under the cap "
            f"({report.evicted_bytes} bytes): those checkpoints can no longer be restored",
            err=True,
        )
    echo(f"kept {report.kept} ({report.kept_bytes} bytes) in {store.root}")
