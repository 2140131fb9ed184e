"""The storage benchmark runs end to end (``--quick``): every row of its table is printed.

Speed is never asserted here; only that the command works and reports each operation.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "bench_storage.py"
ISSUE24_HEADING = "| issue 24 row | ours | floor | peers | ours/floor | ours/peers | target | met |"
VERDICTS = ("yes", "NO")


def _storage_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_storage_smoke", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _row_names() -> list[str]:
    names: list[str] = _storage_module().row_names(quick=True)
    return names


def _table(stdout: str, heading: str) -> list[list[str]]:
    """The cells of each row of the table under ``heading`` (up to the next blank line)."""
    lines = stdout.splitlines()
    assert heading in lines, f"no table {heading!r}:\n{stdout}"
    rows = []
    for line in lines[lines.index(heading) + 2 :]:
        if not line.startswith("| "):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


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
    # The run closes with issue 24's table: every row of the issue, those this run measures
    # (storage, bus, start-up) with a verdict, the others saying where they come from.
    issue_names = _storage_module().issue24_row_names(quick=True)
    assert len(issue_names) == 13
    rows = _table(done.stdout, ISSUE24_HEADING)
    assert [row[0] for row in rows] == issue_names
    assert all(len(row) == 8 for row in rows)
    met = {row[0]: row[7] for row in rows}
    elsewhere = {
        "SQLite store, resume 3,000 entries": "in bench_repos.py's run",
        "PostgreSQL store, resume 3,000 entries": "in bench_repos.py's run",
        "the README's test command, lone clone": "from the lone-clone run",
    }
    for name, verdict in met.items():
        assert verdict in ((elsewhere[name],) if name in elsewhere else VERDICTS), (name, verdict)
    bus = rows[issue_names.index("bus dispatch, 10 sync receivers")]
    assert bus[1].endswith("µs tool_call hook") and bus[6] == "≤ 20 µs"
    assert rows[issue_names.index("import harness")][1].split()[1:3] == ["s", "CPU"]
    assert [row["name"] for row in report["issue24"]] == issue_names


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
    rows = {row[0]: row[1:] for row in _table(done.stdout, heading)}
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
    issue = _table(done.stdout, ISSUE24_HEADING)  # the columns of bench_storage's closing table
    assert [row[0] for row in issue] == [
        "SQLite store, resume 1,000 entries",
        "PostgreSQL store, resume 1,000 entries",
    ]
    sqlite, postgres = issue
    assert sqlite[1] == f"{rows[names[5]][1]} ms"  # the resume row's SQLite figure
    assert sqlite[7] == "no verdict: a peer not measured"
    assert postgres[1] == "not measured (--quick)" and postgres[7] == "not measured"
    assert [row["met"] for row in report["issue24"]] == [sqlite[7], postgres[7]]


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
    heading = next(line for line in done.stdout.splitlines() if line.startswith("| operation |"))
    rows = _table(done.stdout, heading)
    assert len(rows) == len(_repos_row_names())
    for row in rows:
        postgres = row[3]
        assert postgres.replace(",", "").replace(".", "").isdigit(), row
    issue = _table(done.stdout, ISSUE24_HEADING)
    assert issue[1][0] == "PostgreSQL store, resume 1,000 entries"
    assert issue[1][1].removesuffix(" ms").replace(",", "").replace(".", "").isdigit(), issue


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
