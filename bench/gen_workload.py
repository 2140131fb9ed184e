"""Workload of the storage benchmarks: pi-format (v3) session files, made from a seed.

Usage (from the repository root):

    .venv/bin/python bench/gen_workload.py [--profile full|quick] [--seed 1] [--data DIR]

writes into ``DIR`` (default ``bench/.data/<profile>-seed<seed>/``, git-ignored) and prints the
folder. A folder whose ``manifest.json`` matches the profile, the seed and this generator's
version is reused as it is; ``manifest.json`` is written last, so an interrupted run is redone.

What the ``full`` profile holds (``quick`` is the same at smaller sizes):

* ``s1k.jsonl``, ``s10k.jsonl``, ``s100k.jsonl``, ``s300k.jsonl``: sessions of exactly that many
  entries after the header, about 2 KB a line: user messages ~0.7 KB, assistant messages ~1.5 KB
  (text, thinking with a signature, tool calls), tool results ~3 KB with one in fifty near 50 KB.
  Each turn is ``user -> (assistant[toolUse] -> toolResult per call)* -> assistant[stop]``. After
  about 3 % of turns the leaf goes back 1-4 turns (half of those through a ``branch_summary``),
  leaving an abandoned branch behind; a few turns get a ``label``; one ``compaction`` sits at
  75 % of the entries, keeping the last 2-4 turns. The file's last line is the leaf.
* ``sessions/--home-dev-projects-acme-app--/``: 1,000 sessions of 10-400 entries (log-uniform),
  named as pi names them (``<timestamp>_<uuid>.jsonl``), each file's mtime its last activity.
  ``folder1000`` is a symlink to that folder (``pi_bench.mjs`` lists it; our repository lists the
  root ``sessions/``).
* ``appendsrc.jsonl``: a 10,000-entry session whose messages the append benchmarks write again.
* ``manifest.json``: per session file its entry count, bytes, leaf id, active-path length, an id
  in the middle of the active path (``mid_id``, the fork point) and the compaction ids; for the
  folder its session count and bytes. The keys ``../shared/bench/pi_bench.mjs`` reads
  (``sessions.<name>.{file, entries, leaf, active_path_len, mid_id}``, ``folder1000.{sessions,
  bytes}``) are all there, so pi can be timed on the same files.

The same seed gives the same bytes (standard library ``random`` and ``orjson``, whose output is
compact JSON with raw UTF-8, as JavaScript's ``JSON.stringify`` writes it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

import orjson

VERSION = 1  # bump when the bytes produced for a seed change
CWD = "/home/dev/projects/acme-app"
PROVIDER, MODEL, API = "anthropic", "claude-sonnet-4-5", "anthropic-messages"
HERE = Path(__file__).resolve().parent

PROFILES: dict[str, dict[str, object]] = {
    "full": {
        "sessions": {"s1k": 1_000, "s10k": 10_000, "s100k": 100_000, "s300k": 300_000},
        "folder": 1_000,
        "append": 10_000,
    },
    "quick": {
        "sessions": {"s1k": 1_000, "s2k": 2_000, "s5k": 5_000},
        "folder": 100,
        "append": 1_000,
    },
}

_VOCAB = (  # noqa: SIM905
    "session entry parent leaf branch message context token cache buffer file path error value "
    "result update config module import export function class return const async await stream "
    "writer reader index tree node json line parse append flush sync compaction summary model "
    "tool call test build check retry timeout server client request response handler state user "
    "assistant schema field type string number list map set array the a to of and in is for "
    "that with on as it be this by are or from at not we can will if all but so has have do"
).split()
_ACCENTS = ("é", "ü", "→", "✓", "—", "東京", "ß", "…", "λ", "ø")
_SNIPPETS = (
    "function {a}({b}) {{\n  return {b}.{a} ?? null;\n}}",
    'const {a} = await fetch("/api/{b}");',
    'if (!{a}) throw new Error("no {b}");',
    "def {a}(self, {b}):\n    return self.{b}.get({a!r})",
    '\t"{a}": {{"path": "C:\\\\work\\\\{b}", "n": {n}}},',
    "# FIXME {a}: {b} is sometimes empty",
    "$ make {a} ARGS=--{b}",
    "Traceback: {a}.py line {n}, in {b}",
    "WARN {a} took {n} ms ({b})",
    "    at {a} (lib/{b}.js:{n}:7)",
)


def corpus(seed: int, size: int = 1 << 20) -> str:
    """About ``size`` characters of prose and code with quotes, backslashes, tabs, newlines and
    non-ASCII, so encoding and escaping cost what real sessions cost."""
    rng = random.Random(seed ^ 0x5EED)
    out: list[str] = []
    total = 0
    while total < size:
        if rng.random() < 0.4:
            piece = rng.choice(_SNIPPETS).format(
                a=rng.choice(_VOCAB), b=rng.choice(_VOCAB), n=rng.randrange(1, 5000)
            )
        else:
            words = [rng.choice(_VOCAB) for _ in range(rng.randrange(5, 20))]
            if rng.random() < 0.2:
                words[rng.randrange(len(words))] = rng.choice(_ACCENTS)
            if rng.random() < 0.1:
                words[rng.randrange(len(words))] = f'"{rng.choice(_VOCAB)}"'
            piece = " ".join(words).capitalize() + "."
        out.append(piece)
        out.append("\n" if rng.random() < 0.7 else " ")
        total += len(piece) + 1
    return "".join(out)


def iso(ms: int) -> str:
    """An ISO timestamp with milliseconds and ``Z``, as pi writes them."""
    moment = datetime.fromtimestamp(ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def name_seed(seed: int, name: str) -> int:
    """A per-file seed that does not depend on Python's randomised ``hash``."""
    return (seed * 1_000_003) ^ zlib.crc32(name.encode())


class SessionWriter:
    """Writes one session: the header, then entries chained by ``parentId`` from the leaf."""

    def __init__(self, rng: random.Random, text: str, start_ms: int) -> None:
        self.rng = rng
        self.text_src = text
        self.clock = start_ms
        self.used: set[str] = set()
        self.parent: dict[str, str | None] = {}
        self.leaf: str | None = None
        self.lines: list[bytes] = []
        self.paths = [f"src/{a}/{b}.ts" for a in _VOCAB[:12] for b in _VOCAB[12:30]]

    # --- small helpers -------------------------------------------------------------------------

    def text(self, n: int) -> str:
        n = max(1, min(n, len(self.text_src) - 1))
        at = self.rng.randrange(len(self.text_src) - n)
        return self.text_src[at : at + n]

    def size(self, lo: int, hi: int) -> int:
        return int(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))

    def uuid4(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"

    def fresh_id(self) -> str:
        while True:
            candidate = f"{self.rng.getrandbits(32):08x}"
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate

    def call_id(self) -> str:
        chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return "toolu_01" + "".join(self.rng.choices(chars, k=22))

    def now(self, lo: float, hi: float) -> int:
        self.clock += int(self.rng.uniform(lo, hi) * 1000)
        return self.clock

    # --- entries -------------------------------------------------------------------------------

    def header(self, session_id: str) -> None:
        self.lines.append(
            orjson.dumps(
                {
                    "type": "session",
                    "version": 3,
                    "id": session_id,
                    "timestamp": iso(self.clock),
                    "cwd": CWD,
                }
            )
            + b"\n"
        )

    def emit(self, kind: str, fields: dict[str, object], parent: str | None = None) -> str:
        entry_id = self.fresh_id()
        parent_id = self.leaf if parent is None else parent
        ms = self.now(0.05, 1.5) if kind != "message" else self.now(0.3, 25.0)
        entry = {"type": kind, "id": entry_id, "parentId": parent_id, "timestamp": iso(ms)}
        entry.update(fields)
        if kind == "message":
            entry["message"]["timestamp"] = ms - self.rng.randrange(1, 50)  # type: ignore[index]
        self.lines.append(orjson.dumps(entry) + b"\n")
        self.parent[entry_id] = parent_id
        self.leaf = entry_id
        return entry_id

    def user(self) -> dict[str, object]:
        n = self.size(30, 2000) if self.rng.random() < 0.96 else self.size(3000, 9000)
        return {"role": "user", "content": [{"type": "text", "text": self.text(n)}]}

    def usage(self, output: int) -> dict[str, object]:
        rng = self.rng
        fresh, read, write = rng.randrange(40, 5000), rng.randrange(0, 150_000), rng.randrange(5000)
        costs = {
            "input": round(fresh * 3e-6, 6),
            "output": round(output * 15e-6, 6),
            "cacheRead": round(read * 3e-7, 6),
            "cacheWrite": round(write * 3.75e-6, 6),
        }
        costs["total"] = round(sum(costs.values()), 6)
        return {
            "input": fresh,
            "output": output,
            "cacheRead": read,
            "cacheWrite": write,
            "totalTokens": fresh + output + read + write,
            "cost": costs,
        }

    def tool_call(self) -> dict[str, object]:
        pick, where = self.rng.random(), self.rng.choice(self.paths)
        args: dict[str, object]
        if pick < 0.4:
            name, args = "read", {"path": where}
        elif pick < 0.7:
            name, args = "bash", {"command": self.text(self.size(10, 250)).replace("\n", "; ")}
        elif pick < 0.88:
            old, new = self.text(self.size(40, 1200)), self.text(self.size(40, 1500))
            name, args = "edit", {"path": where, "oldText": old, "newText": new}
        elif pick < 0.95:
            name, args = "write", {"path": where, "content": self.text(self.size(200, 5000))}
        else:
            name, args = "grep", {"pattern": self.rng.choice(_VOCAB), "path": "src"}
        return {"type": "toolCall", "id": self.call_id(), "name": name, "arguments": args}

    def assistant(self, final: bool) -> dict[str, object]:
        blocks: list[dict[str, object]] = []
        if self.rng.random() < 0.35:
            thought = self.text(self.size(100, 2200))
            signature = self.text(300).encode().hex()[:400]
            blocks.append({"type": "thinking", "thinking": thought, "thinkingSignature": signature})
        if final or self.rng.random() < 0.6:
            n = self.size(40, 1800) if final else self.size(20, 300)
            blocks.append({"type": "text", "text": self.text(n)})
        if not final:
            calls = 1 if self.rng.random() < 0.75 else self.rng.choice((2, 2, 2, 3))
            blocks.extend(self.tool_call() for _ in range(calls))
        output = sum(len(orjson.dumps(b)) for b in blocks) // 4 + 1
        return {
            "role": "assistant",
            "content": blocks,
            "api": API,
            "provider": PROVIDER,
            "model": MODEL,
            "usage": self.usage(output),
            "stopReason": "stop" if final else "toolUse",
        }

    def tool_result(self, call: dict[str, object]) -> dict[str, object]:
        name, args = str(call["name"]), call["arguments"]
        assert isinstance(args, dict)
        details: dict[str, object] | None = None
        if self.rng.random() < 0.02:
            out = self.text(self.rng.randrange(47_000, 54_000))  # a big file read or log
        elif name == "read":
            out = self.text(self.size(300, 14_000))
        elif name == "bash":
            out = self.text(self.size(20, 6000))
        elif name == "edit":
            out = f"Successfully replaced text in {args['path']}."
            details = {"diff": self.text(self.size(80, 3000)), "firstChangedLine": 1 + len(out)}
        elif name == "write":
            out = f"Successfully wrote {len(str(args['content']))} bytes to {args['path']}"
        else:
            out = self.text(self.size(50, 3000))
        result: dict[str, object] = {
            "role": "toolResult",
            "toolCallId": call["id"],
            "toolName": name,
            "content": [{"type": "text", "text": out}],
        }
        if details is not None:
            result["details"] = details
        result["isError"] = self.rng.random() < 0.03
        return result


def session(
    entries: int, seed: int, text: str, start_ms: int, *, compaction: bool = True
) -> tuple[list[bytes], dict[str, object]]:
    """The lines of a session of exactly ``entries`` entries, and facts about it."""
    rng = random.Random(seed)
    w = SessionWriter(rng, text, start_ms)
    session_id = w.uuid4()
    w.header(session_id)
    facts: dict[str, object] = {"session_id": session_id}
    compactions: list[dict[str, str]] = []
    branches = summaries = labels = 0
    compact_at = int(entries * 0.75) if compaction else None
    starts: list[str] = []  # user messages of the turns on the active path (since compaction)
    ends: list[str] = []  # their final assistant messages

    def room() -> bool:
        return len(w.parent) < entries

    w.emit("model_change", {"provider": PROVIDER, "modelId": MODEL})
    if room():
        w.emit("thinking_level_change", {"thinkingLevel": "medium"})
    while room():
        starts.append(w.emit("message", {"message": w.user()}))
        if room() and len(w.parent) == 3:
            w.emit("session_info", {"name": w.text(48).replace("\n", " ").strip()})
        finished = True
        for _ in range(min(10, 1 + int(rng.expovariate(0.4)))):
            if not room():
                finished = False
                break
            reply = w.assistant(final=False)
            w.emit("message", {"message": reply})
            for block in reply["content"]:  # type: ignore[attr-defined]
                if block["type"] == "toolCall" and room():
                    w.emit("message", {"message": w.tool_result(block)})
        if not finished or not room():
            break
        ends.append(w.emit("message", {"message": w.assistant(final=True)}))
        if room() and rng.random() < 0.004:
            level = rng.choice(("low", "medium", "high"))
            w.emit("thinking_level_change", {"thinkingLevel": level})
        if room() and rng.random() < 0.006:
            name = rng.choice(("checkpoint", "good", "before-refactor"))
            w.emit("label", {"targetId": rng.choice(starts[-6:]), "label": name})
            labels += 1
        if room() and compact_at is not None and len(w.parent) >= compact_at and len(starts) > 2:
            kept = starts[-rng.randrange(2, min(5, len(starts)))]
            fields = {
                "summary": "## Goal\n" + w.text(w.size(1500, 5000)),
                "firstKeptEntryId": kept,
                "tokensBefore": rng.randrange(100_000, 190_000),
                "details": {
                    "readFiles": rng.sample(w.paths, 5),
                    "modifiedFiles": rng.sample(w.paths, 3),
                },
            }
            compactions.append({"id": w.emit("compaction", fields), "firstKeptEntryId": kept})
            compact_at = None
            starts, ends = [], []  # never go back across the compaction
        elif room() and len(ends) >= 5 and rng.random() < 0.03:
            back = rng.randrange(1, 5)
            target = ends[-1 - back]
            del starts[-back:], ends[-back:]
            branches += 1
            if rng.random() < 0.5:
                summary = {"fromId": target, "summary": w.text(w.size(300, 2500))}
                w.emit("branch_summary", summary, parent=target)
                summaries += 1
            else:
                w.leaf = target  # the next user message starts the new branch there
    path: list[str] = []
    cursor = w.leaf
    while cursor is not None:
        path.append(cursor)
        cursor = w.parent[cursor]
    facts.update(
        entries=len(w.parent),
        bytes=sum(len(line) for line in w.lines),
        leaf=w.leaf,
        active_path_len=len(path),
        mid_id=path[len(path) // 2],  # leaf-first: root..mid holds len - len // 2 entries
        compactions=compactions,
        branches=branches,
        branch_summaries=summaries,
        labels=labels,
        end_ms=w.clock,
    )
    return w.lines, facts


def write_file(path: Path, lines: list[bytes], mtime_ms: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for at in range(0, len(lines), 4096):
            f.write(b"".join(lines[at : at + 4096]))
    os.replace(tmp, path)
    os.utime(path, (mtime_ms / 1000, mtime_ms / 1000))


def encode_cwd(cwd: str) -> str:
    """pi's folder name for a cwd: ``/home/dev/x`` -> ``--home-dev-x--``."""
    return "--" + cwd.lstrip("/\\").replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def default_dir(profile: str, seed: int) -> Path:
    return HERE / ".data" / f"{profile}-seed{seed}"


def _wanted(profile: str, seed: int) -> dict[str, object]:
    return {
        "generator": "bench/gen_workload.py",
        "version": VERSION,
        "profile": profile,
        "seed": seed,
    }


def ensure(profile: str = "full", seed: int = 1, data: Path | None = None) -> Path:
    """The workload folder, generated unless a matching one is there already."""
    dest = data or default_dir(profile, seed)
    try:
        manifest = json.loads((dest / "manifest.json").read_text())
        if all(manifest.get(k) == v for k, v in _wanted(profile, seed).items()):
            return dest
    except (OSError, ValueError):
        pass
    generate(dest, profile, seed)
    return dest


def generate(dest: Path, profile: str, seed: int) -> dict[str, object]:
    spec = PROFILES[profile]
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").unlink(missing_ok=True)
    text = corpus(seed)
    manifest: dict[str, object] = dict(_wanted(profile, seed), cwd=CWD)
    files: dict[str, dict[str, object]] = {}
    base = int(datetime(2026, 1, 5, 9, 0, tzinfo=UTC).timestamp() * 1000)
    sizes = dict(spec["sessions"])  # type: ignore[call-overload]
    sizes["appendsrc"] = spec["append"]
    for name, n in sizes.items():
        started = time.perf_counter()
        lines, facts = session(n, name_seed(seed, name), text, base)
        write_file(dest / f"{name}.jsonl", lines, int(facts.pop("end_ms")))  # type: ignore[arg-type]
        files[name] = dict(facts, file=f"{name}.jsonl")
        mib = int(facts["bytes"]) / 1048576  # type: ignore[call-overload]
        took = time.perf_counter() - started
        print(f"{name}: {n:,} entries, {mib:.1f} MiB, {took:.1f} s", file=sys.stderr)
    manifest["sessions"] = files

    count = int(spec["folder"])  # type: ignore[call-overload]
    root = dest / "sessions"
    folder = root / encode_cwd(CWD)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jsonl"):
        old.unlink()
    rng = random.Random(name_seed(seed, "folder"))
    started = time.perf_counter()
    total_bytes = total_entries = 0
    first = int(datetime(2025, 9, 1, tzinfo=UTC).timestamp() * 1000)
    for i in range(count):
        n = int(math.exp(rng.uniform(math.log(10), math.log(400))))
        start = first + i * 5_400_000 + rng.randrange(3_600_000)
        lines, facts = session(n, name_seed(seed, f"folder/{i}"), text, start, compaction=n >= 200)
        stamp = iso(start).replace(":", "-").replace(".", "-")
        write_file(folder / f"{stamp}_{facts['session_id']}.jsonl", lines, int(facts["end_ms"]))  # type: ignore[call-overload]
        total_bytes += int(facts["bytes"])  # type: ignore[call-overload]
        total_entries += n
    link = dest / f"folder{count}"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path("sessions") / folder.name)
    took = time.perf_counter() - started
    print(f"folder{count}: {count} sessions, {total_bytes / 1048576:.1f} MiB, {took:.1f} s",
          file=sys.stderr)  # fmt: skip
    manifest["folder"] = f"folder{count}"
    manifest[f"folder{count}"] = {
        "sessions": count,
        "entries": total_entries,
        "bytes": total_bytes,
        "root": "sessions",
        "dir": f"sessions/{folder.name}",
    }
    tmp = dest / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, dest / "manifest.json")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--profile", choices=sorted(PROFILES), default="full")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", type=Path, help="folder to write (default bench/.data/...)")
    ap.add_argument("--force", action="store_true", help="regenerate even if present")
    a = ap.parse_args(argv)
    dest = a.data or default_dir(a.profile, a.seed)
    if a.force:
        generate(dest, a.profile, a.seed)
    else:
        ensure(a.profile, a.seed, dest)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
