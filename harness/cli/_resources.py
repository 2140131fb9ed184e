"""``harness skills`` and ``harness templates``: what an ``AgentHarness`` in a folder (the current
one, or ``--cwd DIR``) would discover (that folder up to the repository root, and the user's
config folder)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from harness import (
    ResourceDiagnostic,
    ResourceOptions,
    Resources,
    SkillContext,
    SkillListing,
    SkillNotFoundError,
)

from ._common import HarnessGroup, one_line, run_async
from ._escape import echo

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["skills", "templates"]

_DIRS = click.option(
    "--dir",
    "dirs",
    metavar="DIR",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Another skills folder (scope 'extra'); may be given several times.",
)


def _cwd_option(func: F) -> F:
    """``--cwd DIR``: discover as an agent working in DIR would (default: the current folder)."""
    return click.option(
        "--cwd",
        "cwd",
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="Discover as an agent working in DIR would (default: the current folder).",
    )(func)


def _resources(cwd: Path | None, dirs: tuple[Path, ...] = ()) -> tuple[Resources, SkillContext]:
    where = (cwd or Path.cwd()).absolute()
    return (
        Resources(where, ResourceOptions(skill_roots=dirs)),
        SkillContext(session_id=None, cwd=where),
    )


def _listing(
    cwd: Path | None, dirs: tuple[Path, ...]
) -> tuple[Resources, SkillContext, SkillListing]:
    resources, ctx = _resources(cwd, dirs)
    return resources, ctx, run_async(resources.listing(ctx))


def _diagnostic_line(d: ResourceDiagnostic) -> str:
    line = f"{d.code}: {one_line(d.message)}"
    if d.code == "collision":
        line += f" [winner: {d.winner_path}; loser: {d.loser_path}; why: {d.reason}]"
    return line


@click.group(cls=HarnessGroup)
def skills() -> None:
    """List and show the skills an agent here would be offered."""


@skills.command("list")
@_DIRS
@_cwd_option
def list_skills(dirs: tuple[Path, ...], cwd: Path | None) -> None:
    """Every skill (name, scope, description, path, what it shadows, whether the model is
    offered it), then every diagnostic of discovery."""
    _, _, listing = _listing(cwd, dirs)
    for r in listing.records:
        echo(f"{one_line(r.name)}  [{r.scope}]  {one_line(r.description)}")
        echo(f"    path: {r.path or '-'}")
        if r.shadows:
            echo(f"    shadows: {one_line(', '.join(r.shadows))}")
        if not r.enabled:
            echo("    disabled")
        if r.disable_model_invocation:
            echo("    not offered to the model (disable-model-invocation)")
    if not listing.records:
        echo("no skills found")
    if listing.diagnostics:
        echo("diagnostics:")
        for d in listing.diagnostics:
            echo(f"  {_diagnostic_line(d)}")


@skills.command("show")
@_DIRS
@_cwd_option
@click.argument("name")
def show_skill(dirs: tuple[Path, ...], cwd: Path | None, name: str) -> None:
    """Print one skill's record and body (NAME may be an alias)."""
    resources, ctx, listing = _listing(cwd, dirs)
    record = next((r for r in listing.records if name in (r.name, *r.aliases)), None)
    body = None if record is None else run_async(resources.load(record.name, record.scope, ctx))
    if record is None or body is None:
        raise SkillNotFoundError([name], [r.name for r in listing.records])
    echo(f"name: {one_line(record.name)}")
    echo(f"scope: {record.scope}")
    echo(f"description: {one_line(record.description)}")
    echo(f"path: {record.path or '-'}")
    if record.aliases:
        echo(f"aliases: {one_line(', '.join(record.aliases))}")
    if record.shadows:
        echo(f"shadows: {one_line(', '.join(record.shadows))}")
    echo("")
    echo(body)


@click.group(cls=HarnessGroup)
def templates() -> None:
    """List and show the prompt templates an agent here would expand (``/name args``)."""


@templates.command("list")
@_cwd_option
def list_templates(cwd: Path | None) -> None:
    """Every template: name, argument hint, description, path; then diagnostics."""
    resources, _ = _resources(cwd)
    for t in resources.templates:
        hint = f" {one_line(t.argument_hint)}" if t.argument_hint else ""
        echo(f"/{one_line(t.name)}{hint}  [{t.scope}]  {one_line(t.description)}")
        echo(f"    path: {t.path or '-'}")
    if not resources.templates:
        echo("no templates found")
    problems = [d for d in resources.diagnostics if d.kind == "template"]
    if problems:
        echo("diagnostics:")
        for d in problems:
            echo(f"  {_diagnostic_line(d)}")


@templates.command("show")
@_cwd_option
@click.argument("name")
@click.argument("args", nargs=-1)
def show_template(cwd: Path | None, name: str, args: tuple[str, ...]) -> None:
    """Print one template's record and body (NAME without the leading /); with ARGS, also the
    prompt `/NAME ARGS` expands to."""
    resources, _ = _resources(cwd)
    template = resources.template(name.removeprefix("/"))
    echo(f"name: {one_line(template.name)}")
    echo(f"scope: {template.scope}")
    echo(f"description: {one_line(template.description)}")
    if template.argument_hint:
        echo(f"arguments: {one_line(template.argument_hint)}")
    echo(f"path: {template.path or '-'}")
    echo("")
    echo(template.content)
    if args:
        echo("")
        echo(f"/{one_line(template.name)} {one_line(' '.join(args))} expands to:")
        echo(template.expand(list(args)))
