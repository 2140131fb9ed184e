"""Scopes, precedence with shadows, extra/internal roots, and providers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from resource_trees import listing, write_skill

from harness import (
    CompositeSkillProvider,
    ResourceOptions,
    Resources,
    Skill,
    SkillContext,
    SkillSummary,
    StaticSkillProvider,
)


def test_precedence_project_user_extra_and_the_shadows(
    project: Path, user_config: Path, tmp_path: Path
) -> None:
    project_path = write_skill(project / ".agents" / "skills", "review", "project review")
    user_path = write_skill(user_config / "skills", "review", "user review")
    write_skill(tmp_path / "extra", "review", "extra review")
    write_skill(tmp_path / "extra", "lint", "extra lint")
    resources = Resources(project, ResourceOptions(skill_roots=[tmp_path / "extra"]))
    result = listing(resources, project)
    by_name = {r.name: r for r in result.records}
    assert by_name["review"].description == "project review"
    assert by_name["review"].shadows == ("user", "extra")
    assert by_name["lint"].shadows == ()
    collisions = [d for d in result.diagnostics if d.code == "collision"]
    assert {(d.winner_path, d.loser_path) for d in collisions} == {
        (str(project_path), str(user_path)),
        (str(project_path), str(tmp_path / "extra" / "review" / "SKILL.md")),
    }
    assert all("outranks" in (d.reason or "") for d in collisions)


def test_extra_roots_from_a_resolver_are_resolved_again_on_refresh(tmp_path: Path) -> None:
    roots: list[Path] = [tmp_path / "a"]
    write_skill(tmp_path / "a", "first")
    write_skill(tmp_path / "b", "second")
    calls: list[int] = []

    def resolver() -> list[Path]:
        calls.append(1)
        return list(roots)

    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=resolver))
    ctx = SkillContext(session_id=None, cwd=tmp_path)
    assert [r.name for r in listing(resources, tmp_path).records] == ["first"]
    roots[:] = [tmp_path / "b"]
    import asyncio

    report = asyncio.run(resources.refresh(ctx))
    assert (report.added, report.removed) == (("second",), ("first",))
    assert len(calls) == 2


def test_a_resolver_that_raises_is_a_diagnostic_and_refresh_keeps_the_catalog(
    tmp_path: Path,
) -> None:
    import asyncio

    write_skill(tmp_path / "a", "kept")
    fail = False

    def resolver() -> list[Path]:
        if fail:
            raise OSError("managed storage is offline")
        return [tmp_path / "a"]

    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=resolver))
    ctx = SkillContext(session_id=None, cwd=tmp_path)
    fail = True
    report = asyncio.run(resources.refresh(ctx))
    assert report.error is not None and "offline" in report.error
    result = listing(resources, tmp_path)
    assert [r.name for r in result.records] == ["kept"]
    assert [d.code for d in result.diagnostics] == ["root_failed"]


def test_a_resolver_failing_at_construction_is_reported(tmp_path: Path) -> None:
    def resolver() -> list[Path]:
        raise RuntimeError("no roots yet")

    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=resolver))
    result = listing(resources, tmp_path)
    assert result.records == () and [d.code for d in result.diagnostics] == ["root_failed"]


def test_internal_skills_are_off_by_default_and_outranked_by_user_ones(
    project: Path, user_config: Path, tmp_path: Path
) -> None:
    internal = tmp_path / "package-skills"
    write_skill(internal, "setup", "internal setup")
    write_skill(internal, "only-internal", "internal only")
    off = Resources(project, ResourceOptions(internal_skill_roots=[internal]))
    assert listing(off, project).records == ()
    write_skill(user_config / "skills", "setup", "user setup")
    on = Resources(project, ResourceOptions(internal_skill_roots=[internal], internal_skills=True))
    by_name = {r.name: r for r in listing(on, project).records}
    assert by_name["setup"].description == "user setup"
    assert by_name["setup"].shadows == ("internal",)
    assert by_name["only-internal"].scope == "internal"


class _Sloppy:
    """A provider whose filter is broken: it returns every scope whatever it is asked."""

    def __init__(self, skills: Sequence[Skill]) -> None:
        self.skills = list(skills)

    async def list(self, scopes: Sequence[str], ctx: SkillContext) -> Sequence[SkillSummary]:
        return self.skills

    async def load(self, name: str, scope: str, ctx: SkillContext) -> str | None:
        return next((s.body for s in self.skills if s.name == name), None)


def test_results_outside_the_requested_scopes_are_dropped(tmp_path: Path) -> None:
    sloppy = _Sloppy(
        [
            Skill(name="mine", description="d", scope="actor:ann", body="b"),
            Skill(name="theirs", description="d", scope="actor:bob", body="b"),
        ]
    )
    resources = Resources(
        tmp_path,
        ResourceOptions(
            discover=False, providers=[sloppy], scopes=lambda ctx: ("actor:ann", "global")
        ),
    )
    assert [r.name for r in listing(resources, tmp_path).records] == ["mine"]


async def test_static_and_composite_providers_earlier_wins_a_same_scope_tie() -> None:
    first = StaticSkillProvider([Skill(name="x", description="first", scope="global", body="1")])
    second = StaticSkillProvider(
        [
            Skill(name="x", description="second", scope="global", body="2"),
            Skill(name="y", description="only second", scope="global", body="3"),
        ]
    )
    composite = CompositeSkillProvider([first, second])
    ctx = SkillContext(session_id=None, cwd=Path("."))
    resources = Resources(
        Path("."),
        ResourceOptions(discover=False, providers=[composite], scopes=lambda c: ("global",)),
    )
    result = await resources.listing(ctx)
    assert [(r.name, r.description) for r in result.records] == [
        ("x", "first"),
        ("y", "only second"),
    ]
    (tie,) = [d for d in result.diagnostics if d.code == "collision"]
    assert "same scope" in (tie.reason or "")
    assert await composite.load("x", "global", ctx) == "1"
    assert await composite.load("y", "global", ctx) == "3"
    assert await composite.load("y", "other", ctx) is None


@pytest.mark.parametrize("order", [("tenant", "global"), ("global", "tenant")])
async def test_a_custom_scope_resolver_decides_precedence(order: tuple[str, str]) -> None:
    provider = StaticSkillProvider(
        [
            Skill(name="style", description="tenant style", scope="tenant", body="t"),
            Skill(name="style", description="global style", scope="global", body="g"),
        ]
    )
    resources = Resources(
        Path("."), ResourceOptions(discover=False, providers=[provider], scopes=lambda c: order)
    )
    (record,) = (await resources.listing(SkillContext(session_id=None, cwd=Path(".")))).records
    assert record.scope == order[0] and record.shadows == (order[1],)


async def test_a_provider_that_raises_is_reported_and_left_out(tmp_path: Path) -> None:
    class Broken:
        async def list(self, scopes: Sequence[str], ctx: SkillContext) -> Sequence[SkillSummary]:
            raise ConnectionError("db down")

        async def load(self, name: str, scope: str, ctx: SkillContext) -> str | None:
            return None

    write_skill(tmp_path / "s", "fine")
    resources = Resources(
        tmp_path,
        ResourceOptions(discover=False, skill_roots=[tmp_path / "s"], providers=[Broken()]),
    )
    result = await resources.listing(SkillContext(session_id=None, cwd=tmp_path))
    assert [r.name for r in result.records] == ["fine"]
    assert [d.code for d in result.diagnostics] == ["provider_failed"]
