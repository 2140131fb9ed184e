"""Where a first context's time goes, from the bodies' bytes to an Anthropic request body
(issue 24, point 1), against a prototype that stays in pi's JSON.

Run from the repository root, after ``bench/gen_workload.py`` (or a run of
``bench/bench_storage.py``) made the workload:

    .venv/bin/python bench/bench_context_parts.py [--rounds 7] [FILE ...]

``FILE`` defaults to the full workload's ``s100k.jsonl`` and ``s10k.jsonl``. The bodies of the
message entries of the file's first context (from its compaction's first kept entry on) are
read into memory once; each round then times, one after the other on the same bodies and with
the collector paused:

* the typed path: ``orjson.loads``, ``decode_entry``, normalising + ``to_llm_messages`` +
  ``request_problems``, and the Anthropic provider's ``convert_messages``;
* ``decode_entry``'s work done in one pass with attrs' own constructors (no direct builders),
  for the common shapes;
* a JSON path: ``orjson.loads``, a shape check of each message (types only, nothing built),
  and normalising + the Anthropic body built from the dicts. It handles the shapes the workload
  holds (text, thinking, tool calls, tool results) and nothing else: a lower bound for such a
  path, not a floor of equal work.

Before timing, both prototypes are checked to give what the typed path gives (the same
entries; the same Anthropic body). Last, the typed Anthropic body is timed with the
collector running, as in a real request. Medians of the rounds, in milliseconds; no time is
asserted anywhere.
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from harness._convert import to_llm_messages
from harness._providers.anthropic import convert_messages
from harness._validate import request_problems
from hooks import (
    AssistantMessage,
    Cost,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from repos import (
    NO_RESULT_TEXT,
    CompactionEntry,
    MessageEntry,
    Session,
    decode_entry,
    normalize_messages,
    open_session,
)
from repos._codec import FrozenDict, frozen_json

HERE = Path(__file__).resolve().parent
DEFAULT = [HERE / ".data" / "full-seed1" / f"{name}.jsonl" for name in ("s100k", "s10k")]
NO_EXTRA = FrozenDict()


def context_bodies(session: Session) -> list[bytes]:
    """The stored lines of the message entries of the session's first context: those from the
    last compaction's first kept entry on (the few branch summaries there are left out; both
    paths time the same bodies)."""
    ids = session.path_ids(session.leaf_id)
    kinds = session.entry_types(ids)
    start = 0
    if "compaction" in kinds:
        at = len(kinds) - 1 - kinds[::-1].index("compaction")
        compaction = session.get_entry(ids[at])
        assert isinstance(compaction, CompactionEntry)
        start = ids.index(compaction.first_kept_entry_id, 0, at)
    wanted = [i for i, kind in zip(ids[start:], kinds[start:], strict=True) if kind == "message"]
    return [line.rstrip(b"\n") for line in session.raw_lines(wanted)]


# --- one pass with attrs' constructors -----------------------------------------------------


class _Other(Exception):
    """A shape the one-pass prototype leaves to ``decode_entry``."""


_ENTRY = frozenset({"type", "id", "parentId", "timestamp", "message"})
_ASSISTANT = frozenset(
    {"role", "content", "api", "provider", "model", "usage", "stopReason", "errorMessage"}
) | {"timestamp"}
_RESULT = frozenset({"role", "toolCallId", "toolName", "content", "details", "isError"}) | {
    "timestamp"
}
_USER = frozenset({"role", "content", "timestamp"})
_USAGE = frozenset({"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"})
_COST = frozenset({"input", "output", "cacheRead", "cacheWrite", "total"})
_THINKING = frozenset({"type", "thinking", "thinkingSignature"})


def _blocks(raw: Any, assistant: bool) -> tuple[Any, ...]:
    if type(raw) is not list:
        raise _Other
    out: list[Any] = []
    for b in raw:
        kind = b.get("type") if type(b) is dict else None
        if kind == "text" and len(b) == 2 and type(b.get("text")) is str:
            out.append(TextContent(text=b["text"], extra=NO_EXTRA))
        elif assistant and kind == "thinking" and b.keys() <= _THINKING:
            text, sig = b.get("thinking"), b.get("thinkingSignature")
            if type(text) is not str or (sig is not None and type(sig) is not str):
                raise _Other
            out.append(ThinkingContent(thinking=text, thinking_signature=sig, extra=NO_EXTRA))
        elif assistant and kind == "toolCall" and len(b) == 4:
            call_id, name, args = b.get("id"), b.get("name"), b.get("arguments")
            if type(call_id) is not str or type(name) is not str or type(args) is not dict:
                raise _Other
            out.append(
                ToolCall(id=call_id, name=name, arguments=frozen_json(args, 5), extra=NO_EXTRA)
            )
        else:
            raise _Other
    return tuple(out)


def _one_pass(obj: dict[str, Any]) -> MessageEntry:
    m = obj.get("message")
    eid, pid, ts = obj.get("id"), obj.get("parentId"), obj.get("timestamp")
    if (
        type(m) is not dict
        or not obj.keys() <= _ENTRY
        or type(eid) is not str
        or (pid is not None and type(pid) is not str)
        or type(ts) is not str
        or type(m.get("timestamp")) is not int
        or None in m.values()
    ):
        raise _Other
    role, mts = m.get("role"), m["timestamp"]
    msg: Any
    if role == "assistant" and m.keys() <= _ASSISTANT:
        api, provider, model, stop = (
            m.get("api"),
            m.get("provider"),
            m.get("model"),
            m.get("stopReason"),
        )
        u = m.get("usage")
        c = u.get("cost") if type(u) is dict and u.keys() <= _USAGE else None
        if (
            type(api) is not str
            or type(provider) is not str
            or type(model) is not str
            or type(stop) is not str
            or type(c) is not dict
            or not c.keys() <= _COST
            or any(
                type(u.get(k)) is not int for k in ("input", "output", "cacheRead", "cacheWrite")
            )
            or type(u.get("totalTokens")) is not int
        ):
            raise _Other
        cost = Cost(
            input=float(c["input"]),
            output=float(c["output"]),
            cache_read=float(c["cacheRead"]),
            cache_write=float(c["cacheWrite"]),
            total=float(c["total"]),
            extra=NO_EXTRA,
        )
        usage = Usage(
            input=u["input"],
            output=u["output"],
            cache_read=u["cacheRead"],
            cache_write=u["cacheWrite"],
            total_tokens=u["totalTokens"],
            cost=cost,
            extra=NO_EXTRA,
        )
        msg = AssistantMessage(
            content=_blocks(m.get("content"), True),
            api=api,
            provider=provider,
            model=model,
            usage=usage,
            stop_reason=stop,  # type: ignore[arg-type]
            error_message=m.get("errorMessage"),
            timestamp=mts,
            extra=NO_EXTRA,
        )
    elif role == "toolResult" and m.keys() <= _RESULT:
        call_id, name, is_error = m.get("toolCallId"), m.get("toolName"), m.get("isError")
        if type(call_id) is not str or type(name) is not str or type(is_error) is not bool:
            raise _Other
        details = m.get("details")
        msg = ToolResultMessage(
            tool_call_id=call_id,
            tool_name=name,
            content=_blocks(m.get("content"), False),
            details=None if details is None else frozen_json(details, 3),
            is_error=is_error,
            timestamp=mts,
            extra=NO_EXTRA,
        )
    elif role == "user" and m.keys() <= _USER:
        content = m.get("content")
        msg = UserMessage(
            content=content if type(content) is str else _blocks(content, False),
            timestamp=mts,
            extra=NO_EXTRA,
        )
    else:
        raise _Other
    return MessageEntry(id=eid, parent_id=pid, timestamp=ts, message=msg, extra=NO_EXTRA)


def one_pass(obj: dict[str, Any]) -> Any:
    try:
        return _one_pass(obj)
    except _Other:
        return decode_entry(obj)


# --- the JSON path (common shapes only) ----------------------------------------------------


def shape_ok(m: dict[str, Any]) -> bool:
    """The types of a message's fields, as the decoder would check them (common shapes)."""
    role = m.get("role")
    if type(m.get("timestamp")) is not int:
        return False
    if role == "user":
        content = m.get("content")
        return type(content) is str or all(
            type(b) is dict and b.get("type") == "text" and type(b.get("text")) is str
            for b in content
        )
    if role == "assistant":
        u = m.get("usage")
        if type(u) is not dict or any(type(m.get(k)) is not str for k in ("api", "model")):
            return False
        if any(type(u.get(k)) is not int for k in ("input", "output", "cacheRead", "cacheWrite")):
            return False
        cost = u.get("cost")
        if type(cost) is not dict or any(type(v) not in (int, float) for v in cost.values()):
            return False
        for b in m["content"]:
            kind = b.get("type")
            if kind == "toolCall":
                if type(b.get("id")) is not str or type(b.get("arguments")) is not dict:
                    return False
            elif kind in ("text", "thinking") and type(b.get(kind)) is not str:
                return False
        return True
    if role == "toolResult":
        return (
            type(m.get("toolCallId")) is str
            and type(m.get("isError")) is bool
            and all(type(b.get("text")) is str for b in m["content"])
        )
    return False


_TOOL_ID = re.compile(r"[^a-zA-Z0-9_-]")


def json_body(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Normalised (results after their calls, empty text dropped) Anthropic messages."""
    results: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m["role"] == "toolResult":
            results.setdefault(m["toolCallId"], m)
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "toolResult":
            continue
        if role == "user":
            content = m["content"]
            if type(content) is str:
                if content.strip():
                    out.append({"role": "user", "content": content})
                continue
            blocks = [{"type": "text", "text": b["text"]} for b in content if b["text"].strip()]
            if blocks:
                out.append({"role": "user", "content": blocks})
            continue
        blocks, calls = [], []
        for b in m["content"]:
            kind = b["type"]
            if kind == "text":
                if b["text"].strip():
                    blocks.append({"type": "text", "text": b["text"]})
            elif kind == "thinking":
                if b.get("thinkingSignature"):
                    blocks.append(
                        {
                            "type": "thinking",
                            "thinking": b["thinking"],
                            "signature": b["thinkingSignature"],
                        }
                    )
            elif kind == "toolCall":
                calls.append(b)
                tool_id = _TOOL_ID.sub("_", b["id"])[:64]
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": b["name"],
                        "input": dict(b["arguments"]),
                    }
                )
        if blocks:
            out.append({"role": "assistant", "content": blocks})
        if calls:
            answers = []
            for call in calls:
                r = results.pop(call["id"], None)
                content = (
                    [{"type": "text", "text": NO_RESULT_TEXT}]
                    if r is None
                    else [
                        {"type": "text", "text": x["text"]}
                        for x in r["content"]
                        if x["text"].strip()
                    ]
                )
                answers.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": _TOOL_ID.sub("_", call["id"])[:64],
                        "is_error": True if r is None else r["isError"],
                        "content": content,
                    }
                )
            out.append({"role": "user", "content": answers})
    return out


# --- timing --------------------------------------------------------------------------------


def _checked(messages: tuple[Any, ...]) -> tuple[Any, ...]:
    llm = to_llm_messages(messages)
    request_problems(llm)
    return llm


def _loads(bodies: list[bytes]) -> list[Any]:
    return [orjson.loads(b) for b in bodies]


def _loads_messages(bodies: list[bytes]) -> list[Any]:
    return [orjson.loads(b)["message"] for b in bodies]


def _map(f: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    return [f(x) for x in items]


def _all(f: Callable[[Any], bool], items: list[Any]) -> bool:
    return all(map(f, items))


def _normalised(entries: list[Any]) -> tuple[Any, ...]:
    return _checked(normalize_messages([e.message for e in entries]))


def measure(path: Path, rounds: int) -> dict[str, float]:
    """Medians of ``rounds`` rounds (after one untimed round, which pays for the memory)."""
    times: dict[str, list[float]] = {}

    def timed(key: str, step: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter()
        out = step(*args)
        times.setdefault(key, []).append((time.perf_counter() - start) * 1e3)
        return out

    with open_session(path, fsync="never") as session:
        llm_kept = _checked(session.build_context().messages)
        bodies = context_bodies(session)
        # The prototypes must give what the typed path gives, or their times mean nothing.
        objs = _loads(bodies)
        entries = _map(decode_entry, objs)
        if _map(one_pass, objs) != entries:
            raise SystemExit(f"{path}: the one-pass prototype decodes differently")
        if json_body(_loads_messages(bodies)) != convert_messages(_normalised(entries)):
            raise SystemExit(f"{path}: the JSON prototype gives another Anthropic body")
        del objs, entries
        gc.disable()
        try:
            for _ in range(rounds + 1):
                objs = timed("typed: orjson.loads", _loads, bodies)
                entries = timed("typed: decode_entry", _map, decode_entry, objs)
                llm = timed(
                    "typed: normalise + to_llm_messages + request_problems", _normalised, entries
                )
                timed("typed: Anthropic body", convert_messages, llm)
                timed(
                    "one pass, attrs' constructors (instead of decode_entry)", _map, one_pass, objs
                )
                raw = timed("JSON: orjson.loads", _loads_messages, bodies)
                if not timed("JSON: shape check", _all, shape_ok, raw):
                    raise SystemExit(f"{path}: a body the JSON prototype does not handle")
                timed("JSON: normalise + Anthropic body", json_body, raw)
                del objs, entries, llm, raw
        finally:
            gc.enable()
        for _ in range(rounds + 1):
            timed("typed: Anthropic body, collector running", convert_messages, llm_kept)
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    typed = [k for k in med if k.startswith("typed:") and "collector" not in k]
    med["typed path, loads to body"] = sum(med[k] for k in typed)
    med["JSON path, loads to body (lower bound)"] = sum(
        med[k] for k in med if k.startswith("JSON:")
    )
    med["messages"] = len(bodies)
    return med


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("files", nargs="*", type=Path, default=DEFAULT)
    a = ap.parse_args()
    missing = [str(f) for f in a.files if not f.is_file()]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: run bench/gen_workload.py first")
    results = {path.stem: measure(path, a.rounds) for path in a.files}
    names = list(results)
    print(f"| step (ms, medians of {a.rounds} rounds) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for key in results[names[0]]:
        cells = [f"{results[n][key]:,.{0 if key == 'messages' else 1}f}" for n in names]
        print(f"| {key} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
