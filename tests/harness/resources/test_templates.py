"""Prompt templates: discovery, one-pass substitution, ``/name args`` and prompt_from_template."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import (
    AgentHarness,
    FauxModel,
    JsonlSessionRepo,
    PromptTemplate,
    ResourceOptions,
    TemplateNotFoundError,
    UserMessage,
    expand_template,
    parse_args,
)


@pytest.mark.parametrize(
    ("template", "args", "expected"),
    [
        ("Fix $1 then $2", ["a", "b"], "Fix a then b"),
        ("$1 and $3", ["a"], "a and "),  # missing = empty
        ("all: $@ / $ARGUMENTS", ["x", "y z"], "all: x y z / x y z"),
        ("${@:2}", ["a", "b", "c"], "b c"),
        ("${@:0}", ["a", "b"], "a b"),  # 0 counts as 1
        ("${@:2:1}|${@:1:2}", ["a", "b", "c"], "b|a b"),
        ("$10", [str(i) for i in range(1, 11)], "10"),  # multi-digit
        ("costs $$5 for $1", ["you"], "costs $5 for you"),
        ("$1.50", ["x"], "x.50"),
    ],
)
def test_substitution(template: str, args: list[str], expected: str) -> None:
    assert expand_template(template, args) == expected


def test_an_argument_holding_placeholders_is_inserted_literally() -> None:
    # pi expands in several passes, so "$ARGUMENTS" in an argument would be expanded again.
    args = ["$ARGUMENTS and $1", "${@:1}", "$$"]
    assert expand_template("A=$1 B=$2 C=$3 ALL=$@", args) == (
        "A=$ARGUMENTS and $1 B=${@:1} C=$$ ALL=$ARGUMENTS and $1 ${@:1} $$"
    )
    assert expand_template("[$ARGUMENTS]", '"$1 $2" $ARGUMENTS') == "[$1 $2 $ARGUMENTS]"


def test_quoted_arguments() -> None:
    assert parse_args("""one "two words" 'three four' five""") == [
        "one",
        "two words",
        "three four",
        "five",
    ]
    assert parse_args("") == []
    assert parse_args('unclosed "quote') == ["unclosed", '"quote']


async def test_templates_are_found_and_expanded_from_a_prompt(
    project: Path, user_config: Path, tmp_path: Path
) -> None:
    prompts = project / ".agents" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "fix.md").write_text(
        "---\ndescription: Fix an issue\nargument-hint: [issue, area]\n---\nFix issue $1 in $2.\n"
    )
    (prompts / "plain.md").write_text("Summarise the repository in one paragraph please now\n")
    (user_config / "prompts").mkdir(parents=True)
    (user_config / "prompts" / "fix.md").write_text("user fix $1\n")  # shadowed by the project's
    (user_config / "prompts" / "hello.md").write_text("Hello $ARGUMENTS\n")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    model = FauxModel(["a", "b", "c", "d"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model)
    by_name = {t.name: t for t in h.templates}
    assert set(by_name) == {"fix", "plain", "hello"}
    assert by_name["fix"] == PromptTemplate(
        name="fix",
        description="Fix an issue",
        content="Fix issue $1 in $2.",
        argument_hint="[issue] [area]",
        path=str(prompts / "fix.md"),
        scope="project",
    )
    assert (
        by_name["plain"].description == "Summarise the repository in one paragraph please now"[:60]
    )
    assert h.get_template("hello").scope == "user"

    await h.prompt('/fix 42 "the parser"')
    await h.prompt_from_template("hello", ["$1", "world"])
    await h.prompt("/unknown stays as written")
    await h.prompt("/fix")
    texts = [m.text for m in session.build_context().messages if isinstance(m, UserMessage)]
    assert texts == [
        "Fix issue 42 in the parser.",
        "Hello $1 world",
        "/unknown stays as written",
        "Fix issue  in .",
    ]
    with pytest.raises(TemplateNotFoundError) as missing:
        await h.prompt_from_template("nope")
    assert missing.value.code == "template_not_found" and "fix" in missing.value.known
    session.close()


async def test_extra_template_roots(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "go.md").write_text("Go $1\n")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))
    h = AgentHarness(
        session=session,
        cwd=session.cwd,
        resources=ResourceOptions(discover=False, template_roots=[tmp_path / "t"]),
    )
    assert h.get_template("go").expand("now") == "Go now"
    session.close()


def test_a_folder_of_too_many_templates_is_read_up_to_the_cap_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 12, finding 7: a project's 20,000 templates made every start take 30 s (each is
    opened, checked and parsed). The cap is lowered here: the cut is what is tested."""
    from harness._resources import templates

    monkeypatch.setattr(templates, "MAX_TEMPLATE_FILES", 5)
    folder = tmp_path / "prompts"
    folder.mkdir()
    for i in range(8):
        (folder / f"t{i}.md").write_text(f"template {i}\n")
    found, diagnostics = templates.scan_templates([(folder, "project", tmp_path)])
    assert [t.name for t in found] == [f"t{i}" for i in range(5)]
    [over] = [d for d in diagnostics if d.code == "over_budget"]
    assert "only the first 5 templates" in over.message and over.path == str(folder)
