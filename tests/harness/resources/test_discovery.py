"""Discovery of skills on real folder trees: layout, ignore rules, links, every diagnostic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from resource_trees import listing, write_skill

from harness import ResourceOptions, Resources, SkillContext


def names(resources: Resources, cwd: Path) -> list[str]:
    return [r.name for r in listing(resources, cwd).records]


def test_project_skills_are_found_from_cwd_up_to_the_repository_root(project: Path) -> None:
    write_skill(project / "app" / ".agents" / "skills", "near")
    write_skill(project / ".harness" / "skills", "far")
    write_skill(project.parent / ".agents" / "skills", "outside-the-repo")
    resources = Resources(project / "app", ResourceOptions())
    records = listing(resources, project / "app").records
    assert [(r.name, r.scope) for r in records] == [("far", "project"), ("near", "project")]


def test_user_skills_come_from_the_user_config_folder(project: Path, user_config: Path) -> None:
    write_skill(user_config / "skills", "mine")
    assert names(Resources(project, ResourceOptions()), project) == ["mine"]
    assert names(Resources(project, ResourceOptions(discover=False)), project) == []


def test_layout_top_level_md_nested_skills_dot_folders_node_modules(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "outer", body="outer body")
    write_skill(root / "outer", "nested-is-ignored")  # a folder with SKILL.md is not descended
    write_skill(root / "group", "deep")  # plain folders are descended
    write_skill(root / ".hidden", "hidden")
    write_skill(root / "node_modules", "vendored")
    (root / "quick.md").write_text("---\ndescription: A one-file skill\n---\nDo it.\n")
    (root / "group" / "notes.md").write_text("---\ndescription: not top level\n---\n")
    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=[root]))
    assert names(resources, tmp_path) == ["deep", "outer", "quick"]


def test_gitignored_paths_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "kept")
    write_skill(root, "secret")
    write_skill(root / "drafts", "draft")
    (root / ".gitignore").write_text("secret/\n")
    (root / "drafts" / ".gitignore").write_text("draft\n")  # rooted at its own folder
    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=[root]))
    assert names(resources, tmp_path) == ["kept"]


def test_links_loops_and_overlapping_roots_count_each_descriptor_once(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root / "team", "shared")
    os.symlink(root / "team" / "shared", root / "alias-of-shared")  # same file through a link
    os.symlink(root, root / "team" / "loop")  # a loop back to the root
    resources = Resources(
        tmp_path, ResourceOptions(discover=False, skill_roots=[root, root / "team"])
    )
    result = listing(resources, tmp_path)
    assert [r.name for r in result.records] == ["shared"]
    assert [d for d in result.diagnostics if d.code == "collision"] == []


def test_json_frontmatter_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "skills" / "json-skill" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{\n  "name": "json-skill",\n  "description": "From JSON",\n'
        '  "disable-model-invocation": true\n}\n---\nThe body.\n'
    )
    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=[path.parents[1]]))
    (record,) = listing(resources, tmp_path).records
    assert record.description == "From JSON" and record.disable_model_invocation


def test_every_diagnostic_and_the_skill_kept_or_dropped(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "Bad_Name")
    write_skill(root, "no-description", description=None, body="")
    broken = root / "broken" / "SKILL.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("---\nname: [unclosed\n---\nbody\n")
    unreadable = root / "binary" / "SKILL.md"
    unreadable.parent.mkdir()
    unreadable.write_bytes(b"---\nname: binary\ndescription: x\n---\n\xff\xfe")
    write_skill(root, "renamed", folder="folder-name")  # kept, with a warning
    write_skill(root, "flag", extra="disable-model-invocation: maybe\n")  # kept, taken as false
    write_skill(root, "from-body", description=None, body="# Title\n\nFirst paragraph here.\n")
    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=[root]))
    result = listing(resources, tmp_path)
    assert [r.name for r in result.records] == ["flag", "from-body", "renamed"]
    assert result.records[1].description == "First paragraph here."
    codes = sorted((d.code, d.dropped) for d in result.diagnostics)
    assert codes == [
        ("invalid_metadata", False),
        ("invalid_name", False),
        ("invalid_name", True),
        ("missing_description", True),
        ("parse_failed", True),
        ("read_failed", True),
    ]
    by_code = {d.code: d for d in result.diagnostics if d.dropped}
    assert by_code["parse_failed"].path == str(broken)
    assert by_code["read_failed"].path == str(unreadable)


def test_a_collision_in_one_scope_names_winner_loser_and_why(project: Path) -> None:
    near = write_skill(project / "app" / ".agents" / "skills", "dup", "near one")
    far = write_skill(project / ".agents" / "skills", "dup", "far one")
    resources = Resources(project / "app", ResourceOptions())
    result = listing(resources, project / "app")
    assert [(r.name, r.description) for r in result.records] == [("dup", "near one")]
    (collision,) = [d for d in result.diagnostics if d.code == "collision"]
    assert (collision.winner_path, collision.loser_path) == (str(near), str(far))
    assert collision.reason


def test_skill_context_is_what_the_resolver_sees(tmp_path: Path) -> None:
    seen: list[SkillContext] = []

    def resolver(ctx: SkillContext) -> tuple[str, ...]:
        seen.append(ctx)
        return ("extra",)

    resources = Resources(tmp_path, ResourceOptions(discover=False, scopes=resolver))
    listing(resources, tmp_path)
    assert seen and seen[0].cwd == tmp_path


def test_a_folder_of_too_many_skills_is_read_up_to_the_cap_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review 11, finding 11: 20,000 skills made a start take a minute (each is opened, judged
    # by the read rules and parsed). The cap is lowered here: the walk is what is tested.
    from harness._resources import discovery

    monkeypatch.setattr(discovery, "MAX_SKILL_FILES", 5)
    root = tmp_path / "skills"
    for i in range(8):
        write_skill(root, f"s{i}")
    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=[root]))
    result = listing(resources, tmp_path)
    assert [r.name for r in result.records] == [f"s{i}" for i in range(5)]
    [over] = [d for d in result.diagnostics if d.code == "over_budget"]
    assert "only the first 5 skill files" in over.message and over.path == str(root)


def test_a_frontmatter_of_too_many_values_or_characters_is_refused() -> None:
    """Review 12, finding 7: PyYAML (pure Python) took 8 s on one 1 MiB frontmatter of
    `x: [b, b, ...]`. One frontmatter holds at most MAX_NODES values and MAX_CHARS
    characters; composing stops at the cap, before the slow construction."""
    from harness._resources.frontmatter import (
        MAX_CHARS,
        MAX_NODES,
        FrontmatterError,
        split_frontmatter,
    )

    items = ", ".join("b" for _ in range(MAX_NODES))
    with pytest.raises(FrontmatterError, match="more than 2,000 YAML values"):
        split_frontmatter(f"---\nx: [{items}]\n---\nbody")
    with pytest.raises(FrontmatterError, match="longer than 65,536 characters"):
        split_frontmatter(f"---\nx: {'a ' * (MAX_CHARS // 2)}\n---\nbody")
    fine = ", ".join("b" for _ in range(100))
    assert split_frontmatter(f"---\nx: [{fine}]\n---\nbody")[0]["x"] == ["b"] * 100


def test_one_scans_files_share_a_budget_of_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thousand files each just under the caps still cost minutes: a scan's files take
    their YAML from one budget, and those after it is spent are reported, not read. (The
    budget is lowered here: the sharing is what is tested.)"""
    from harness._resources import frontmatter

    monkeypatch.setattr(frontmatter, "SCAN_NODES", 1_000)
    root = tmp_path / "skills"
    items = ", ".join("b" for _ in range(290))  # ~292 values with the name and description
    for i in range(6):
        write_skill(root, f"s{i}", extra=f"x: [{items}]\n")
    resources = Resources(tmp_path, ResourceOptions(discover=False, skill_roots=[root]))
    result = listing(resources, tmp_path)
    assert [r.name for r in result.records] == ["s0", "s1", "s2"]
    spent = [d for d in result.diagnostics if "used up the YAML" in d.message]
    assert [Path(d.path or "").parent.name for d in spent] == ["s3", "s4", "s5"]


def test_the_roots_of_one_scope_share_the_skill_file_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 13, finding 15: project skills are read from `.harness/skills` and
    `.agents/skills` of the working folder and of every folder up to the repository's, and
    each root had its own cap, so a deep working folder multiplied the start's cost. The
    roots of one scope share it (lowered here: the sharing is what is tested)."""
    from harness._resources import discovery

    monkeypatch.setattr(discovery, "MAX_SKILL_FILES", 5)
    roots = []
    for level in range(3):
        root = tmp_path / f"l{level}" / "skills"
        for i in range(4):
            write_skill(root, f"s{level}{i}")
        roots.append(discovery.SkillRoot(root, "project"))
    found, diagnostics, _ = discovery.scan_skills(roots)
    assert len(found) == 5
    over = [d for d in diagnostics if d.code == "over_budget"]
    assert over and "of a scope" in over[0].message
    # another scope has its own
    other = tmp_path / "user" / "skills"
    for i in range(4):
        write_skill(other, f"u{i}")
    found, _, _ = discovery.scan_skills([*roots, discovery.SkillRoot(other, "user")])
    assert len(found) == 9
