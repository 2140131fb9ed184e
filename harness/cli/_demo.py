"""``harness demo``: run the offline demo and show what it wrote."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click

from .._demo import run_demo
from ._common import run_async, short_id
from ._escape import echo
from ._render import tree_view

__all__ = ["demo"]


@click.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the demo's sessions and workspace, kept (default: a temporary folder, "
    "removed at the end unless --keep).",
)
@click.option("--keep", is_flag=True, help="Keep the temporary folder (without --root).")
def demo(root: Path | None, keep: bool) -> None:
    """Run an offline demo: a blocked tool call, a redacted tool result, a fork.

    Uses the scripted faux model, so it needs no network and no API key. Prints every event as it
    fires, then the session tree, the fork's tree and the files written. Without --root it works
    in a new temporary folder, says which, and removes it at the end unless --keep.
    """
    temporary = root is None
    folder = root if root is not None else Path(tempfile.mkdtemp(prefix="harness-demo-"))
    echo(f"Writing to {folder}")
    try:
        session_id = _run(folder)
    finally:
        if temporary and not keep:
            shutil.rmtree(folder)
            echo(f"\nRemoved {folder} (--keep keeps it; --root DIR writes elsewhere).")
    if not temporary or keep:
        echo(f"\nTry: harness sessions tree --root {folder / 'sessions'} {short_id(session_id)}")


def _run(folder: Path) -> str:
    """Run the demo in ``folder`` and print what it wrote; returns the session's id."""
    result = run_async(run_demo(folder, echo))
    with result.session as session, result.fork as fork:
        for title, s in (("Session", session), ("Fork (cut before the second prompt)", fork)):
            echo(f"\n{title} {s.id}")
            for line in tree_view(s).lines:
                echo(f"  {line}")
        echo(f"\nSession file: {session.path}")
        echo(f"Fork file:    {fork.path}  (parentSession -> {fork.header.parent_session})")
        echo(f"Workspace:    {result.workspace}")
        return session.id
