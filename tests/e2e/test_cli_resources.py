"""``harness skills list|show`` and ``harness templates list``, run in-process through the CLI's
entry point (``cli_in_process``) in a project folder (a git repository under tmp_path); the
user's config folder is the test's ``$XDG_CONFIG_HOME`` (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from cli_in_process import run_cli


def _skill(root: Path, name: str, meta: str, body: str = "Body.") -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{meta}---\n{body}\n")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    skills = root / ".agents" / "skills"
    _skill(skills, "review", "description: Review a diff\naliases: [cr]\n", "Read every hunk.")
    _skill(skills, "deploy", "description: Ship it\ndisable-model-invocation: true\n")
    _skill(skills, "broken", "name: [\n")
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "harness"
    _skill(user / "skills", "review", "description: The user's review\n")
    prompts = root / ".agents" / "prompts"
    prompts.mkdir()
    (prompts / "fix.md").write_text("---\ndescription: Fix an issue\nargument-hint: [n]\n---\n$1\n")
    return root


def cli(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(args, cwd=cwd)


def test_skills_list_shows_records_shadows_flags_and_diagnostics(
    project: Path, tmp_path: Path
) -> None:
    _skill(tmp_path / "more", "extra-one", "description: From --dir\n")
    done = cli(project, "skills", "list", "--dir", tmp_path / "more")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0].startswith("deploy  [project]  Ship it")
    assert "review  [project]  Review a diff" in out
    assert "extra-one  [extra]  From --dir" in out
    assert "    shadows: user" in out
    assert "    not offered to the model (disable-model-invocation)" in out
    assert f"    path: {project / '.agents' / 'skills' / 'review' / 'SKILL.md'}" in out
    diagnostics = out[out.index("diagnostics:") + 1 :]
    assert [line.split(":")[0].strip() for line in diagnostics] == ["parse_failed", "collision"]
    assert "winner: " in diagnostics[1] and "loser: " in diagnostics[1]


def test_skills_show_prints_the_body_and_fails_with_a_code(project: Path) -> None:
    done = cli(project, "skills", "show", "cr")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "name: review"
    assert done.stdout.rstrip().endswith("Read every hunk.")
    missing = cli(project, "skills", "show", "nope")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error[skill_not_found]: ")


def test_templates_list(project: Path) -> None:
    done = cli(project, "templates", "list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "/fix [n]  [project]  Fix an issue"
