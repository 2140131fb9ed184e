"""Storage benchmarks of issue 9: ours, plain-Python floors and pi, side by side in one run.

Run from the repository root:

    .venv/bin/python bench/bench_storage.py [--runs 3] [--quick] [--json OUT] [--no-pi]
        [--only open,append,list,fork,create,memory,bus,start]

* The workload comes from ``bench/gen_workload.py`` (generated into ``bench/.data/`` on the first
  run, reused afterwards).
* *ours*: ``repos`` (``open_session``, ``Session.build_context``/``append_message``/``sync``,
  ``JsonlSessionRepo.create``/``list``/``fork``), with the garbage collector as the library leaves
  it. *floors*: plain Python with orjson on the same files (GC paused: the best plain Python
  does). *pi*: ``SessionManager`` of ``@mariozechner/pi-coding-agent`` 0.73.1, timed by
  ``../shared/bench/pi_bench.mjs`` on the same files, installed with npm into
  ``~/.cache/jsonl-harness-bench/pi-0.73.1`` when missing.
* Every figure is the median of ``--runs`` runs (small operations: of at least 21), each after
  one untimed call (whichever row ran first in the process paid for its memory). Each of ours,
  its floors and pi take turns, round by round (``timed_rounds``): a ratio compares calls made
  seconds apart, never minutes. pi runs one ``pi_bench.mjs --only OP --reps 1`` per round and
  reports its own timing. What depends on process state (``list`` in a fresh process, memory,
  the growth table) runs in a fresh subprocess per run and is timed inside it (interpreter start
  and imports excluded); the rest runs here.
* ``list`` is timed cold (a fresh process, no persistent list cache: every file is read), warm
  (a fresh process, the persistent cache filled) and repeated in one process.
* Floors do the work ours does and nothing more: the context floor reads the bodies it needs
  from memory (the file mapped), as ours may, not with one ``pread`` per entry.
* ``--quick`` is a smoke run on small sizes (1k-5k entries, 100 sessions), without pi.
* The run closes with issue 24's table (``bench/_issue24.py``): every row of the issue beside
  its floor and peers, target and verdict. The storage rows are those of the table above; the
  bus row is ``bench/bench_events.py``'s measurement (``bus_us``, group ``bus``), the start-up
  rows ``bench/bench_start.py``'s (``measure``, group ``start``: ``import harness``, ``harness
  --help``, ``harness sessions list`` over the folder's size of small sessions, cached), both
  imported and run here; the database rows say they come from ``bench/bench_repos.py``'s run
  (which prints them in the same columns), the test-suite row from the lone-clone run.

Exit status 1 when one of our operations failed (its row says why); targets missed do not
change the exit status (speed is never asserted in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import inspect
import json
import mmap
import os
import platform
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
SHARED_BENCH = HERE.parent.parent / "shared" / "bench"
PI_VERSION = "0.73.1"
PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_DIR = Path.home() / ".cache" / "jsonl-harness-bench" / f"pi-{PI_VERSION}"
MIB = 1048576
CACHE_ENV = "HARNESS_CACHE_DIR"  # where JsonlSessionRepo keeps its persistent list cache
DASH, TIMES = "\u2013", "\u00d7"  # en dash (nothing to show), times sign (ratios)


def _load_sibling(name: str) -> Any:
    """``bench/NAME.py`` as a module (bench/ is no package, and this file is also loaded by
    path, so its folder is not always on ``sys.path``)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


issue24 = _load_sibling("_issue24")


# --- sizes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    profile: str
    big: str  # the 100k file of the issue's table
    mid: str  # the 10k file
    growth: tuple[str, ...]
    ref: str  # the growth table compares the largest size with this one
    folder: int  # also the sessions `harness sessions list` lists in the start-up rows
    append: int
    dispatches: int  # bus dispatches per round (bench_events.bus_us)


# Groups of rows --only can pick (open: open, first context and resume; memory: the RSS rows
# and the growth table; append: its rows and the system-call count; bus and start: issue 24's
# rows of bench_events.py and bench_start.py, printed in the closing table only).
GROUPS = ("open", "append", "list", "fork", "create", "memory", "bus", "start")

FULL = Sizes(
    "full", "s100k", "s10k", ("s1k", "s10k", "s100k", "s300k"), "s10k", 1000, 10_000, 20_000
)
QUICK = Sizes("quick", "s5k", "s1k", ("s1k", "s2k", "s5k"), "s1k", 100, 1000, 2_000)
START_ROUNDS = 11  # bench_start.py's default: a command's CPU time varies more than a call's
BUS_RECEIVERS = 10  # the issue's bus row
# bench_start.COMMANDS -> the figures' key (start.KEY.cpu/.wall/.imports)
START_KEYS = {
    "python -c pass (floor)": "floor",
    "import harness": "import",
    "harness --help": "help",
    "harness sessions list": "list",
}


def label(name_or_count: str | int) -> str:
    """``s100k`` or 100000 -> ``100k``; 1000 -> ``1,000`` for session counts."""
    if isinstance(name_or_count, str):
        return name_or_count.removeprefix("s")
    n = name_or_count
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else f"{n:,}"


def row_names(quick: bool = False) -> list[str]:
    """The operations of the table, in order (the smoke test checks each is printed)."""
    s = QUICK if quick else FULL
    big, mid, n, folder = label(s.big), label(s.mid), label(s.append), f"{s.folder:,}"
    return [
        f"open {big}",
        f"first build_context after open, {big}",
        f"first build_context after open, {mid}",
        f"resume = open + first context, {big}",
        f"append {n}, no fsync",
        f"append {n}, fsync each",
        f"append {n}, fsync every 100",
        f"list {folder}, cold: fresh process, no persistent cache",
        f"list {folder}, warm: fresh process, persistent cache",
        f"list {folder}, repeat call in one process",
        f"fork at mid-path, {big}, from an open Session",
        f"fork at mid-path, {big}, from a path (the file open in this process)",
        f"fork at mid-path, {big}, from a path not open in this process",
        "create + first 2 messages",
        f"RSS held after open + first context, {big}",
        f"peak RSS during open, {big}",
    ]


def issue24_row_names(quick: bool = False) -> list[str]:
    """The closing table's rows: issue 24's table, in its order (the smoke test checks each is
    printed). The storage rows keep their names in the table above; the fork row is two, as
    there (the file open in this process, and open nowhere)."""
    s = QUICK if quick else FULL
    names = row_names(quick)
    return [
        names[1],  # first build_context, big
        names[2],  # first build_context, mid
        names[4],  # append, no fsync
        names[5],  # append, fsync each
        names[11],  # fork from a path (the file open in this process)
        names[12],  # fork from a path not open in this process
        f"bus dispatch, {BUS_RECEIVERS} sync receivers",
        issue24.resume_name(issue24.SQLITE_RESUME),
        issue24.resume_name(issue24.POSTGRES_RESUME),
        "import harness",
        "harness --help",
        f"harness sessions list, {s.folder:,} sessions, cached",
        "the README's test command, lone clone",
    ]


# --- process memory ------------------------------------------------------------------------------


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: ``5`` into ``/proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# --- floors: plain Python + orjson on the same files ---------------------------------------------

# pi and we write an entry's first keys in this order; a line that does not start so is parsed.
_HEAD = re.compile(rb'\{"type":"([^"]+)","id":"([^"]+)","parentId":(?:"([^"]+)"|null)')


@dataclass
class LazyIndex:
    """id -> (parent id, type, offset, length) of its line; ids and types stay bytes. Bodies
    are read back by span from the file mapped into memory (no system call per entry: ours
    may read them from memory too)."""

    path: Path
    header: dict[str, Any]
    rows: dict[bytes, tuple[bytes | None, bytes, int, int]]
    leaf: bytes | None

    def read(self, view: memoryview, entry_id: bytes) -> memoryview:
        _, _, offset, length = self.rows[entry_id]
        return view[offset : offset + length]


class _GcPaused:
    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


_CHUNK = 8 << 20  # reading a 200 MiB file into one bytes object costs more than indexing it


def floor_lazy_index(path: Path) -> LazyIndex:
    """Read the file in 8 MiB chunks; take type/id/parentId from each line's first bytes (a
    regex), parse nothing else (a line not starting so is parsed whole)."""
    rows: dict[bytes, tuple[bytes | None, bytes, int, int]] = {}
    leaf: bytes | None = None
    header: dict[str, Any] | None = None
    match, loads = _HEAD.match, orjson.loads
    with open(path, "rb", buffering=0) as f, _GcPaused():
        base, tail = 0, b""
        while chunk := f.read(_CHUNK):
            buf = tail + chunk if tail else chunk
            find = buf.find
            end = buf.rfind(b"\n") + 1
            pos = 0
            if header is None and end:
                pos = find(b"\n") + 1
                header = loads(buf[: pos - 1])
            while pos < end:
                nl = find(b"\n", pos)
                m = match(buf, pos)
                if m is not None:
                    kind, eid, parent = m.groups()
                else:
                    obj = loads(buf[pos:nl])
                    kind, eid = obj["type"].encode(), obj["id"].encode()
                    parent = obj["parentId"].encode() if obj.get("parentId") else None
                rows[eid] = (parent, kind, base + pos, nl - pos)
                leaf = eid
                pos = nl + 1
            tail = buf[end:]
            base += end
    if header is None:
        raise ValueError(f"{path}: no header line")
    return LazyIndex(path, header, rows, leaf)


_CONTEXT_TYPES = (b"message", b"custom_message", b"branch_summary")


def floor_lazy_context(ix: LazyIndex) -> tuple[list[Any], dict[str, Any]]:
    """The path from the leaf, settings from the few model/thinking entries on it, and the
    bodies from the latest compaction's first kept entry on (only those are read and parsed)."""
    with open(ix.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        with _GcPaused():
            rows, loads, read = ix.rows, orjson.loads, ix.read
            path: list[bytes] = []
            cur = ix.leaf
            while cur is not None:
                path.append(cur)
                cur = rows[cur][0]
            path.reverse()
            settings: dict[str, Any] = {}
            compaction_at = None
            for i, eid in enumerate(path):
                kind = rows[eid][1]
                if kind == b"compaction":
                    compaction_at = i
                elif kind == b"model_change" or kind == b"thinking_level_change":
                    settings[kind.decode()] = loads(read(view, eid))
            messages: list[Any] = []
            body = path
            if compaction_at is not None:
                compaction = loads(read(view, path[compaction_at]))
                messages.append({"role": "compactionSummary", "summary": compaction["summary"]})
                kept = path.index(compaction["firstKeptEntryId"].encode(), 0, compaction_at)
                body = path[kept:compaction_at] + path[compaction_at + 1 :]
            for eid in body:
                if rows[eid][1] in _CONTEXT_TYPES:
                    messages.append(loads(read(view, eid)))
        view.release()
    return messages, settings


def floor_full_parse(path: Path) -> dict[str, Any]:
    """orjson.loads of every line, GC paused; entries by id."""
    with open(path, "rb") as f:
        data = f.read()
    with _GcPaused():
        lines = data.split(b"\n")
        entries = {}
        for line in lines[1:]:
            if line:
                obj = orjson.loads(line)
                entries[obj["id"]] = obj
    return entries


def floor_fork(ix: LazyIndex, mid: bytes, dest: Path, *, fsync: bool) -> int:
    """Copy the raw lines of the path root -> ``mid`` (read by span) after a new header."""
    rows = ix.rows
    ids: list[bytes] = []
    cur: bytes | None = mid
    while cur is not None:
        ids.append(cur)
        cur = rows[cur][0]
    ids.reverse()
    header = dict(ix.header, id=secrets.token_hex(16), timestamp=_iso_now())
    chunks = [orjson.dumps(header) + b"\n"]
    fd = os.open(ix.path, os.O_RDONLY)
    try:
        for i in ids:
            _, _, offset, length = rows[i]
            chunks.append(os.pread(fd, length + 1, offset))
    finally:
        os.close(fd)
    with open(dest, "wb") as f:
        f.write(b"".join(chunks))
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    if fsync:
        _fsync_dir(dest.parent)
    return len(ids)


# Entry ids as ours makes them: a seeded PRNG, not a system call per id (they need to be
# unique in their file, not secret).
_ids = random.Random(secrets.randbits(64))


def floor_append(dest: Path, messages: list[dict[str, Any]], *, fsync_every: int) -> None:
    """One ``orjson.dumps`` + one ``write`` per entry on an O_APPEND descriptor; ``fsync_every``
    0 never fsyncs."""
    fd = os.open(dest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        parent = None
        for n, message in enumerate(messages, 1):
            eid = _ids.getrandbits(32).to_bytes(4, "big").hex()
            entry = {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": _iso_now(),
                "message": message,
            }
            os.write(fd, orjson.dumps(entry) + b"\n")
            parent = eid
            if fsync_every and n % fsync_every == 0:
                os.fsync(fd)
        if fsync_every:
            os.fsync(fd)
    finally:
        os.close(fd)


def floor_create(folder: Path, cwd: str, user: Any, assistant: Any, *, fsync: bool) -> Path:
    """A new file, created exclusively, holding the header and two message lines."""
    sid = secrets.token_hex(16)
    stamp = _iso_now()
    path = folder / f"{stamp.replace(':', '-').replace('.', '-')}_{sid}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
    try:
        header = {"type": "session", "version": 3, "id": sid, "timestamp": stamp, "cwd": cwd}
        os.write(fd, orjson.dumps(header) + b"\n")
        parent = None
        for message in (user, assistant):
            eid = _ids.getrandbits(32).to_bytes(4, "big").hex()
            entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": _iso_now()}
            entry["message"] = message
            os.write(fd, orjson.dumps(entry) + b"\n")
            parent = eid
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if fsync:
        _fsync_dir(folder)
    return path


def floor_list_head(root: Path) -> list[tuple[str, str, str, float]]:
    """Per file: read the first 16 KiB, parse the header and the first user message; fstat."""
    out = []
    for sub in os.scandir(root):
        if not sub.is_dir():
            continue
        for entry in os.scandir(sub.path):
            if not entry.name.endswith(".jsonl"):
                continue
            with open(entry.path, "rb") as f:
                head = f.read(16384)
                st = os.fstat(f.fileno())
            lines = head.split(b"\n")
            header = orjson.loads(lines[0])
            first = ""
            for line in lines[1:-1]:
                if b'"role":"user"' in line:
                    first = orjson.loads(line)["message"]["content"][0]["text"]
                    break
            out.append((header["id"], header["cwd"], first, st.st_mtime))
    out.sort(key=lambda t: t[3], reverse=True)
    return out


def floor_list_stat(root: Path) -> list[tuple[str, int, float]]:
    """Only a stat of each file (what a cache keyed by size and mtime needs)."""
    out = []
    for sub in os.scandir(root):
        if sub.is_dir():
            for entry in os.scandir(sub.path):
                if entry.name.endswith(".jsonl"):
                    st = entry.stat()
                    out.append((entry.path, st.st_size, st.st_mtime))
    return out


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- subprocess workers --------------------------------------------------------------------------


def worker(kind: str, target: str, expect: int) -> dict[str, Any]:
    """Runs in a fresh interpreter (``--worker``); returns one JSON object."""
    from repos import JsonlSessionRepo, open_session

    path = Path(target)
    if kind == "list":
        repo = JsonlSessionRepo(path, fsync="never")

        async def timed() -> tuple[float, int]:
            start = time.perf_counter()
            infos = await repo.list()
            return (time.perf_counter() - start) * 1e3, len(infos)

        ms, count = asyncio.run(timed())
        if count != expect:
            raise SystemExit(f"list gave {count} sessions, expected {expect}")
        return {"ms": ms}
    if kind.startswith("append-calls-"):
        append_calls(kind.removeprefix("append-calls-"), path, expect)
        return {}
    if kind == "list-head":
        start = time.perf_counter()
        count = len(floor_list_head(path))
        ms = (time.perf_counter() - start) * 1e3
        if count != expect:
            raise SystemExit(f"head floor saw {count} sessions, expected {expect}")
        return {"ms": ms}
    # memory and growth: one open + first context in this fresh process
    gc.collect()
    base = _status_kib("VmRSS")
    peak_ok = _reset_peak()
    start = time.perf_counter()
    held: Any
    if kind == "ours":
        session = open_session(path, fsync="never")
        opened = time.perf_counter()
        peak_open = _status_kib("VmHWM")
        context = session.build_context()
        if len(session) != expect or not context.messages:
            raise SystemExit(f"open saw {len(session)} entries, expected {expect}")
        held = (session, context)
    elif kind == "lazy":
        ix = floor_lazy_index(path)
        opened = time.perf_counter()
        peak_open = _status_kib("VmHWM")
        held = (ix, floor_lazy_context(ix))
    elif kind == "full":
        entries = floor_full_parse(path)
        opened = time.perf_counter()
        peak_open = _status_kib("VmHWM")
        held = entries
    else:
        raise SystemExit(f"unknown worker {kind}")
    done = time.perf_counter()
    rss = _status_kib("VmRSS")
    del held
    return {
        "open_ms": (opened - start) * 1e3,
        "context_ms": (done - opened) * 1e3,
        "rss_mib": (rss - base) / 1024,
        "peak_open_mib": (peak_open - base) / 1024 if peak_ok else None,
    }


def run_worker(
    kind: str, target: Path, expect: int, *, cache: Path | None = None
) -> dict[str, Any]:
    """``worker`` in a fresh interpreter; ``cache``: the list cache folder it uses."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, str(target)]
    cmd += ["--expect", str(expect)]
    env = dict(os.environ)
    if cache is not None:
        env[CACHE_ENV] = str(cache)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"worker {kind} failed: {tail[0]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- system calls per append (strace) -------------------------------------------------------------

APPEND_PATHS = {
    "single": "ours: append_message, one per call",
    "batch": "ours: append_messages, 8 per call (a tool batch)",
    "floor": "floor: orjson.dumps + write",
    "single-fsync": 'ours: append_message, fsync="always"',
    "floor-fsync": "floor: orjson.dumps + write + fsync",
}
_BATCH = 8


def append_calls(mode: str, folder: Path, n: int) -> None:
    """Append ``n`` messages (``mode``: one of :data:`APPEND_PATHS`) to a new session in
    ``folder``; run under strace, with n = 0 as the baseline."""
    from hooks import UserMessage
    from repos import JsonlSessionRepo

    messages = [UserMessage(content=f"message {i}") for i in range(n)]
    fsync = mode.endswith("-fsync")
    if mode.startswith("floor"):
        raw = [{"role": "user", "content": m.content, "timestamp": m.timestamp} for m in messages]
        floor_append(folder / "floor.jsonl", raw, fsync_every=1 if fsync else 0)
        return

    async def run() -> None:
        policy = "always" if fsync else "never"
        with await JsonlSessionRepo(folder, fsync=policy).create("/bench") as session:
            session.append_message(UserMessage(content="first"))  # the file's descriptors open
            if mode.startswith("single"):
                for m in messages:
                    session.append_message(m)
            else:
                for i in range(0, n, _BATCH):
                    session.append_messages(messages[i : i + _BATCH])

    asyncio.run(run())


_STRACE_TOTAL = re.compile(r"^\S+\s+\S+\s+(?:\S+\s+)?(\d+)(?:\s+\d+)?\s+total$")


def syscalls_per_append(work: Path, n: int) -> dict[str, float] | str:
    """System calls per append of each of :data:`APPEND_PATHS` (strace -c -f, the difference
    between ``n`` appends and none, over ``n``), or why they were not counted."""
    strace = shutil.which("strace")
    if strace is None:
        return "strace not found"
    out: dict[str, float] = {}
    for mode in APPEND_PATHS:
        totals = []
        for count in (0, n):
            folder = work / f"calls-{mode}-{count}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            report = folder / "strace.txt"
            cmd = [strace, "-f", "-c", "-o", str(report), sys.executable]
            cmd += [str(Path(__file__).resolve()), "--worker", f"append-calls-{mode}"]
            cmd += [str(folder), "--expect", str(count)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                return f"strace failed: {tail[0]}"
            total = None
            for line in report.read_text().splitlines():
                m = _STRACE_TOTAL.match(line.strip())
                if m:
                    total = int(m.group(1))
            if total is None:
                return "strace printed no total"
            totals.append(total)
        out[mode] = (totals[1] - totals[0]) / n
    return out


# --- measuring -----------------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed_runs(
    runs: int,
    fn: Callable[[Any], Any],
    setup: Callable[[], Any] | None = None,
    teardown: Callable[[Any], Any] | None = None,
) -> list[float]:
    """``runs`` timings (ms) of ``fn``, after one untimed call: the first call in a process
    pays for memory the allocator has not got yet, and whichever of two rows ran first paid
    it (ours, which ran before its floors, by up to 25 %)."""
    times = []
    for i in range(runs + 1):
        ctx = setup() if setup else None
        gc.collect()  # between runs only; never around the timed call
        start = time.perf_counter()
        result = fn(ctx)
        if i:
            times.append((time.perf_counter() - start) * 1e3)
        if teardown:
            teardown(result)  # what the timed call returned
    return times


async def atimed_runs(
    runs: int,
    fn: Callable[[Any], Awaitable[Any]],
    setup: Callable[[], Awaitable[Any]] | None = None,
    teardown: Callable[[Any], Awaitable[Any]] | None = None,
) -> list[float]:
    """:func:`timed_runs` of a coroutine function (one untimed call first, too)."""
    times = []
    for i in range(runs + 1):
        ctx = await setup() if setup else None
        gc.collect()
        start = time.perf_counter()
        await fn(ctx)
        if i:
            times.append((time.perf_counter() - start) * 1e3)
        if teardown:
            await teardown(ctx)
    return times


Series = tuple[Callable[[Any], Any], Callable[[], Any] | None, Callable[[Any], Any] | None]


@dataclass(frozen=True)
class Measured:
    """What a series' call returns when the time was taken where the work ran (a fresh
    process, pi's own script): that time, not the call's, is the sample."""

    ms: float


async def timed_rounds(runs: int, series: dict[str, Series]) -> dict[str, list[float] | Exception]:
    """:func:`timed_runs` of several (fn, setup, teardown) series taking turns: one untimed
    call of each, then ``runs`` rounds of one timed call of each; any of the three may be a
    coroutine function. A ratio of two series then compares calls made seconds apart, not
    minutes (this machine's speed drifts by tens of per cent over minutes). A series that
    raises is left out of later rounds (its error returned)."""
    out: dict[str, list[float] | Exception] = {key: [] for key in series}

    async def call(f: Callable[..., Any], *args: Any) -> Any:
        result = f(*args)
        return await result if inspect.isawaitable(result) else result

    for i in range(runs + 1):
        for key, (fn, setup, teardown) in series.items():
            times = out[key]
            if isinstance(times, Exception):
                continue
            try:
                ctx = await call(setup) if setup else None
                gc.collect()
                start = time.perf_counter()
                result = await call(fn, ctx)
                took = (time.perf_counter() - start) * 1e3
                if isinstance(result, Measured):
                    took = result.ms
                if teardown:
                    await call(teardown, result)
            except Exception as exc:
                out[key] = exc
                continue
            if i:
                times.append(took)
    return out


@dataclass
class Figures:
    """Medians by key; a failed measurement keeps its error instead."""

    values: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    spread: dict[str, tuple[float, float]] = field(default_factory=dict)

    def put(self, key: str, samples: list[float]) -> float:
        value = statistics.median(samples)
        self.values[key] = value
        self.spread[key] = (min(samples), max(samples))
        log(f"  {key:<34} {fmt(value):>9}   (min {fmt(min(samples))}, max {fmt(max(samples))})")
        return value

    def fail(self, key: str, exc: BaseException) -> None:
        self.values[key] = None
        self.errors[key] = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
        log(f"  {key:<34} FAILED {self.errors[key]}")

    def get(self, key: str) -> float | None:
        return self.values.get(key)


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return DASH
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3f}"
    return text + unit


# --- the benchmark -------------------------------------------------------------------------------


class Bench:
    def __init__(
        self, data: Path, sizes: Sizes, runs: int, pi: Pi | None, only: Collection[str] = GROUPS
    ) -> None:
        self.only = only
        self.pi = pi
        self.data = data
        self.sizes = sizes
        self.runs = runs
        self.small_runs = max(runs, 21)
        self.manifest = json.loads((data / "manifest.json").read_text())
        self.fig = Figures()
        self.work = data / f"work-{os.getpid()}"
        self.growth: list[dict[str, Any]] = []
        self.calls: dict[str, float] | str = "not run"

    def file(self, name: str) -> Path:
        return self.data / self.manifest["sessions"][name]["file"]

    def facts(self, name: str) -> dict[str, Any]:
        facts: dict[str, Any] = self.manifest["sessions"][name]
        return facts

    def scratch(self, name: str) -> Path:
        folder = self.work / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def attempt(self, key: str, measure: Callable[[], list[float]]) -> None:
        try:
            self.fig.put(key, measure())
        except Exception as exc:
            self.fig.fail(key, exc)

    async def aattempt(self, key: str, measure: Callable[[], Awaitable[list[float]]]) -> None:
        try:
            self.fig.put(key, await measure())
        except Exception as exc:
            self.fig.fail(key, exc)

    async def attempt_rounds(
        self, series: dict[str, Series], *, runs: int = 0, pi_keys: Collection[str] = ()
    ) -> None:
        """:func:`timed_rounds` of ``series``, with pi's operations ``pi_keys`` (pi_bench.mjs
        keys, recorded as ``pi.KEY``) taking their turns too when pi is available."""
        series = dict(series)
        if self.pi is not None:
            for key in sorted(pi_keys):
                series[f"pi.{key}"] = self.pi.series(key)
        for key, got in (await timed_rounds(runs or self.runs, series)).items():
            if isinstance(got, Exception):
                self.fig.fail(key, got)
            else:
                self.fig.put(key, got)

    def warm_page_cache(self) -> None:
        for path in self.data.rglob("*.jsonl"):
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass

    # --- open and context ---

    async def bench_open_context(self) -> None:
        for name in (self.sizes.big, self.sizes.mid):
            await self._open_context(name, whole=name == self.sizes.big)

    async def _open_context(self, name: str, *, whole: bool) -> None:
        from repos import open_session

        runs, path, facts, n = self.runs, self.file(name), self.facts(name), label(name)

        def open_it(_: Any = None) -> Any:
            session = open_session(path, fsync="never")
            if session.leaf_id != facts["leaf"] or len(session) != facts["entries"]:
                raise RuntimeError(f"open gave leaf {session.leaf_id}, {len(session)} entries")
            return session

        def context(session: Any) -> Any:
            session.build_context()
            return session

        def close(session: Any) -> None:
            session.close()

        # Each of ours beside its floor, taking turns (see timed_rounds).
        series: dict[str, Series] = {}
        if whole:
            series[f"ours.open.{n}"] = (open_it, None, close)
            series[f"floor.lazy.{n}"] = (lambda _: floor_lazy_index(path), None, None)
            series[f"ours.resume.{n}"] = (lambda _: context(open_it()), None, close)
            series[f"floor.resume.{n}"] = (
                lambda _: floor_lazy_context(floor_lazy_index(path)),
                None,
                None,
            )
        series[f"ours.context.{n}"] = (context, open_it, close)
        series[f"floor.context.{n}"] = (floor_lazy_context, lambda: floor_lazy_index(path), None)
        await self.attempt_rounds(
            series, pi_keys=(f"open_{n}", f"context_{n}") if whole else (f"context_{n}",)
        )
        if whole:
            self.attempt(
                f"floor.full.{n}", lambda: timed_runs(runs, lambda _: floor_full_parse(path))
            )

    # --- appends ---

    def append_sources(self) -> tuple[list[Any], list[dict[str, Any]]]:
        from repos import decode_message

        raw = []
        with open(self.file("appendsrc"), "rb") as f:
            next(f)
            for line in f:
                obj = orjson.loads(line)
                if obj.get("type") == "message":
                    raw.append(obj["message"])
        n = self.sizes.append
        raw = [raw[i % len(raw)] for i in range(n)]
        return [decode_message(m) for m in raw], raw

    async def bench_append(self) -> None:
        typed, raw = self.append_sources()
        for policy, every, key in (
            ("never", 0, "nofsync"),
            ("always", 0, "fsync_each"),
            ("never", 100, "fsync_100"),
        ):
            await self._append(typed, raw, policy, every, key)

    async def _append(
        self, typed: list[Any], raw: list[Any], policy: Any, every: int, key: str
    ) -> None:
        """``every`` > 0: fsync="never" and ``session.sync()`` every ``every`` appends."""
        from repos import JsonlSessionRepo

        cwd, n = self.manifest["cwd"], label(self.sizes.append)
        folder = self.scratch(f"append-{key}")
        repo = JsonlSessionRepo(folder, fsync=policy)

        async def setup() -> Any:
            return await repo.create(cwd)

        async def run(session: Any) -> None:
            append = session.append_message
            if every:
                for i, message in enumerate(typed, 1):
                    append(message)
                    if i % every == 0:
                        session.sync()
                session.sync()
            else:
                for message in typed:
                    append(message)

        async def teardown(session: Any) -> None:
            if len(session) != len(typed):
                raise RuntimeError(f"append stored {len(session)} entries")
            session.close()
            os.unlink(session.path)

        dest = folder / "floor.jsonl"
        floor_every = {"nofsync": 0, "fsync_each": 1, "fsync_100": 100}[key]

        async def ours(session: Any) -> Any:
            await run(session)
            return session

        # Ours and the floor take turns (see timed_rounds).
        await self.attempt_rounds(
            {
                f"ours.append_{key}.{n}": (ours, setup, teardown),
                f"floor.append_{key}.{n}": (
                    lambda _: floor_append(dest, raw, fsync_every=floor_every),
                    None,
                    lambda _: dest.unlink(),
                ),
            },
            pi_keys=(f"append_{n}",) if key == "nofsync" else (),
        )

    # --- list ---

    async def bench_list(self) -> None:
        from repos import JsonlSessionRepo

        folder = self.manifest[f"folder{self.sizes.folder}"]
        root = self.data / folder["root"]
        count = folder["sessions"]
        n = f"{count}"
        warm_cache = self.work / "list-cache-warm"
        run_worker("list", root, count, cache=warm_cache)  # fills the persistent cache
        cold_caches = iter(range(1 << 30))

        def cold(_: Any) -> Measured:
            # A cache folder never used: every file is read, as on a first list ever.
            empty = self.work / f"list-cache-cold-{next(cold_caches)}"
            return Measured(run_worker("list", root, count, cache=empty)["ms"])

        series: dict[str, Series] = {
            f"ours.list_cold.{n}": (cold, None, None),
            f"floor.list_head.{n}": (
                lambda _: Measured(run_worker("list-head", root, count)["ms"]),
                None,
                None,
            ),
            f"ours.list_warm.{n}": (
                lambda _: Measured(run_worker("list", root, count, cache=warm_cache)["ms"]),
                None,
                None,
            ),
        }
        await self.attempt_rounds(series, pi_keys={f"list_{n}"})
        repo = JsonlSessionRepo(root, fsync="never")
        if len(await repo.list()) != count:
            raise RuntimeError("list missed sessions")

        async def again(_: Any) -> None:
            await repo.list()

        await self.attempt_rounds(
            {
                f"ours.list_repeat.{n}": (again, None, None),
                f"floor.list_stat.{n}": (lambda _: floor_list_stat(root), None, None),
            },
            runs=max(self.runs, 5),
        )

    # --- fork ---

    async def bench_fork(self) -> None:
        from repos import JsonlSessionRepo, open_session

        name = self.sizes.big
        path, facts = self.file(name), self.facts(name)
        n = label(name)
        mid = facts["mid_id"]
        expected = facts["active_path_len"] - facts["active_path_len"] // 2
        folder = self.scratch("fork")
        repo = JsonlSessionRepo(folder, fsync="never")

        async def drop(fork: Any) -> None:
            if len(fork) < expected:
                raise RuntimeError(f"fork holds {len(fork)} entries, expected {expected}")
            fork.close()
            os.unlink(fork.path)

        ix = floor_lazy_index(path)
        dest = folder / "floor.jsonl"

        def copy(fsync: bool) -> Callable[[Any], None]:
            def run(_: Any) -> None:
                if floor_fork(ix, mid.encode(), dest, fsync=fsync) != expected:
                    raise RuntimeError("floor fork copied a wrong path")

            return run

        # The same bytes under another name and inode: no session of this process holds its
        # index, so a fork given this path reads and indexes it.
        cold = folder / "not-open.jsonl"
        shutil.copyfile(path, cold)
        source = open_session(path, fsync="never")
        try:
            await self.attempt_rounds(
                {
                    f"ours.fork_session.{n}": (
                        lambda _: repo.fork(source, entry_id=mid, position="at"),
                        None,
                        drop,
                    ),
                    f"ours.fork_path.{n}": (
                        lambda _: repo.fork(path, entry_id=mid, position="at"),
                        None,
                        drop,
                    ),
                    f"ours.fork_path_cold.{n}": (
                        lambda _: repo.fork(cold, entry_id=mid, position="at"),
                        None,
                        drop,
                    ),
                    f"floor.fork_copy.{n}": (copy(False), None, None),
                    f"floor.fork_copy_fsync.{n}": (copy(True), None, None),
                },
                pi_keys={f"fork_{n}"},
            )
        finally:
            source.close()
            cold.unlink()

    # --- create ---

    async def bench_create(self) -> None:
        from repos import JsonlSessionRepo

        typed, raw = self.append_sources()
        iu = next(i for i, m in enumerate(raw) if m["role"] == "user")
        ia = next(i for i, m in enumerate(raw) if m["role"] == "assistant")
        cwd = self.manifest["cwd"]
        folder = self.scratch("create")
        repo = JsonlSessionRepo(folder, fsync="never")
        reps = self.small_runs

        async def create(_: Any) -> Any:
            session = await repo.create(cwd)
            session.append_message(typed[iu])
            session.append_message(typed[ia])
            return session

        def drop(session: Any) -> None:
            session.close()
            os.unlink(session.path)

        plain = self.scratch("create-floor")

        def make(fsync: bool) -> Callable[[Any], None]:
            def run(_: Any) -> None:
                floor_create(plain, cwd, raw[iu], raw[ia], fsync=fsync).unlink()

            return run

        await self.attempt_rounds(
            {
                "ours.create": (create, None, drop),
                "floor.create": (make(False), None, None),
                "floor.create_fsync": (make(True), None, None),
            },
            runs=reps,
            pi_keys={"create_1"},
        )

    # --- memory and growth (fresh processes) ---

    def bench_growth(self) -> None:
        # The sizes take turns, run after run: this machine's speed drifts by tens of per cent
        # over minutes, and the per-entry ratios compare sizes, so each run sees them all.
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in self.sizes.growth}
        for _ in range(self.runs):
            for name in self.sizes.growth:
                n = label(name)
                if f"growth.{n}" in self.fig.errors:
                    continue
                try:
                    runs[name].append(
                        run_worker("ours", self.file(name), self.facts(name)["entries"])
                    )
                except Exception as exc:
                    self.fig.fail(f"growth.{n}", exc)
        ref_per: dict[str, float] = {}
        for name in self.sizes.growth:
            path, facts, n = self.file(name), self.facts(name), label(name)
            samples = runs[name]
            if f"growth.{n}" in self.fig.errors:
                self.growth.append({"name": name, "error": self.fig.errors[f"growth.{n}"]})
                continue
            med = {
                k: statistics.median(s[k] for s in samples)
                for k in ("open_ms", "context_ms", "rss_mib")
            }
            peaks = [s["peak_open_mib"] for s in samples if s["peak_open_mib"] is not None]
            lazy = statistics.median(timed_runs(self.runs, lambda _, p=path: floor_lazy_index(p)))
            gc.collect()
            row = {
                "name": name,
                "entries": facts["entries"],
                "path": facts["active_path_len"],
                "mib": facts["bytes"] / MIB,
                **med,
                "peak_open_mib": statistics.median(peaks) if peaks else None,
                "open_us": med["open_ms"] * 1e3 / facts["entries"],
                "context_us": med["context_ms"] * 1e3 / facts["active_path_len"],
                "lazy_us": lazy * 1e3 / facts["entries"],
            }
            self.growth.append(row)
            log(
                f"  growth {label(name):>5}: open {row['open_us']:.2f} µs/entry, context "
                f"{row['context_us']:.2f} µs/path entry, RSS +{row['rss_mib']:.0f} MiB"
            )
            if name == self.sizes.ref:
                ref_per = {"open": row["open_us"], "context": row["context_us"]}
            if name == self.sizes.big:
                self.fig.put(f"ours.rss.{n}", [s["rss_mib"] for s in samples])
                if peaks:
                    self.fig.put(f"ours.peak.{n}", peaks)
        self.growth_ref = ref_per

    def bench_memory_floors(self) -> None:
        name = self.sizes.big
        path, n = self.file(name), label(name)
        for kind in ("lazy", "full"):
            try:
                samples = [run_worker(kind, path, 0) for _ in range(self.runs)]
            except Exception as exc:
                self.fig.fail(f"floor.rss_{kind}.{n}", exc)
                continue
            self.fig.put(f"floor.rss_{kind}.{n}", [s["rss_mib"] for s in samples])
            peaks = [s["peak_open_mib"] for s in samples if s["peak_open_mib"] is not None]
            if peaks:
                self.fig.put(f"floor.peak_{kind}.{n}", peaks)

    # --- issue 24's rows of bench_events.py and bench_start.py (their code, imported) ---

    async def bench_bus(self) -> None:
        """µs per dispatch with none and with BUS_RECEIVERS sync receivers: a ``turn_start``
        observer's and a ``tool_call`` hook's (bench_events.bus_us: median of 5 rounds)."""
        events = _load_sibling("bench_events")
        for receivers in (0, BUS_RECEIVERS):
            keys = (f"ours.bus_observer.{receivers}", f"ours.bus_hook.{receivers}")
            try:
                got = await events.bus_us(receivers, self.sizes.dispatches)
            except Exception as exc:
                for key in keys:
                    self.fig.fail(key, exc)
                continue
            for key, us in zip(keys, got, strict=True):
                self.fig.put(key, [us])

    async def bench_start(self) -> None:
        """Each command of bench_start.COMMANDS in a fresh interpreter, in interleaved rounds
        (bench_start.measure), ``sessions list`` over ``sizes.folder`` sessions, list cache
        warm: medians of CPU s, wall s and import s."""
        start = _load_sibling("bench_start")
        rounds = self.runs if self.sizes is QUICK else max(self.runs, START_ROUNDS)
        try:
            medians = await start.measure(rounds, self.sizes.folder)
        except Exception as exc:
            for name in START_KEYS.values():
                self.fig.fail(f"start.{name}.cpu", exc)
            return
        for (_, command), (wall, cpu, imports) in medians.items():
            name = START_KEYS[command]
            for what, value in (("cpu", cpu), ("wall", wall), ("imports", imports)):
                self.fig.put(f"start.{name}.{what}", [value])

    async def run_all(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        # This process's own list cache lives in the scratch folder, not the user's.
        os.environ[CACHE_ENV] = str(self.work / "list-cache-here")
        try:
            log("warming the page cache")
            self.warm_page_cache()
            only = self.only
            if "bus" in only:  # first: before the storage rows fill this process's memory
                log("bus dispatch (bench_events.py)")
                await self.bench_bus()
            if "open" in only:
                log("open and first context")
                await self.bench_open_context()
            if "append" in only:
                log("append")
                await self.bench_append()
            if "list" in only:
                log("list")
                await self.bench_list()
            if "fork" in only:
                log("fork")
                await self.bench_fork()
            if "create" in only:
                log("create")
                await self.bench_create()
            if "memory" in only:
                log("memory and growth (fresh processes)")
                self.bench_growth()
                self.bench_memory_floors()
            if "append" in only:
                log("system calls per append (strace)")
                self.calls = syscalls_per_append(self.work, 2000)
            if "start" in only:
                log("start-up (bench_start.py: fresh interpreters)")
                await self.bench_start()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)


# --- pi ------------------------------------------------------------------------------------------


@dataclass
class Pi:
    """pi's ``SessionManager`` timed by ``pi_bench.mjs``, one operation per call, so that each
    round of ``timed_rounds`` runs pi beside ours and the floors."""

    node: str
    script: Path
    data: Path
    version: str = ""
    node_version: str = ""
    open_mem: dict[str, Any] | None = None
    """The memory ``pi_bench.mjs`` reports with an ``open_100k`` run (its last)."""

    def once(self, key: str) -> float:
        out = self.data / f"pi-{os.getpid()}-{key}.json"
        try:
            done = subprocess.run(
                [
                    *(self.node, "--expose-gc", str(self.script), "--pi", str(PI_DIR)),
                    *("--data", str(self.data), "--only", key, "--reps", "1"),
                    *("--json", str(out)),
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"pi_bench.mjs --only {key} failed: {tail[0]}")
            report = json.loads(out.read_text())
        finally:
            out.unlink(missing_ok=True)
        self.version, self.node_version = report["pi_version"], report["node"]
        found = None
        for r in report["results"]:
            if r["op"] == "open_mem":
                self.open_mem = r
            elif f"{r['op']}_{r['size']}" == key:
                found = float(r["median_ms"])
        if found is None:
            raise RuntimeError(f"pi_bench.mjs gave no {key}")
        return found

    def series(self, key: str) -> Series:
        return (lambda _: Measured(self.once(key)), None, None)


def pi_setup(data: Path, quick: bool) -> tuple[Pi | None, str]:
    """pi, installed with npm when missing, or None and the reason."""
    if quick:
        return None, "--quick: pi_bench.mjs needs the full workload"
    script = SHARED_BENCH / "pi_bench.mjs"
    if not script.is_file():
        return None, f"{script} is missing"
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node or npm not found"
    package = PI_DIR / "node_modules" / PI_PACKAGE / "package.json"
    if not package.is_file():
        log(f"installing {PI_PACKAGE}@{PI_VERSION} into {PI_DIR}")
        PI_DIR.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                *(npm, "install", "--prefix", str(PI_DIR), "--no-audit", "--no-fund"),
                *("--loglevel=error", f"{PI_PACKAGE}@{PI_VERSION}"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not package.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"npm install failed: {tail[0]}"
    return Pi(node, script, data), ""


# --- the table -----------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    ours: float | None
    floors: list[tuple[str, float | None]]
    pi: float | str | None
    target: str
    met: str
    unit: str = "ms"
    error: str = ""
    pi_note: str = ""
    calls: str = ""
    """System calls per append (counted under strace, apart from the timed runs)."""
    key: str = ""
    """Our figure's key (``ours.context.100k``)."""


def ratio(a: float | None, b: float | str | None) -> str:
    if a is None or not isinstance(b, float | int) or b == 0:
        return DASH
    return f"{a / b:.2f}{TIMES}"


def build_rows(
    fig: Figures, sizes: Sizes, pi: Pi | None, calls: dict[str, float] | str = "not counted"
) -> list[Row]:
    names = row_names(sizes is QUICK)
    big, mid, ap = label(sizes.big), label(sizes.mid), label(sizes.append)
    folder = f"{sizes.folder}"
    absent = "not measured" if pi is None else DASH

    def p(key: str) -> float | str:
        value = fig.get(f"pi.{key}")
        if value is None:
            return f"error: {fig.errors[f'pi.{key}']}" if f"pi.{key}" in fig.errors else absent
        return value

    def v(key: str) -> float | None:
        return fig.get(key)

    rows: list[Row] = []

    def add(
        ours_key: str,
        floors: list[tuple[str, str]],
        pi_value: float | str,
        target: str,
        check: Callable[[float, list[float | None], float | str], bool | None],
        unit: str = "ms",
        pi_note: str = "",
    ) -> None:
        ours = v(ours_key)
        floor_values = [(lbl, v(k)) for lbl, k in floors]
        if ours is None:
            met = "error" if ours_key in fig.errors else "not measured"
        else:
            verdict = check(ours, [f for _, f in floor_values], pi_value)
            met = DASH if verdict is None else ("yes" if verdict else "NO")
        rows.append(
            Row(
                names[len(rows)],
                ours,
                floor_values,
                pi_value,
                target,
                met,
                unit,
                fig.errors.get(ours_key, ""),
                pi_note,
                key=ours_key,
            )
        )

    def vs_floor(factor: float) -> Callable[[float, list[float | None], float | str], bool | None]:
        def check(ours: float, floors: list[float | None], _pi: float | str) -> bool | None:
            return None if floors[0] is None else ours <= factor * floors[0]

        return check

    def vs_pi(share: float) -> Callable[[float, list[float | None], float | str], bool | None]:
        def check(ours: float, _floors: list[float | None], pi_value: float | str) -> bool | None:
            return ours <= share * pi_value if isinstance(pi_value, float) else None

        return check

    def at_most(limit: float) -> Callable[[float, list[float | None], float | str], bool | None]:
        return lambda ours, _f, _p: ours <= limit

    resume_pi: float | str = absent
    if isinstance(p(f"open_{big}"), float) and isinstance(p(f"context_{big}"), float):
        resume_pi = float(p(f"open_{big}")) + float(p(f"context_{big}"))
    add(
        f"ours.open.{big}",
        [("lazy index", f"floor.lazy.{big}"), ("full parse", f"floor.full.{big}")],
        p(f"open_{big}"),
        f"≤ 1.3{TIMES} lazy floor",
        vs_floor(1.3),
    )
    add(
        f"ours.context.{big}",
        [("lazy", f"floor.context.{big}")],
        p(f"context_{big}"),
        f"≤ 1.0{TIMES} lazy floor",
        vs_floor(1.0),
    )
    add(
        f"ours.context.{mid}",
        [("lazy", f"floor.context.{mid}")],
        p(f"context_{mid}"),
        f"≤ 1.2{TIMES} lazy floor",
        vs_floor(1.2),
    )
    add(
        f"ours.resume.{big}",
        [("lazy", f"floor.resume.{big}")],
        resume_pi,
        "≤ 1/8 of pi",
        vs_pi(1 / 8),
        pi_note="pi: open + context",
    )
    add(
        f"ours.append_nofsync.{ap}",
        [("orjson.dumps + write", f"floor.append_nofsync.{ap}")],
        p(f"append_{ap}"),
        f"≤ 1.5{TIMES} floor",
        vs_floor(1.5),
    )
    if isinstance(calls, dict):
        rows[-1].calls = (
            f"{calls['single']:.2f} system calls per append, floor {calls['floor']:.2f}; "
            f"in batches of 8: {calls['batch']:.2f}"
        )
    add(
        f"ours.append_fsync_each.{ap}",
        [("dumps + write + fsync", f"floor.append_fsync_each.{ap}")],
        "never fsyncs" if pi else absent,
        f"≤ 1.1{TIMES} floor",
        vs_floor(1.1),
    )
    if isinstance(calls, dict):
        rows[
            -1
        ].calls = (
            f"{calls['single-fsync']:.2f} system calls per append, floor {calls['floor-fsync']:.2f}"
        )
    add(
        f"ours.append_fsync_100.{ap}",
        [("dumps + write, fsync/100", f"floor.append_fsync_100.{ap}")],
        DASH if pi else absent,
        f"≤ 1.4{TIMES} floor",
        vs_floor(1.4),
    )
    add(
        f"ours.list_cold.{folder}",
        [("head of each file", f"floor.list_head.{folder}")],
        p(f"list_{folder}"),
        f"≤ 1.5{TIMES} head floor",
        vs_floor(1.5),
        pi_note="pi: no cache, every call reads every file",
    )
    add(
        f"ours.list_warm.{folder}",
        [("stat only", f"floor.list_stat.{folder}")],
        "no cache" if pi else absent,
        "≤ 20 ms",
        at_most(20.0),
    )
    add(
        f"ours.list_repeat.{folder}",
        [("stat only", f"floor.list_stat.{folder}")],
        "no cache" if pi else absent,
        "≤ 20 ms",
        at_most(20.0),
    )
    add(
        f"ours.fork_session.{big}",
        [("raw line copy", f"floor.fork_copy.{big}"), ("+ fsync", f"floor.fork_copy_fsync.{big}")],
        p(f"fork_{big}"),
        f"≤ 1.2{TIMES} raw-copy floor",
        vs_floor(1.2),
        pi_note="pi: from an opened session",
    )
    for key in (f"ours.fork_path.{big}", f"ours.fork_path_cold.{big}"):
        add(
            key,
            [
                ("raw line copy", f"floor.fork_copy.{big}"),
                ("+ fsync", f"floor.fork_copy_fsync.{big}"),
            ],
            p(f"fork_{big}"),
            f"≤ 1.2{TIMES} raw-copy floor",
            vs_floor(1.2),
            pi_note="pi: from an opened session",
        )
    add(
        "ours.create",
        [("no fsync", "floor.create"), ("+ fsync", "floor.create_fsync")],
        p("create_1"),
        f"≤ 2{TIMES} floor (no fsync)",
        vs_floor(2.0),
    )
    pi_rss: float | str = absent
    if pi is not None and pi.open_mem is not None:
        pi_rss = float(pi.open_mem["rss_mib"])
    limit = 300.0 if sizes is FULL else 300.0 * int(big.rstrip("k")) / 100
    add(
        f"ours.rss.{big}",
        [("lazy", f"floor.rss_lazy.{big}"), ("full parse", f"floor.rss_full.{big}")],
        pi_rss,
        f"≤ +{limit:.0f} MiB",
        at_most(limit),
        unit="MiB",
        pi_note="pi: after open only",
    )
    add(
        f"ours.peak.{big}",
        [("file size", f"file.{big}"), ("lazy", f"floor.peak_lazy.{big}")],
        DASH if pi else absent,
        f"≤ 1.0{TIMES} file size",
        vs_floor(1.0),
        unit="MiB",
    )
    return rows


def render(
    rows: list[Row],
    growth: list[dict[str, Any]],
    sizes: Sizes,
    pi_reason: str,
    meta: dict[str, Any],
) -> str:
    out = []
    out.append(
        f"Storage benchmarks ({meta['profile']} workload, medians of --runs {meta['runs']}; "
        f"{meta['nproc']} cores, {meta['cpu']}, Python {meta['python']}, orjson "
        f"{meta['orjson']}; {meta['date']}; load average {meta['load_start']} -> "
        f"{meta['load_end']})"
    )
    out.append(f"pi: {meta['pi']}" if not pi_reason else f"pi: not measured ({pi_reason})")
    out.append("")
    out.append("| operation | pi | floor | ours | ours/floor | ours/pi | target | met |")
    out.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        unit = " MiB" if r.unit == "MiB" else ""
        plus = "+" if r.unit == "MiB" else ""
        floors = " / ".join(f"{plus}{fmt(val)} {lbl}" for lbl, val in r.floors)
        if isinstance(r.pi, float):
            pi_cell = f"{plus}{fmt(r.pi)}{unit}" + (f" ({r.pi_note[4:]})" if r.pi_note else "")
        else:
            pi_cell = str(r.pi)
        ours = f"{plus}{fmt(r.ours)}{unit}" if r.ours is not None else f"error: {r.error}"
        if r.ours is None and not r.error:
            ours = DASH
        if r.calls:
            ours += f" ({r.calls})"
        out.append(
            f"| {r.name} | {pi_cell} | {floors} | {ours} | {ratio(r.ours, r.floors[0][1])} | "
            f"{ratio(r.ours, r.pi)} | {r.target} | {r.met} |"
        )
    out.append("")
    out.append("Growth: open and first context in a fresh process (median of the runs)")
    out.append("")
    out.append(
        "| entries | MiB | active path | open ms | µs/entry | lazy floor µs/entry | "
        "context ms | µs/path entry | RSS held | peak in open |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for g in growth:
        if "error" in g:
            out.append(f"| {label(g['name'])} | error: {g['error']} | | | | | | | | |")
            continue
        peak = f"+{g['peak_open_mib']:.0f} MiB" if g["peak_open_mib"] is not None else DASH
        out.append(
            f"| {g['entries']:,} | {g['mib']:.0f} | {g['path']:,} | {fmt(g['open_ms'])} | "
            f"{g['open_us']:.2f} | {g['lazy_us']:.2f} | {fmt(g['context_ms'])} | "
            f"{g['context_us']:.2f} | +{g['rss_mib']:.0f} MiB | {peak} |"
        )
    by = {g["name"]: g for g in growth if "error" not in g}
    last, ref = sizes.growth[-1], sizes.ref
    if last in by and ref in by:
        for what, key in (("open", "open_us"), ("first context", "context_us")):
            r = by[last][key] / by[ref][key]
            verdict = "flat (target met)" if r <= 1.2 else f"NOT flat (target: ≤ 1.2{TIMES})"
            out.append(
                f"{what}: per-entry cost at {label(last)} is {r:.2f}{TIMES} that at {label(ref)}: "
                f"{verdict}"
            )
    return "\n".join(out)


ISSUE24_TITLE = (
    "Issue 24's table: each of its rows as measured in this run, beside its floor and peers "
    "(a row measured elsewhere says where); met: yes, NO, or why there is no verdict"
)
BUS_LIMIT_US = 20.0
START_LIMITS_S = {"import": 0.12, "help": 0.2, "list": 0.3}


def issue24_rows(rows: list[Row], fig: Figures, sizes: Sizes, only: Collection[str]) -> list[Any]:
    """The closing table (``issue24.IssueRow``s, in :func:`issue24_row_names`' order): the
    storage rows as judged in the table above, the bus and start-up rows from this run's
    figures, and the rows measured elsewhere pointing there."""
    row_of = issue24.IssueRow
    names = iter(issue24_row_names(sizes is QUICK))
    by_key = {r.key: r for r in rows}
    big, mid, ap = label(sizes.big), label(sizes.mid), label(sizes.append)
    out = []

    def missing(key: str, group: str) -> tuple[str, str]:
        """(ours cell, met) of a figure this run does not have."""
        if key in fig.errors:
            return f"error: {fig.errors[key]}", "error"
        return ("not measured (--only)" if group not in only else "not measured"), "not measured"

    for group, key in (
        ("open", f"ours.context.{big}"),
        ("open", f"ours.context.{mid}"),
        ("append", f"ours.append_nofsync.{ap}"),
        ("append", f"ours.append_fsync_each.{ap}"),
        ("fork", f"ours.fork_path.{big}"),
        ("fork", f"ours.fork_path_cold.{big}"),
    ):
        r = by_key[key]
        what, floor = r.floors[0]
        ours, met = (f"{fmt(r.ours)} ms", r.met) if r.ours is not None else missing(key, group)
        pi = r.pi if isinstance(r.pi, float) else None
        if pi is not None:
            note = r.pi_note.removeprefix("pi: ")
            peers = f"pi {fmt(pi)} ms" + (f" ({note})" if note else "")
        else:
            peers = f"pi: {r.pi}"
        out.append(
            row_of(
                next(names),
                ours,
                f"{fmt(floor)} ms {what}" if floor is not None else DASH,
                peers,
                issue24.ratio(r.ours, floor),
                issue24.ratio(r.ours, pi),
                r.target,
                met,
            )
        )

    n = BUS_RECEIVERS
    observer, hook = fig.get(f"ours.bus_observer.{n}"), fig.get(f"ours.bus_hook.{n}")
    observer0, hook0 = fig.get("ours.bus_observer.0"), fig.get("ours.bus_hook.0")
    if observer is None or hook is None:
        ours, met = missing(f"ours.bus_observer.{n}", "bus")
    else:
        ours = f"{observer:.2f} µs turn_start observer / {hook:.2f} µs tool_call hook"
        met = issue24.verdict(max(observer, hook) <= BUS_LIMIT_US)
    floor_text = DASH
    if observer0 is not None and hook0 is not None:
        floor_text = f"{observer0:.2f} / {hook0:.2f} µs with no receivers"
    target = f"≤ {BUS_LIMIT_US:.0f} µs"
    out.append(row_of(next(names), ours, floor_text, DASH, DASH, DASH, target, met))

    repos = "measured by bench_repos.py (its issue 24 table, these columns)"
    there = "in bench_repos.py's run"
    for peers, target in (
        ("OpenAI Agents' SQLiteSession.get_items; LangGraph's SqliteSaver", issue24.SQLITE_TARGET),
        ("LangGraph's PostgresSaver", issue24.POSTGRES_TARGET),
    ):
        out.append(row_of(next(names), repos, DASH, peers, DASH, DASH, target, there))

    floor_cpu = fig.get("start.floor.cpu")
    floor_text = f"{floor_cpu:.3f} s CPU python -c pass" if floor_cpu is not None else DASH
    for key, limit in START_LIMITS_S.items():
        cpu, wall, imports = (fig.get(f"start.{key}.{w}") for w in ("cpu", "wall", "imports"))
        if cpu is None or wall is None or imports is None:
            ours, met = missing(f"start.{key}.cpu", "start")
        else:
            ours = f"{cpu:.3f} s CPU ({wall:.3f} s wall; imports {imports:.3f} s)"
            met = issue24.verdict(cpu <= limit)
        target = f"≤ {limit} s CPU"
        out.append(row_of(next(names), ours, floor_text, DASH, DASH, DASH, target, met))

    out.append(
        row_of(
            next(names),
            "timed on a lone clone, not by a bench (issue 24's closing note)",
            *(DASH, DASH, DASH, DASH),
            "≤ 5 min",
            "from the lone-clone run",
        )
    )
    return out


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "orjson": orjson.__version__,
        "platform": platform.platform(),
    }


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


async def amain(a: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    sizes = QUICK if a.quick else FULL
    gen = _load_sibling("gen_workload")
    log(f"workload: {sizes.profile} (bench/gen_workload.py, seed {a.seed})")
    data = gen.ensure(sizes.profile, a.seed, a.data)
    meta: dict[str, Any] = {
        "profile": sizes.profile,
        "runs": a.runs,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": _load(),
        "data": str(data),
        **machine(),
    }
    pi_reason = "--no-pi" if a.no_pi else ""
    pi: Pi | None = None
    if not a.no_pi:
        pi, pi_reason = pi_setup(data, a.quick)
    only = GROUPS if a.only is None else tuple(a.only.split(","))
    unknown = set(only) - set(GROUPS)
    if unknown:
        raise SystemExit(f"--only: unknown group(s) {sorted(unknown)}; groups: {GROUPS}")
    bench = Bench(data, sizes, a.runs, pi, only)
    await bench.run_all()
    bench.fig.values[f"file.{label(sizes.big)}"] = bench.facts(sizes.big)["bytes"] / MIB
    if pi:
        meta["pi"] = (
            f"{PI_PACKAGE} {pi.version} on node {pi.node_version} (pi_bench.mjs, "
            "one operation per round, in the same rounds as ours)"
        )
    meta["load_end"] = _load()
    rows = build_rows(bench.fig, sizes, pi, bench.calls)
    print(render(rows, bench.growth, sizes, pi_reason, meta))
    print()
    print(
        "System calls per append (strace -c -f, in runs of their own, apart from the timed "
        "ones: n = 2,000 appends minus none, over n)"
    )
    print()
    if isinstance(bench.calls, str):
        print(f"not counted: {bench.calls}")
    else:
        print("| append path | system calls per append |")
        print("|---|---|")
        for mode, what in APPEND_PATHS.items():
            print(f"| {what} | {bench.calls[mode]:.2f} |")
    closing = issue24_rows(rows, bench.fig, sizes, only)
    print()
    print(issue24.render(closing, ISSUE24_TITLE))
    report = {
        "meta": meta,
        "pi_reason": pi_reason,
        "rows": [r.__dict__ for r in rows],
        "figures": bench.fig.values,
        "spread": bench.fig.spread,
        "errors": bench.fig.errors,
        "growth": bench.growth,
        "syscalls_per_append": bench.calls,
        "issue24": [asdict(r) for r in closing],
        "pi": {"version": pi.version, "node": pi.node_version} if pi else None,
    }
    return (1 if bench.fig.errors else 0), report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (median; default 3)")
    ap.add_argument("--quick", action="store_true", help="small sizes, no pi: a smoke run")
    ap.add_argument("--json", metavar="OUT", help="also write every figure to OUT")
    ap.add_argument("--no-pi", action="store_true", help="do not run pi_bench.mjs")
    ap.add_argument(
        "--only",
        metavar="GROUPS",
        help=f"run only these groups of rows, comma-separated (of {','.join(GROUPS)}); "
        "the other rows print 'not measured'",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", type=Path, help="workload folder (default bench/.data/...)")
    ap.add_argument("--worker", nargs=1, metavar=("KIND"), help=argparse.SUPPRESS)
    ap.add_argument("target", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.target, a.expect)))
        return 0
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    status, report = asyncio.run(amain(a))
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
