"""The storage benchmark runs end to end (``--quick``): every row of its table is printed.

Speed is never asserted here; only that the command works and reports each operation.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "bench_storage.py"


def _row_names() -> list[str]:
    spec = importlib.util.spec_from_file_location("bench_storage_smoke", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    names: list[str] = module.row_names(quick=True)
    return names


def test_bench_storage_quick_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--quick", "--runs", "1"),
            *("--data", str(tmp_path / "data"), "--json", str(out)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    names = _row_names()
    assert len(names) == 16
    for name in names:
        assert f"| {name} |" in done.stdout, f"row {name!r} missing:\n{done.stdout}"
    assert "pi: not measured (" in done.stdout
    assert "Growth:" in done.stdout
    for size in ("1,000", "2,000", "5,000"):
        assert f"| {size} |" in done.stdout
    report = json.loads(out.read_text())
    assert [row["name"] for row in report["rows"]] == names
    assert not report["errors"]


REPOS_SCRIPT = ROOT / "bench" / "bench_repos.py"


def _repos_row_names() -> list[str]:
    spec = importlib.util.spec_from_file_location("bench_repos_smoke", REPOS_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    names: list[str] = module.row_names(quick=True)
    return names


def test_bench_repos_quick_prints_every_row_and_column(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            *(sys.executable, str(REPOS_SCRIPT), "--quick", "--runs", "1"),
            *("--data", str(tmp_path / "data"), "--json", str(out)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Database store benchmarks (quick workload")
    assert "load average" in lines[0]
    assert "competitors: not measured (--quick)" in done.stdout
    heading = next(line for line in lines if line.startswith("| operation |"))
    cells = [c.strip() for c in heading.strip("|").split("|")]
    assert cells == [
        "operation",
        "JSONL (ours)",
        "SQLite (ours)",
        "PostgreSQL (ours)",
        "OpenAI SQLiteSession",
        "LangGraph SqliteSaver",
        "LangGraph PostgresSaver",
        "SQLite: ours/OpenAI",
        "SQLite: ours/LangGraph",
        "PostgreSQL: ours/LangGraph",
    ]
    names = _repos_row_names()
    assert len(names) == 8
    rows = {}
    for line in lines:
        if line.startswith("| ") and not line.startswith("| operation"):
            row = [c.strip() for c in line.strip("|").split("|")]
            rows[row[0]] = row[1:]
    assert list(rows) == names
    for name, row in rows.items():
        assert len(row) == len(cells) - 1, name
        for ours in row[:2]:  # JSONL and SQLite always run: a number, never an error
            assert ours.replace(",", "").replace(".", "").isdigit(), f"{name}: {ours!r}"
        for absent in row[2:6]:  # PostgreSQL and the competitors are not run by --quick
            assert absent == "not measured (--quick)", f"{name}: {absent!r}"
    report = json.loads(out.read_text())
    assert list(report["rows"]) == names
    assert report["rows"][names[0]]["jsonl"]["median_ms"] > 0


@pytest.mark.postgres
def test_bench_repos_quick_measures_postgres_given_a_server(
    tmp_path: Path, postgres_url: str
) -> None:
    done = subprocess.run(
        [
            *(sys.executable, str(REPOS_SCRIPT), "--quick", "--runs", "1"),
            *("--data", str(tmp_path / "data"), "--postgres", postgres_url),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "postgres: PostgreSQL " in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(_repos_row_names())
    for line in rows:
        postgres = line.strip("|").split("|")[3].strip()
        assert postgres.replace(",", "").replace(".", "").isdigit(), line


HOOKS_SCRIPT = ROOT / "bench" / "bench_hooks.py"


def test_bench_hooks_quick_prints_every_row() -> None:
    done = subprocess.run(
        [sys.executable, str(HOOKS_SCRIPT), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [
        line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        '| floor: `subprocess.run(["true"])`',
        '| floor: `subprocess.run(["/bin/sh", "-c", "cat > /dev/null"])`',
        '| floor: asyncio `create_subprocess_exec("true")`',
        "| tool call, no hook",
        "| tool call, one hook `true`",
        "| tool call, one hook `cat > /dev/null`",
        "| tool call, one hook `exit 2` (blocks)",
    ]


def test_bench_mcp_quick_prints_both_transports() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_mcp.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| in-process |")]
    rows += [line for line in done.stdout.splitlines() if line.startswith("| stdio |")]
    assert len(rows) == 2 and all(len(row.split("|")) == 10 for row in rows)


def test_bench_checkpoints_quick_prints_every_row() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_checkpoints.py"), "--quick", "--rounds", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [
        line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert len(rows) == 1 + 6 + 3  # the header; write/edit/changed at two sizes; three bash rows
    assert all(len(row.split("|")) == 8 for row in rows)  # added: pairs, within (wall, CPU)
