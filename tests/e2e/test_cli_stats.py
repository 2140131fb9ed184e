"""``harness sessions stats``: usage reports on hand-written sessions whose figures are known,
grouped by session, model, day and folder, with ``--since``; and on the imported Claude Code
corpus, where the totals must equal the token counts read straight from the imported files and
the cost is estimated from the model registry."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import run_cli

from harness import ModelRegistry

REPO_ROOT = Path(__file__).resolve().parents[2]
DAY1 = 1751364000000  # 2025-07-01T10:00:00Z, in milliseconds
DAY2 = DAY1 + 86_400_000


def harness(*args: str | Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    # In-process through the CLI's entry point (``cli_in_process``): it only reads files.
    proc = run_cli(args, env={**os.environ, "PYTHONIOENCODING": "utf-8"}, cwd=REPO_ROOT)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def _reply(n: int, model: str, when: int, usage: dict[str, Any], calls: int = 0) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"reply {n}"},
            *[
                {"type": "toolCall", "id": f"c{n}-{i}", "name": "ls", "arguments": {}}
                for i in range(calls)
            ],
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": model,
        "usage": usage,
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": when,
    }


def _write(root: Path, sid: str, cwd: str, messages: list[dict[str, Any]], compact: int) -> None:
    folder = root / "--x--"
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 3,
            "id": sid,
            "timestamp": "2025-07-01T10:00:00Z",
            "cwd": cwd,
        }
    ]
    parent = None
    for i, message in enumerate(messages):
        entry = f"{sid[:4]}{i:04d}"
        lines.append(
            {
                "type": "message",
                "id": entry,
                "parentId": parent,
                "timestamp": "2025-07-01T10:00:00Z",
                "message": message,
            }
        )
        parent = entry
    for i in range(compact):
        entry = f"{sid[:4]}c{i:03d}"
        lines.append(
            {
                "type": "compaction",
                "id": entry,
                "parentId": parent,
                "timestamp": "2025-07-02T10:00:00Z",
                "summary": "s",
                "firstKeptEntryId": parent,
                "tokensBefore": 10,
            }
        )
        parent = entry
    (folder / f"2025-07-01T10-00-00-000Z_{sid}.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )


def _result(call: str, error: bool, when: int) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call,
        "toolName": "ls",
        "content": [{"type": "text", "text": "x"}],
        "isError": error,
        "timestamp": when,
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    paid = {
        "input": 100,
        "output": 10,
        "cacheRead": 300,
        "cacheWrite": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.5},
    }
    unpaid = {"input": 1000, "output": 200, "cacheRead": 0, "cacheWrite": 100}
    _write(
        root,
        "aaaa1111",
        "/work/a",
        [
            {"role": "user", "content": "hi", "timestamp": DAY1},
            _reply(1, "claude-sonnet-4-5", DAY1, paid, calls=2),
            _result("c1-0", False, DAY1),
            _result("c1-1", True, DAY1),
            _reply(2, "claude-sonnet-4-5", DAY2, unpaid),
        ],
        compact=1,
    )
    _write(
        root,
        "bbbb2222",
        "/work/b",
        [
            {"role": "user", "content": "hi", "timestamp": DAY2},
            _reply(3, "mystery-model", DAY2, {"input": 5, "output": 5}, calls=1),
            _result("c3-0", True, DAY2),
        ],
        compact=0,
    )
    return root


def _stats(root: Path, *args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        harness("sessions", "stats", "--root", root, "--json", *args).stdout
    )
    return data


def test_per_session_figures(root: Path) -> None:
    prices = ModelRegistry.builtin().find("claude-sonnet-4-5")
    assert prices is not None and prices.prices is not None
    p = prices.prices
    estimated = (1000 * p.input + 200 * p.output + 100 * p.cache_write) / 1e6
    data = _stats(root)
    groups = {g["key"]: g for g in data["groups"]}
    a, b = groups["aaaa1111"], groups["bbbb2222"]
    assert (a["turns"], a["input"], a["output"], a["cacheRead"], a["cacheWrite"]) == (
        2,
        1100,
        210,
        300,
        100,
    )
    assert a["toolCalls"] == 2 and a["toolErrors"] == 1 and a["toolErrorRate"] == 0.5
    assert a["compactions"] == 1
    assert a["cacheHitRate"] == pytest.approx(300 / (1100 + 300 + 100))
    assert a["cost"] == pytest.approx(0.5 + estimated, abs=1e-6)
    assert a["costEstimated"] == pytest.approx(estimated, abs=1e-6)
    assert b["unpricedReplies"] == 1 and b["toolErrorRate"] == 1.0 and b["cost"] == 0
    total = data["total"]
    assert total["sessions"] == 2 and total["turns"] == 3 and total["toolCalls"] == 3
    assert total["toolErrors"] == 2 and total["input"] == 1105


def test_grouped_by_model_day_and_folder(root: Path) -> None:
    by_model = {g["key"]: g for g in _stats(root, "--by", "model")["groups"]}
    assert set(by_model) == {"anthropic/claude-sonnet-4-5", "anthropic/mystery-model"}
    assert by_model["anthropic/claude-sonnet-4-5"]["turns"] == 2
    assert by_model["anthropic/claude-sonnet-4-5"]["toolErrors"] == 1  # results follow replies
    assert by_model["anthropic/mystery-model"]["toolErrors"] == 1
    by_day = {g["key"]: g for g in _stats(root, "--by", "day")["groups"]}
    assert by_day["2025-07-01"]["turns"] == 1 and by_day["2025-07-02"]["turns"] == 2
    assert by_day["2025-07-02"]["compactions"] == 1 and by_day["2025-07-02"]["sessions"] == 2
    by_folder = {g["key"]: g for g in _stats(root, "--by", "folder")["groups"]}
    assert by_folder["/work/a"]["input"] == 1100 and by_folder["/work/b"]["input"] == 5
    since = _stats(root, "--since", "2025-07-02")
    assert since["total"]["turns"] == 2 and since["total"]["toolCalls"] == 1


def test_named_sessions_and_the_table(root: Path) -> None:
    one = _stats(root, "bbbb")
    assert [g["key"] for g in one["groups"]] == ["bbbb2222"]
    table = harness("sessions", "stats", "--root", root, "--by", "model").stdout.splitlines()
    assert table[0].split()[:3] == ["MODEL", "SESS", "TURNS"]
    assert table[-1].startswith("total")
    assert any(line.startswith("anthropic/mystery-model") and line.endswith("?") for line in table)
    bad = harness("sessions", "stats", "--root", root, "--since", "yesterday", ok=False)
    assert bad.returncode == 2 and "--since" in bad.stderr


@pytest.mark.corpus
def test_the_imported_claude_code_corpus(fixtures_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "imported"
    harness("import", "claude-code", fixtures_dir / "claude-code", "--root", root)
    files = sorted(root.rglob("*.jsonl"))
    assert files
    expected = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "turns": 0}
    expected |= {"toolCalls": 0, "toolErrors": 0, "compactions": 0}
    for path in files:  # read straight from the files, not through the library
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            entry = json.loads(line)
            if entry.get("type") == "compaction":
                expected["compactions"] += 1
            message = entry.get("message") or {}
            if entry.get("type") != "message":
                continue
            if message.get("role") == "assistant":
                usage = message.get("usage") or {}
                expected["turns"] += 1
                for key in ("input", "output", "cacheRead", "cacheWrite"):
                    expected[key] += usage.get(key, 0)
                expected["toolCalls"] += sum(
                    1 for b in message.get("content") or [] if b.get("type") == "toolCall"
                )
            elif message.get("role") == "toolResult" and message.get("isError"):
                expected["toolErrors"] += 1
    data = _stats(root)
    total = data["total"]
    assert {k: total[k] for k in expected} == expected
    assert expected["input"] + expected["output"] > 0
    # Claude Code records no price: the cost is estimated from the registry (claude-sonnet-4).
    assert total["cost"] > 0 and total["costEstimated"] == pytest.approx(total["cost"])
    by_model = {g["key"] for g in _stats(root, "--by", "model")["groups"]}
    assert any("claude-sonnet-4" in key for key in by_model), by_model
