"""The model options of ``run`` and ``chat`` (``--model provider/id[:thinking]``,
``--base-url``, ``--api``), a local model from the user settings, ``/model``, and costs in
``sessions show`` / ``list --cost`` / ``export`` / ``run --output json``, for replies that
recorded a cost and for imported Claude Code sessions that did not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai_streams
import pytest
from claude_code_transcripts import SESSION, small_transcript, write
from cli_in_process import needs_process, run_cli
from replay_server import ReplayServer, SseReply

from harness import AssistantMessage, MessageEntry, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
# Sonnet 4's published prices, per token: $3 input, $15 output, $0.30 cache read per million.
CC_REPLY_COST = (10 * 3 + 5 * 15 + 100 * 0.30) / 1e6  # each fixture reply's usage

pytest.importorskip("openai")


def _env(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")
    }
    return {
        **clean,
        "PYTHONIOENCODING": "utf-8",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "HARNESS_SESSIONS_DIR": str(tmp_path / "sessions"),
        **env,
    }


def harness(tmp_path: Path, *args: str | Path, stdin: str = "", **env: str) -> Any:
    """``run`` and ``chat`` in a real process; the commands that only print and write files
    in-process through the CLI's entry point (``cli_in_process``)."""
    if not needs_process(args):
        return run_cli(args, env=_env(tmp_path, env), cwd=tmp_path, input=stdin)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(tmp_path, env),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def _started(tmp_path: Path, *args: str | Path, **env: str) -> subprocess.Popen[str]:
    """``harness ARGS...`` started in a real process, stdin empty (for several at once)."""
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=_env(tmp_path, env),
        cwd=tmp_path,
    )


def test_run_on_an_openai_compatible_server_reports_the_cost(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(SseReply(body=openai_streams.responses_text()))
    proc = harness(
        tmp_path,
        "run", "-p", "hi", "--model", "openai/gpt-4.1", "--base-url", f"{replay_server.url}/v1",
        "--api", "responses", "--output", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"] == "openai/gpt-4.1" and out["result"] == openai_streams.TEXT
    assert out["usage"]["cache_read_input_tokens"] == 400
    assert out["total_cost_usd"] == pytest.approx(0.0018)
    # 600 x $2 + 400 x $0.50 + 50 x $8 per million: recorded by the provider, not estimated.
    assert out["cost"] == {"usd": pytest.approx(0.0018), "estimated_usd": 0, "unpriced_replies": 0}
    assert replay_server.requests[0].path == "/v1/responses"


def test_openai_base_url_is_honoured_and_a_bad_one_is_one_line_naming_it(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(SseReply(body=openai_streams.responses_text()))
    proc = harness(
        tmp_path, "run", "-p", "hi", "--model", "openai/gpt-4.1",
        OPENAI_BASE_URL=f"{replay_server.url}/v1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert openai_streams.TEXT in proc.stdout
    assert replay_server.requests[0].path == "/v1/responses"

    # No scheme, an unreachable server (a closed port), credentials in the URL: one line each,
    # naming the URL without them; no traceback. The three run at once: the closed port's
    # retries wait seconds.
    cases = [
        ("localhost:11434/v1", "'localhost:11434/v1'"),
        ("sk-secret:pw@localhost:11434/v1", "'localhost:11434/v1'"),
        ("http://user:sk-secret@127.0.0.1:9/v1?key=sk-secret", "http://127.0.0.1:9/v1"),
    ]
    started = [
        _started(tmp_path, "run", "-p", "hi", "--model", "openai/gpt-4.1", "--no-session",
                 OPENAI_BASE_URL=url)
        for url, _ in cases
    ]  # fmt: skip
    for (_, named), child in zip(cases, started, strict=True):
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 1, stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
        assert named in stderr and "sk-secret" not in stderr
        assert "Traceback" not in stderr


def test_an_unknown_model_fails_before_a_session_is_written(tmp_path: Path) -> None:
    proc = harness(tmp_path, "run", "-p", "hi", "--model", "openai/gpt-4.2")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[unknown_model]")
    assert "did you mean openai/gpt-4.1" in proc.stderr
    assert not (tmp_path / "sessions").exists()
    no_key = harness(tmp_path, "run", "-p", "hi", "--model", "openai/gpt-4.1")
    assert no_key.stderr.startswith("error[missing_api_key]") and "OPENAI_API_KEY" in no_key.stderr
    bad = harness(tmp_path, "run", "-p", "hi", "--base-url", "http://127.0.0.1:9/v1")
    assert bad.returncode == 2 and "--base-url needs --model" in bad.stderr


def test_a_local_model_of_the_user_settings_runs_by_name(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    settings = tmp_path / "config" / "harness" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps(
            {
                "models": {
                    "ollama": {
                        "api": "openai-completions",
                        "baseUrl": f"{replay_server.url}/v1",
                        "models": {"qwen3:8b": {"contextWindow": 32768, "cost": {}}},
                    }
                },
                "model": "ollama/qwen3:8b",
            }
        )
    )
    replay_server.enqueue(SseReply(body=openai_streams.local_server_text()))
    proc = harness(tmp_path, "run", "-p", "hi", "--output", "json")  # the settings' model
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"] == "ollama/qwen3:8b"
    assert out["cost"]["usd"] == 0 and out["cost"]["unpriced_replies"] == 0  # priced at zero
    assert replay_server.requests[0].path == "/v1/chat/completions"


def test_chat_model_lists_and_switches(tmp_path: Path, replay_server: ReplayServer) -> None:
    proc = harness(
        tmp_path,
        "chat", "--model", "gpt-4.1", "--base-url", f"{replay_server.url}/v1",
        stdin="/model\n/model nosuch/model\n/model openai/o4-mini:high\n/thinking\n/exit\n",
        OPENAI_API_KEY="sk-test",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("* openai/gpt-4.1 ") for line in lines)
    assert any(line.startswith("  anthropic/claude-sonnet-4-5 ") for line in lines)
    assert "error[unknown_model]" in proc.stdout + proc.stderr
    assert "model: openai/o4-mini" in proc.stdout and "thinking: high" in proc.stdout


def _imported(tmp_path: Path) -> tuple[Path, int]:
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", small_transcript())
    proc = harness(tmp_path, "import", "claude-code", source)
    assert proc.returncode == 0, proc.stderr
    main = next(
        p
        for p in (tmp_path / "sessions").glob("*/*.jsonl")
        if "parentSession" not in p.read_text().splitlines()[0]
    )
    replies = sum(
        1
        for e in open_session(main).entries()
        if isinstance(e, MessageEntry)
        and isinstance(e.message, AssistantMessage)
        and e.message.usage.input
    )
    return main, replies


def test_an_imported_claude_code_session_gets_an_estimated_cost(tmp_path: Path) -> None:
    main, replies = _imported(tmp_path)
    assert replies > 0
    show = harness(tmp_path, "sessions", "show", main)
    assert show.returncode == 0, show.stderr
    usage = next(line for line in show.stdout.splitlines() if line.startswith("usage (every"))
    assert "estimated from token counts" in usage
    listed = harness(tmp_path, "sessions", "list", "--cost", "--json")
    rows = {row["path"]: row for row in json.loads(listed.stdout)}
    cost = rows[str(main)]["cost"]
    assert cost["usd"] == pytest.approx(replies * CC_REPLY_COST) and cost["usd"] > 0
    assert cost["estimated_usd"] == cost["usd"]
    table = harness(tmp_path, "sessions", "list", "--cost")
    assert "COST" in table.stdout.splitlines()[0] and "~$" in table.stdout
    page = tmp_path / "page.html"
    exported = harness(tmp_path, "export", main, "-o", page)
    assert exported.returncode == 0, exported.stderr
    assert "estimated from token counts" in page.read_text()
