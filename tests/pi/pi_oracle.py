"""pi as the oracle: install pi's npm package once, run its ``SessionManager`` on a file.

``PiReader.read(path, ops)`` runs ``pi_reader.mjs`` (beside this file) under node, with pi's
own classes, and returns what pi sees in the file afterwards (:class:`PiState`). The comparable
form (:func:`comparable`) maps a context message, given as pi's JSON object, to
``(role, normalised text)`` so that pi's ``buildSessionContext`` and our ``build_context`` are
compared like with like: summaries stay their own roles (pi's ``compactionSummary`` /
``branchSummary`` messages, not yet wrapped into user text), tool calls and results are spelled
out with their ids, names and arguments.

Loaded by ``tests/pi/conftest.py`` into ``sys.modules`` as ``pi_oracle``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repos import encode_message

__all__ = [
    "PI_PACKAGE",
    "PI_VERSION",
    "PiReader",
    "PiState",
    "PiUnavailable",
    "comparable",
    "install_pi",
    "ours",
]

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
"""The newest 0.73.x on the registry when these tests were written."""

READER = Path(__file__).resolve().parent / "pi_reader.mjs"
NODE_MISSING = "pi tests need node and npm (pi's SessionManager from npm); not found"

Obj = dict[str, Any]


class PiUnavailable(Exception):
    """pi cannot be run here; the message is the one-line skip reason."""


def default_dir() -> Path:
    env = os.environ.get("HARNESS_PI_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "jsonl-harness-tests" / f"pi-{PI_VERSION}"


def _installed_version(package_dir: Path) -> str | None:
    try:
        return str(json.loads((package_dir / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def install_pi(prefix: Path | None = None) -> tuple[str, Path]:
    """Node's path and pi's package folder, installing pi under ``prefix`` if not yet there.

    Raises:
        PiUnavailable: no node or npm, or the install failed (one-line reason).
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise PiUnavailable(NODE_MISSING)
    prefix = prefix or default_dir()
    package_dir = prefix / "node_modules" / PI_PACKAGE
    if _installed_version(package_dir) == PI_VERSION:
        return node, package_dir
    try:
        prefix.mkdir(parents=True, exist_ok=True)
        with open(prefix.parent / f".{prefix.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest runs never install at once
            if _installed_version(package_dir) != PI_VERSION:
                done = subprocess.run(
                    [
                        *(npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund"),
                        *("--loglevel=error", f"{PI_PACKAGE}@{PI_VERSION}"),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=False,
                )
                if done.returncode != 0:
                    raise PiUnavailable(
                        f"pi tests could not npm install {PI_PACKAGE}@{PI_VERSION} into {prefix}:"
                        f" {_npm_error(done.stderr or done.stdout)}"
                    )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PiUnavailable(
            f"pi tests could not install {PI_PACKAGE}@{PI_VERSION} into {prefix}: {exc}"
        ) from None
    if _installed_version(package_dir) != PI_VERSION:
        raise PiUnavailable(f"pi tests: npm install left no {PI_PACKAGE}@{PI_VERSION} in {prefix}")
    return node, package_dir


def _npm_error(output: str) -> str:
    """npm's first error lines (its code and message) on one line, without the log path."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("npm error") and "complete log" not in line]
    return "; ".join(errors[:2]) or (lines[-1] if lines else "no output")


@dataclass(frozen=True)
class PiState:
    """What a fresh ``SessionManager.open(path)`` sees (see ``pi_reader.mjs``)."""

    leaf_id: str | None
    branch: list[Obj]  # root to leaf: {"id", "type", "parentId"}
    header: Obj
    name: str | None
    labels: dict[str, str]
    entry_count: int
    messages: list[Obj]  # buildSessionContext().messages, pi's JSON
    thinking_level: str
    model: Obj | None  # {"provider", "modelId"}
    llm: list[Obj]  # convertToLlm(messages)

    @property
    def context(self) -> list[tuple[str, str]]:
        return [comparable(m) for m in self.messages]

    @property
    def branch_ids(self) -> list[str]:
        return [e["id"] for e in self.branch]


class PiReader:
    def __init__(self, node: str, package_dir: Path) -> None:
        self.node, self.package_dir = node, package_dir

    def _run(self, request: Obj) -> Obj:
        done = subprocess.run(
            [self.node, str(READER), str(self.package_dir)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"pi_reader.mjs failed ({done.returncode}):\n{done.stderr}")
        return dict(json.loads(done.stdout))

    def selfcheck(self) -> Obj:
        return self._run({"selfcheck": True})

    def read(self, path: Path, ops: list[Obj] | None = None) -> tuple[list[str], PiState]:
        """Run ``ops`` with pi on ``path`` (if any), then read it afresh with pi; returns the ids
        the ops appended and pi's view of the file."""
        out = self._run({"path": str(path), "ops": ops or []})
        s = out["state"]
        state = PiState(
            leaf_id=s["leafId"],
            branch=s["branch"],
            header=s["header"],
            name=s["name"],
            labels=s["labels"],
            entry_count=s["entryCount"],
            messages=s["messages"],
            thinking_level=s["thinkingLevel"],
            model=s["model"],
            llm=s["llm"],
        )
        return list(out["appended"]), state

    def state(self, path: Path) -> PiState:
        return self.read(path)[1]


# --- the comparable form --------------------------------------------------------------------


def _text(content: Any) -> str:
    """A user-side content (string or text/image blocks) as one string."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "image":
            parts.append(f"[image {block.get('mimeType')}]")
        else:
            parts.append(f"[{block.get('type')}]")
    return "\n".join(parts)


def _assistant_block(block: Obj) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block["text"])
    if kind == "thinking":
        return f"[thinking] {block['thinking']}"
    if kind == "toolCall":
        args = json.dumps(block.get("arguments"), sort_keys=True)
        return f"[toolCall {block['id']} {block['name']} {args}]"
    return f"[{kind}]"


def comparable(message: Obj) -> tuple[str, str]:
    """``(role, normalised text)`` of a context message given as pi's JSON object."""
    role = str(message.get("role"))
    if role == "user":
        return role, _text(message["content"])
    if role == "assistant":
        content = message["content"]
        blocks = [content] if isinstance(content, str) else [_assistant_block(b) for b in content]
        return role, "\n".join([*blocks, f"<{message.get('stopReason')}>"])
    if role == "toolResult":
        error = " error" if message.get("isError") else ""
        head = f"[{message['toolCallId']} {message['toolName']}{error}]"
        return role, f"{head} {_text(message['content'])}"
    if role == "custom":
        return role, f"[{message['customType']}] {_text(message['content'])}"
    if role == "branchSummary":
        return role, f"[from {message['fromId']}] {message['summary']}"
    if role == "compactionSummary":
        return role, f"[{message['tokensBefore']} tokens] {message['summary']}"
    if role == "bashExecution":
        return role, f"$ {message['command']} -> {message.get('exitCode')}\n{message['output']}"
    return role, json.dumps(message, sort_keys=True)


def ours(messages: Any) -> list[tuple[str, str]]:
    """Our context messages in the comparable form (through our JSON encoding)."""
    return [comparable(encode_message(m)) for m in messages]
