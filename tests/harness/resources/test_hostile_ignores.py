"""A skills folder's ``.gitignore`` that cannot be compiled (review 9, finding 11).

A cloned repository's ``.agents/skills/.gitignore`` of one 40 KB line (``*a*a...``) or 5,000
ordinary lines made RE2 refuse ``pathspec``'s pattern set, and the uncaught ``re2.error`` killed
``harness run``, ``chat``, ``rpc`` and ``skills list`` at start. Now such a file is a diagnostic
naming it, and the folder is listed without it (its patterns are not applied, whole).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from resource_trees import listing, write_skill

from harness import AgentHarness, FauxModel, JsonlSessionRepo, ResourceOptions, Resources
from harness._ignore import MAX_IGNORE_BYTES, MAX_IGNORE_BYTES_PER_WALK

LIMIT_S = 60.0

# Each spelling says `secret/` too: when the file cannot be used, the `secret` skill is listed.
UNUSABLE: dict[str, tuple[bytes, str]] = {
    "huge-line": (b"*a" * 20_000 + b"\nsecret/\n", "a pattern is longer than 1024 characters"),
    "many-lines": (
        b"".join(f"pat{i}*/x{i}\n".encode() for i in range(5000)) + b"secret/\n",
        "larger than 65536 bytes",
    ),
    "many-short-lines": (b"".join(b"p%d\n" % i for i in range(5000)) + b"secret/\n", "5001"),
    "set-too-large": (
        b"".join(("*a" * 250 + str(i) + "\n").encode() for i in range(100)) + b"secret/\n",
        "RE2 refuses them",
    ),
    "trailing-backslash": (b"secret/\nfoo\\\n", "a pattern is invalid"),
    "lone-bang": (b"secret/\n!\n", "a pattern is invalid"),
    "reversed-range": (b"secret/\n[z-a]\n", "a pattern is invalid"),
    "unclosed-class": (b"secret/\n[[:alpha:]\n", "RE2 refuses them"),
    "invalid-utf-8": (b"\xff\xfe\nsecret/\n", "cannot read"),
    "one-megabyte-line": (b"x" * 1_000_000 + b"\nsecret/\n", "larger than 65536 bytes"),
}


@pytest.mark.parametrize("spelling", list(UNUSABLE))
def test_an_unusable_skills_gitignore_is_a_diagnostic_naming_it(
    project: Path, spelling: str
) -> None:
    content, why = UNUSABLE[spelling]
    skills = project / ".agents" / "skills"
    write_skill(skills, "kept")
    write_skill(skills, "secret")
    (skills / ".gitignore").write_bytes(content)
    result = listing(Resources(project, ResourceOptions()), project)
    assert [r.name for r in result.records] == ["kept", "secret"]  # not applied, whole
    [diagnostic] = [d for d in result.diagnostics if d.path == str(skills / ".gitignore")]
    assert diagnostic.code in ("parse_failed", "read_failed")
    assert why in diagnostic.message and str(skills / ".gitignore") in diagnostic.message
    assert len(diagnostic.message) < 500


def test_usable_odd_gitignores_still_apply(project: Path) -> None:
    skills = project / ".agents" / "skills"
    write_skill(skills, "kept")
    write_skill(skills, "secret")
    for content in (
        b"a\0b\n\0\nsecret/\n",  # NUL bytes
        b"# x\n" * 3000 + b"\n" * 3000 + b"secret/\n",  # comments and blanks are no patterns
        b"".join(b"p%d\n" % i for i in range(999)) + b"secret/\n",  # exactly the cap
        b"[[x]]\nsecret/\n",  # Python's re warns of a nested set: nothing printed, still used
    ):
        (skills / ".gitignore").write_bytes(content)
        result = listing(Resources(project, ResourceOptions()), project)
        assert [r.name for r in result.records] == ["kept"], content[:20]
        assert result.diagnostics == ()


def test_a_deep_unusable_gitignore_skips_only_its_own_patterns(project: Path) -> None:
    skills = project / ".agents" / "skills"
    (skills).mkdir(parents=True)
    (skills / ".gitignore").write_text("drafts/\n")
    deep = skills / "group" / "a" / "b" / "c"
    write_skill(deep, "deep-skill")
    write_skill(deep, "secret")
    write_skill(deep / "drafts", "draft")
    (deep / ".gitignore").write_bytes(b"*a" * 20_000 + b"\nsecret/\n")
    result = listing(Resources(project, ResourceOptions()), project)
    assert [r.name for r in result.records] == ["deep-skill", "secret"]  # drafts/ still applies
    assert [d.path for d in result.diagnostics] == [str(deep / ".gitignore")]


async def test_a_harness_starts_and_runs_over_the_reviews_gitignore(
    project: Path, tmp_path: Path
) -> None:
    skills = project / ".agents" / "skills"
    write_skill(skills, "kept")
    (skills / ".gitignore").write_bytes(b"*a" * 20_000 + b"\n")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project / "app"))
    h = AgentHarness(session=session, model=FauxModel(["ok"]), cwd=project / "app")
    assert (await h.prompt("hi")).text == "ok"
    assert [s.name for s in await h.get_skills()] == ["kept"]
    session.close()


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (["skills", "list"], "", "kept"),
        (["run", "--offline", "--no-session", "hi"], "", "(offline) You said: hi"),
        (["chat", "--offline", "--root", "{store}"], "hi\n", "(offline) You said: hi"),
        (["rpc", "--offline", "--root", "{store}"], '{"type":"get_state","id":"x"}\n', '"x"'),
    ],
    ids=["skills-list", "run", "chat", "rpc"],
)
@pytest.mark.parametrize(
    "content", [b"*a" * 20_000, b"".join(b"p%d*/x\n" % i for i in range(5000))]
)
def test_the_cli_starts_in_a_folder_with_the_reviews_gitignore(
    project: Path,
    tmp_path: Path,
    args: list[str],
    stdin: str,
    expected: str,
    content: bytes,
) -> None:
    skills = project / ".agents" / "skills"
    write_skill(skills, "kept")
    (skills / ".gitignore").write_bytes(content + b"\n")
    work = project / "app"
    store = str(tmp_path / "store")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *(a.format(store=store) for a in args)],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=work,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=LIMIT_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "re2" not in proc.stderr
    assert expected in proc.stdout


def test_listing_is_not_slowed_by_a_megabyte_gitignore(project: Path) -> None:
    # One 1 MB line once took pathspec 80 s to compile; past the byte cap it is not read.
    skills = project / ".agents" / "skills"
    write_skill(skills, "kept")
    (skills / ".gitignore").write_bytes(b"x" * 1_000_000)

    async def timed() -> None:
        await asyncio.wait_for(asyncio.to_thread(listing_, skills.parent.parent), timeout=20)

    def listing_(where: Path) -> None:
        assert [r.name for r in listing(Resources(where, ResourceOptions()), where).records] == [
            "kept"
        ]

    asyncio.run(timed())


def test_one_skills_root_compiles_at_most_its_budget_of_ignore_files(project: Path) -> None:
    # Each file is within the cap (comments cost nothing to compile); together they pass the
    # budget of one root's scan, so the last ones are diagnostics and their folders listed.
    skills = project / ".agents" / "skills"
    filler = b"#" * (MAX_IGNORE_BYTES - 100) + b"\nsecret/\n"
    count = MAX_IGNORE_BYTES_PER_WALK // len(filler) + 2
    for i in range(count):
        write_skill(skills / f"d{i:02}", f"kept-{i:02}")
        write_skill(skills / f"d{i:02}", f"secret-{i:02}", folder="secret")
        (skills / f"d{i:02}" / ".gitignore").write_bytes(filler)
    result = listing(Resources(project, ResourceOptions()), project)
    names = [r.name for r in result.records]
    assert [n for n in names if n.startswith("secret")] == [
        f"secret-{count - 2:02}",
        f"secret-{count - 1:02}",
    ]
    assert len([n for n in names if n.startswith("kept")]) == count
    over = [d for d in result.diagnostics if "pass 1000000 bytes" in d.message]
    assert [d.path for d in over] == [
        str(skills / f"d{i:02}" / ".gitignore") for i in (count - 2, count - 1)
    ]
