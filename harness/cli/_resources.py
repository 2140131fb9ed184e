"""``harness skills`` and ``harness templates``: what an ``AgentHarness`` in this folder would
discover (the working folder up to the repository root, and the user's config folder)."""

from __future__ import annotations

from pathlib import Path

import click

from harness import (
    ResourceDiagnostic,
    ResourceOptions,
    Resources,
    SkillContext,
    SkillListing,
    SkillNotFoundError,
)

from ._common import HarnessGroup, one_line, printable, run_async

__all__ = ["skills", "templates"]

_DIRS = click.option(
    "--dir",
    "dirs",
    metavar="DIR",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Another skills folder (scope 'extra'); may be given several times.",
)


def _resources(dirs: tuple[Path, ...] = ()) -> tuple[Resources, SkillContext]:
    cwd = Path.cwd()
    return Resources(cwd, ResourceOptions(skill_roots=dirs)), SkillContext(session_id=None, cwd=cwd)


def _listing(dirs: tuple[Path, ...]) -> tuple[Resources, SkillContext, SkillListing]:
    resources, ctx = _resources(dirs)
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
def list_skills(dirs: tuple[Path, ...]) -> None:
    """Every skill (name, scope, description, path, what it shadows, whether the model is
    offered it), then every diagnostic of discovery."""
    _, _, listing = _listing(dirs)
    for r in listing.records:
        click.echo(f"{r.name}  [{r.scope}]  {one_line(r.description)}")
        click.echo(f"    path: {printable(r.path or '-')}")
        if r.shadows:
            click.echo(f"    shadows: {', '.join(r.shadows)}")
        if not r.enabled:
            click.echo("    disabled")
        if r.disable_model_invocation:
            click.echo("    not offered to the model (disable-model-invocation)")
    if not listing.records:
        click.echo("no skills found")
    if listing.diagnostics:
        click.echo("diagnostics:")
        for d in listing.diagnostics:
            click.echo(f"  {_diagnostic_line(d)}")


@skills.command("show")
@_DIRS
@click.argument("name")
def show_skill(dirs: tuple[Path, ...], name: str) -> None:
    """Print one skill's record and body (NAME may be an alias)."""
    resources, ctx, listing = _listing(dirs)
    record = next((r for r in listing.records if name in (r.name, *r.aliases)), None)
    body = None if record is None else run_async(resources.load(record.name, record.scope, ctx))
    if record is None or body is None:
        raise SkillNotFoundError([name], [r.name for r in listing.records])
    click.echo(f"name: {record.name}")
    click.echo(f"scope: {record.scope}")
    click.echo(f"description: {one_line(record.description)}")
    click.echo(f"path: {printable(record.path or '-')}")
    if record.aliases:
        click.echo(f"aliases: {', '.join(record.aliases)}")
    if record.shadows:
        click.echo(f"shadows: {', '.join(record.shadows)}")
    click.echo("")
    click.echo(printable(body))


@click.group(cls=HarnessGroup)
def templates() -> None:
    """List the prompt templates an agent here would expand (``/name args``)."""


@templates.command("list")
def list_templates() -> None:
    """Every template: name, argument hint, description, path; then diagnostics."""
    resources, _ = _resources()
    for t in resources.templates:
        hint = f" {t.argument_hint}" if t.argument_hint else ""
        click.echo(f"/{t.name}{hint}  [{t.scope}]  {one_line(t.description)}")
        click.echo(f"    path: {printable(t.path or '-')}")
    if not resources.templates:
        click.echo("no templates found")
    problems = [d for d in resources.diagnostics if d.kind == "template"]
    if problems:
        click.echo("diagnostics:")
        for d in problems:
            click.echo(f"  {_diagnostic_line(d)}")
