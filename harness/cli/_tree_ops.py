"""``harness sessions compact | checkout | label``: change a session's tree from the shell.

Each opens the session, runs the operation through an :class:`~harness.AgentHarness` (so the
same hooks, rules and entries as in a program), and prints what was appended.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from repos import CompactionEntry, Session

from .._checkpoints import CheckpointStore
from .._compaction.settings import CompactionSettings
from .._compaction.summarize import ExtractiveSummarizer
from .._compaction.tokens import context_size
from .._errors import HarnessStateError
from .._harness import AgentHarness
from ._checkpoints import report_rewind, require_checkpoints, undo_hint, working_folder_for_files
from ._common import (
    one_line,
    open_repo,
    resolve_entry,
    root_option,
    run_async,
    shown_leaf,
    spinner,
)
from ._escape import echo
from ._opening import opened
from ._sessions import sessions

__all__ = ["checkout", "compact", "label"]

_REF = "ID|PATH"


@contextmanager
def _reporting(session: Session) -> Iterator[None]:
    """Say what preparing the first write did to the file (a v1/v2 migration, a torn tail set
    aside): the file changed beyond the entry the command appends."""
    seen = len(session.diagnostics)
    try:
        yield
    finally:
        for diag in session.diagnostics[seen:]:
            echo(f"note: {one_line(diag.message)} ({diag.code})", err=True)


def _harness_for(
    session: Session, offline: bool, compaction: CompactionSettings | None = None
) -> AgentHarness:
    """A harness whose summariser is extractive (``--offline``) or the session's own model."""
    if offline:
        return AgentHarness(
            session=session, summarizer=ExtractiveSummarizer(), compaction=compaction
        )
    ref = session.build_context().model
    if ref is None or ref.provider != "anthropic":
        named = "no model" if ref is None else f"{ref.provider}/{ref.model_id}"
        raise HarnessStateError(
            f"this session names {named}, which this command cannot call; use --offline"
        )
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise HarnessStateError(
            f"summarising with {ref.model_id} needs ANTHROPIC_API_KEY; or use --offline"
        )
    from .. import AnthropicModel  # the SDK import is slow; only pay for it here

    return AgentHarness(session=session, model=AnthropicModel(ref.model_id), compaction=compaction)


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option("--instructions", metavar="TEXT", default=None, help="What the summary must keep.")
@click.option(
    "--offline", is_flag=True, help="Summarise without a model (extractive summary, no network)."
)
@click.option(
    "--keep-recent-tokens",
    "keep_recent",
    metavar="N",
    type=click.IntRange(min=0),
    default=None,
    help=f"Keep about N tokens (estimated) of recent messages verbatim "
    f"(default {CompactionSettings().keep_recent_tokens}); a small N compacts a small session.",
)
def compact(
    root: str | None,
    ref: str,
    instructions: str | None,
    offline: bool,
    keep_recent: int | None,
) -> None:
    """Compact a session: summarise all but the recent messages into one compaction entry.

    The cut keeps the last --keep-recent-tokens of the context verbatim (at a turn boundary
    where it can), so a session smaller than that has nothing to compact: give a smaller N.
    Without --offline the summary is written by the session's own (Anthropic) model, which needs
    ANTHROPIC_API_KEY. A pi v1/v2 file is first migrated to v3 (original kept as .v1.bak).
    """
    settings = None if keep_recent is None else CompactionSettings(keep_recent_tokens=keep_recent)
    with opened(open_repo(root), ref) as session:
        harness = _harness_for(session, offline, settings)
        context = session.build_context().messages
        before = len(context)
        size = context_size(context).tokens
        with (
            _reporting(session),
            spinner(f"summarising {before} messages (~{size} tokens)..."),
        ):
            entry = run_async(harness.compact(instructions))
        branch = session.get_branch()
        if entry is None and branch and isinstance(branch[-1], CompactionEntry):
            echo("nothing to compact: the active leaf is a compaction already")
            return
        if entry is None:
            keep = harness.compaction.keep_recent_tokens
            echo(
                f"nothing to compact: keeping the last {keep} tokens verbatim (cut where a "
                f"turn starts) leaves nothing older in the context (~{size} tokens, {before} "
                "messages); --keep-recent-tokens N keeps fewer"
            )
            return
        after = len(session.build_context().messages)
        echo(
            f"compaction {entry.id}: {before} -> {after} messages in context; "
            f"first kept entry {entry.first_kept_entry_id}; tokens before ~{entry.tokens_before}"
        )


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.argument("entry")
@click.option("--summarize", is_flag=True, help="Summarise the branch being left.")
@click.option("--label", "label_text", metavar="TEXT", default=None, help="Label the target.")
@click.option("--offline", is_flag=True, help="Summarise without a model.")
@click.option(
    "--with-files",
    is_flag=True,
    help="Also put the files back as they were at ENTRY (in the session's folder: the current "
    "one, or --cwd); see `harness rewind`.",
)
@click.option("--force", is_flag=True, help="With --with-files: overwrite files changed outside.")
@click.option(
    "--cwd",
    "work_dir",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="With --with-files: the working folder (default: the current one).",
)
def checkout(
    root: str | None,
    ref: str,
    entry: str,
    summarize: bool,
    label_text: str | None,
    offline: bool,
    with_files: bool,
    force: bool,
    work_dir: Path | None,
) -> None:
    """Move the session's active leaf to ENTRY (persisted as a leaf entry).

    Checking out a user message puts the leaf on its parent and prints the message, so it can be
    edited and sent again. --with-files keeps the files in step (docs/checkpoints.md), and ends
    with the command that undoes it. ENTRY may be a unique prefix of an entry id (at least 4
    characters).
    """
    if (force or work_dir is not None) and not with_files:
        raise click.UsageError("--force and --cwd go with --with-files")
    if with_files and summarize and not offline:
        raise click.UsageError("--with-files summarises only with --offline")
    repo = open_repo(root)
    with opened(repo, ref) as session:
        entry = resolve_entry(session, entry, root=root)
        if with_files:
            require_checkpoints(session)
            harness = AgentHarness(
                session=session,
                cwd=working_folder_for_files(session, work_dir),
                checkpoints=CheckpointStore.for_repo(repo),
                resources=None,
                summarizer=ExtractiveSummarizer() if offline else None,
            )
        elif summarize:
            harness = _harness_for(session, offline)
        else:
            harness = AgentHarness(session=session)
        with spinner("summarising the branch..." if summarize else "moving the leaf..."):
            result = run_async(
                harness.navigate_tree(
                    entry, summarize=summarize, label=label_text, with_files=with_files, force=force
                )
            )
        if result.cancelled:
            echo("cancelled by a hook")
            return
        echo(f"leaf: {shown_leaf(result.old_leaf_id)} -> {shown_leaf(result.new_leaf_id)}")
        if result.summary_entry_id:
            echo(f"branch summary: {result.summary_entry_id}")
        if result.files is not None:
            report_rewind(result.files)
        if result.editor_text is not None:
            echo("message to edit and resend:")
            echo(result.editor_text)
        if with_files and result.old_leaf_id is not None:
            # The rewind is an entry: rewinding (files and conversation) to the old leaf,
            # written before it, gives back both as they were.
            undo_hint(root, ref, work_dir, [result.old_leaf_id])


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.argument("entry")
@click.argument("text")
def label(root: str | None, ref: str, entry: str, text: str) -> None:
    """Label ENTRY with TEXT ("" clears the label)."""
    with opened(open_repo(root), ref) as session:
        leaf = session.leaf_id
        with _reporting(session):
            written = session.set_label(entry, text or None)
            session.move_to(leaf)  # a label entry must not become the active leaf
        echo(f"label {written.id}: {entry} = {text!r}" if text else f"cleared {entry}")
