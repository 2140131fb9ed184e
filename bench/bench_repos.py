"""Database-store benchmarks of issue 13: our three repositories side by side with OpenAI Agents'
``SQLiteSession`` and LangGraph's ``SqliteSaver`` / ``PostgresSaver``, in one run.

Run from the repository root:

    .venv/bin/python bench/bench_repos.py [--runs 3] [--quick] [--entries N] [--postgres URL]
        [--json OUT]

* Ours: ``JsonlSessionRepo``, ``SqliteSessionRepo``, ``PostgresSessionRepo``, each append
  durable when it returns (``fsync="always"``: an fsync per line; ``synchronous=FULL``; the
  server's commit setting), as the competitors' defaults are.
* Theirs (``bench/_theirs.py`` says exactly how each is driven): installed with pip into the
  benchmark's own virtualenv ``~/.cache/jsonl-harness-bench/venv-compare`` (pinned versions
  plus this project, editable) on the first run; the script then re-executes itself there, so
  every store runs in the same interpreter and the same process. Without the package index,
  their columns say "not measured (reason)".
* PostgreSQL: ``--postgres URL`` (a fresh database is created on that server for the run and
  dropped after), else a throwaway server started by ``tests/postgres_server.py``; without
  either, those columns say why they were not measured.
* Workload: ``bench/gen_workload.py`` (messages of ~2 KB: its ``appendsrc`` session, and its
  folder of 1,000 sessions for ``list``).
* Every figure is the median of ``--runs`` runs; within a run the stores take turns, so a
  change in the machine's load touches them all alike. ``--quick``: small sizes, ours only, no
  PostgreSQL (the smoke test ``tests/test_bench_smoke.py`` runs it).
* The run closes with issue 24's rows for the database stores (resume against the same
  engine's peers, target, verdict) in the columns of ``bench/bench_storage.py``'s closing table
  (``bench/_issue24.py``), which points here for them; the issue's rows are at 3,000 entries
  (``--entries 3000``).

Exit status 1 when one of the measurements failed (its cell says why).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = Path.home() / ".cache" / "jsonl-harness-bench" / "venv-compare"
PINS = (
    "openai-agents==0.24.0",
    "langgraph==1.2.24",
    "langgraph-checkpoint==4.3.2",
    "langgraph-checkpoint-sqlite==3.1.2",
    "langgraph-checkpoint-postgres==3.2.0",
)
IN_VENV = "JSONL_HARNESS_BENCH_VENV"  # set when re-executed inside VENV
APPEND_CWD = "/home/dev/projects/bench-append"  # not the listed sessions' cwd
DASH, TIMES = "\u2013", "\u00d7"

# Column key, heading; ours first, then theirs.
COLUMNS = (
    ("jsonl", "JSONL (ours)"),
    ("sqlite", "SQLite (ours)"),
    ("postgres", "PostgreSQL (ours)"),
    ("openai", "OpenAI SQLiteSession"),
    ("langgraph_sqlite", "LangGraph SqliteSaver"),
    ("langgraph_postgres", "LangGraph PostgresSaver"),
)
RATIOS = (
    ("sqlite", "openai", "SQLite: ours/OpenAI"),
    ("sqlite", "langgraph_sqlite", "SQLite: ours/LangGraph"),
    ("postgres", "langgraph_postgres", "PostgreSQL: ours/LangGraph"),
)
OURS = ("jsonl", "sqlite", "postgres")
THEIRS = ("openai", "langgraph_sqlite", "langgraph_postgres")


class Unsupported(Exception):
    """The store has no such operation; the message says what it lacks."""


def _load(name: str, path: Path) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


issue24 = _load("_issue24", HERE / "_issue24.py")


# --- sizes and rows ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    profile: str
    appends: tuple[int, ...]  # the last one also makes the session open/fork/list read
    at: int  # appends timed one by one onto the opened session
    folder: int


FULL = Sizes("full", (1_000, 10_000), 10, 1_000)
QUICK = Sizes("quick", (100, 1_000), 5, 100)


def _n(count: int) -> str:
    return f"{count:,}"


def row_names(quick: bool = False, sizes: Sizes | None = None) -> list[str]:
    """The operations of the table, in order (the smoke test checks each is printed)."""
    s = sizes or (QUICK if quick else FULL)
    big = _n(s.appends[-1])
    return [
        *(f"append {_n(n)} to one session (total ms)" for n in s.appends),
        f"append one more to a {big}-entry session (ms each)",
        f"open a {big}-entry session",
        "first context after open",
        "resume = open + first context",
        f"fork at mid-path of {big}",
        f"list {_n(s.folder)} sessions, cwd filter",
    ]


# --- measuring -----------------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Cell:
    samples: list[float] = field(default_factory=list)
    text: str = ""  # "not measured (...)", "no fork", an error
    error: bool = False

    @property
    def value(self) -> float | None:
        return statistics.median(self.samples) if self.samples and not self.text else None


Table = dict[str, dict[str, Cell]]  # row name -> column key -> cell


def fmt(value: float | None) -> str:
    if value is None:
        return DASH
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


# --- our stores ----------------------------------------------------------------------------------


class OursStore:
    """One of our repositories, every append durable when it returns (``fsync="always"``)."""

    def __init__(self, key: str, repo: Any, typed: list[Any]) -> None:
        self.key = key
        self.repo = repo
        self._typed = typed
        self.source: str | None = None
        self.source_len = 0
        self._mid: str | None = None
        self._listing: Any = None
        self._list_count = 0

    def _ref(self, session: Any) -> str:
        return str(session.path) if session.path is not None else str(session.id)

    async def append_run(self, n: int) -> tuple[float, str]:
        session = await self.repo.create(APPEND_CWD)
        typed = self._typed
        try:
            append = session.append_message
            start = time.perf_counter()
            for i in range(n):
                append(typed[i % len(typed)])
            took = (time.perf_counter() - start) * 1e3
            got = len(session)
        finally:
            session.close()
        if got != n:
            raise RuntimeError(f"the session holds {got} entries after {n} appends")
        return took, self._ref(session)

    async def drop(self, ref: str) -> None:
        await self.repo.delete(Path(ref) if ref.endswith(".jsonl") else ref)

    async def _open(self) -> Any:
        assert self.source is not None
        ref = self.source
        session = await self.repo.open(Path(ref) if ref.endswith(".jsonl") else ref)
        if len(session) != self.source_len:
            session.close()
            raise RuntimeError(f"open saw {len(session)} entries, expected {self.source_len}")
        return session

    def _check_context(self, context: Any) -> None:
        if len(context.messages) != self.source_len:
            raise RuntimeError(f"context has {len(context.messages)} messages")

    async def open_ms(self) -> float:
        start = time.perf_counter()
        session = await self._open()
        took = (time.perf_counter() - start) * 1e3
        session.close()
        return took

    async def context_ms(self) -> float:
        session = await self._open()
        try:
            start = time.perf_counter()
            context = session.build_context()
            took = (time.perf_counter() - start) * 1e3
        finally:
            session.close()
        self._check_context(context)
        return took

    async def resume_ms(self) -> float:
        start = time.perf_counter()
        session = await self._open()
        try:
            context = session.build_context()
            took = (time.perf_counter() - start) * 1e3
        finally:
            session.close()
        self._check_context(context)
        return took

    async def fork_ms(self, keep: int) -> tuple[float, str]:
        if self._mid is None:
            session = await self._open()
            try:
                path = session.path_ids(session.leaf_id)
            finally:
                session.close()
            self._mid = path[keep - 1]
        assert self.source is not None
        ref = Path(self.source) if self.source.endswith(".jsonl") else self.source
        start = time.perf_counter()
        fork = await self.repo.fork(ref, entry_id=self._mid, position="at")
        took = (time.perf_counter() - start) * 1e3
        got = len(fork)
        fork.close()
        if got != keep:
            raise RuntimeError(f"the fork holds {got} entries, expected {keep}")
        return took, self._ref(fork)

    async def append_at(self, count: int) -> list[float]:
        session = await self._open()
        times = []
        try:
            for i in range(count):
                message = self._typed[i % len(self._typed)]
                start = time.perf_counter()
                session.append_message(message)
                times.append((time.perf_counter() - start) * 1e3)
        finally:
            session.close()
        self.source_len += count
        return times

    async def seed_list(self, files: list[Path], listing: Any) -> None:
        """The database repos import the folder's files; the JSONL one lists the folder."""
        self._list_count = len(files)
        if listing is not None:
            self._listing = listing
            return
        self._listing = self.repo
        for path in files:
            await self.repo.import_lines(path.read_bytes().splitlines(keepends=True))

    async def list_ms(self, cwd: str) -> float:
        start = time.perf_counter()
        infos = await self._listing.list(cwd)
        took = (time.perf_counter() - start) * 1e3
        if len(infos) != self._list_count:
            raise RuntimeError(f"list gave {len(infos)} sessions, expected {self._list_count}")
        return took

    async def close(self) -> None:
        close = getattr(self.repo, "close", None)
        if close is not None:
            close()


# --- the virtualenv of the competitors -----------------------------------------------------------


def ensure_venv() -> tuple[Path | None, str]:
    """The competitors' interpreter (the venv made and filled on first use), or None and why."""
    python = VENV / "bin" / "python"
    stamp = VENV / "bench-pins.json"
    wanted = {"pins": list(PINS), "project": str(ROOT)}
    try:
        if python.is_file() and json.loads(stamp.read_text()) == wanted:
            return python, ""
    except (OSError, ValueError):
        pass
    log(f"installing the competitors into {VENV} ({', '.join(PINS)})")
    shutil.rmtree(VENV, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(VENV)],
        [
            *(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
            *PINS,
            *("-e", f"{ROOT}[postgres]"),
        ],
    ]
    for cmd in steps:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{cmd[2]} failed: {exc}"
        if done.returncode != 0:
            errors = [ln for ln in done.stderr.splitlines() if "ERROR" in ln]
            tail = (errors or done.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"pip install failed: {tail.strip()[:200]}"
    stamp.write_text(json.dumps(wanted))
    return python, ""


# --- PostgreSQL ----------------------------------------------------------------------------------


class Postgres:
    """Fresh databases on ``--postgres URL``'s server or on a throwaway one."""

    def __init__(self, url: str | None) -> None:
        self._url = url
        self._server: Any = None
        self._made: list[str] = []
        self.reason = ""
        self.version = ""

    def start(self) -> bool:
        try:
            import psycopg
        except ImportError:
            self.reason = "psycopg not installed"
            return False
        if self._url is None:
            helper = _load("postgres_server", ROOT / "tests" / "postgres_server.py")
            why = helper.unavailable()
            if why:
                self.reason = why
                return False
            try:
                self._server = helper.PostgresServer().__enter__()
            except Exception as exc:
                self.reason = f"cannot start a server: {exc}".splitlines()[0][:200]
                return False
            self._url = self._server.url()
        try:
            with psycopg.connect(self._url, autocommit=True) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                settings = conn.execute(
                    "SELECT current_setting('fsync'), current_setting('synchronous_commit')"
                ).fetchone()
        except psycopg.Error as exc:
            self.reason = f"cannot connect: {exc}".splitlines()[0][:200]
            self.stop()
            return False
        assert row is not None and settings is not None
        where = "throwaway server (tests/postgres_server.py)" if self._server else "--postgres"
        self.version = (
            f"PostgreSQL {row[0]}, {where}, fsync={settings[0]}, "
            f"synchronous_commit={settings[1]} (the same server for ours and LangGraph)"
        )
        return True

    def new_database(self) -> str:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        assert self._url is not None
        name = "bench_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self._url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._made.append(name)
        params = conninfo_to_dict(self._url)
        params["dbname"] = name
        return make_conninfo(**params)

    def stop(self) -> None:
        if self._server is not None:
            self._server.__exit__(None, None, None)
            self._server = None
            return
        if self._url is None or not self._made:
            return
        import psycopg

        with psycopg.connect(self._url, autocommit=True) as conn:
            for name in self._made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._made.clear()


# --- the benchmark -------------------------------------------------------------------------------


class Bench:
    def __init__(self, data: Path, sizes: Sizes, runs: int) -> None:
        self.data = data
        self.sizes = sizes
        self.runs = runs
        self.manifest = json.loads((data / "manifest.json").read_text())
        self.cwd: str = self.manifest["cwd"]
        self.stores: dict[str, Any] = {}
        self.absent: dict[str, str] = {}  # column -> why it is not measured
        self.table: Table = {name: {} for name in row_names(sizes=sizes)}
        self.failed = False

    # --- workload ---

    def raw_messages(self) -> list[dict[str, Any]]:
        out = []
        with open(self.data / self.manifest["sessions"]["appendsrc"]["file"], "rb") as f:
            next(f)
            for line in f:
                obj = orjson.loads(line)
                if obj.get("type") == "message":
                    out.append(obj["message"])
        return out

    def folder_files(self) -> list[Path]:
        folder = self.manifest[f"folder{self.sizes.folder}"]
        files = sorted((self.data / folder["dir"]).glob("*.jsonl"))
        if len(files) != folder["sessions"]:
            raise RuntimeError(f"{folder['dir']}: {len(files)} files, expected the manifest's")
        return files

    @staticmethod
    def file_messages(path: Path) -> tuple[str, list[dict[str, Any]]]:
        lines = path.read_bytes().splitlines()
        cwd = orjson.loads(lines[0])["cwd"]
        messages = []
        for line in lines[1:]:
            obj = orjson.loads(line)
            if obj.get("type") == "message":
                messages.append(obj["message"])
        return cwd, messages

    # --- bookkeeping ---

    def cell(self, row: str, key: str) -> Cell:
        return self.table[row].setdefault(key, Cell())

    def live(self, row: str) -> list[tuple[str, Any]]:
        """Stores still measured on this row (not failed, not unsupported)."""
        return [(k, s) for k, s in self.stores.items() if not self.table[row].get(k, Cell()).text]

    async def sample(
        self, row: str, key: str, measure: Callable[[], Awaitable[Any]]
    ) -> tuple[bool, Any]:
        """Run one measurement: ``(True, result)``, or ``(False, None)`` when the store lacks
        the operation or it failed (the cell says which). A float result, a list of floats or
        the first item of a tuple are the samples; None adds none (untimed work)."""
        cell = self.cell(row, key)
        gc.collect()  # between samples only, never inside the timed part
        try:
            result = await measure()
        except Unsupported as exc:
            cell.text = str(exc)
            return False, None
        except Exception as exc:
            cell.text = f"error: {type(exc).__name__}: {exc}".splitlines()[0][:160]
            cell.error = True
            self.failed = True
            log(f"  {row} / {key}: {cell.text}")
            return False, None
        if isinstance(result, float):
            cell.samples.append(result)
        elif isinstance(result, list):
            cell.samples.extend(result)
        elif isinstance(result, tuple):
            cell.samples.append(result[0])
        return True, result

    def report_row(self, row: str) -> None:
        parts = []
        for key, _ in COLUMNS:
            c = self.table[row].get(key)
            if c is not None and c.value is not None:
                parts.append(f"{key} {fmt(c.value)}")
        log(f"  {row}: " + ", ".join(parts))

    # --- operations ---

    async def bench_append(self) -> None:
        big = self.sizes.appends[-1]
        for n, row in zip(self.sizes.appends, row_names(sizes=self.sizes), strict=False):
            log(f"{row} ...")
            lg_skip = n > 2_000
            for key in ("langgraph_sqlite", "langgraph_postgres"):
                if lg_skip and key in self.stores:
                    self.cell(row, key).text = "not run (quadratic: see the next row)"
            for run in range(self.runs):
                for key, store in self.live(row):
                    ok, result = await self.sample(row, key, lambda s=store, n=n: s.append_run(n))
                    if not ok:
                        continue
                    last = run == self.runs - 1
                    if n == big and last:
                        store.source, store.source_len = result[1], n
                    else:
                        await store.drop(result[1])
            self.report_row(row)
        for key, store in self.stores.items():
            if store.source is None and key.startswith("langgraph"):
                store.source, store.source_len = await store.build_source(big), big

    async def bench_reads(self) -> None:
        names = row_names(sizes=self.sizes)
        at_row, open_row, ctx_row, resume_row, fork_row = names[-6:-1]
        keep = self.sizes.appends[-1] - self.sizes.appends[-1] // 2
        for row, op in (
            (open_row, "open_ms"),
            (ctx_row, "context_ms"),
            (resume_row, "resume_ms"),
        ):
            log(f"{row} ...")
            for _ in range(self.runs):
                for key, store in self.live(row):
                    if store.source is None:
                        self.cell(row, key).text = "no source session (append failed)"
                        continue
                    await self.sample(row, key, getattr(store, op))
            self.report_row(row)
        log(f"{fork_row} ...")
        for _ in range(self.runs):
            for key, store in self.live(fork_row):
                if store.source is None:
                    continue
                ok, result = await self.sample(fork_row, key, lambda s=store: s.fork_ms(keep))
                if ok:
                    await store.drop(result[1])
        self.report_row(fork_row)
        log(f"{at_row} ...")
        for _ in range(self.runs):
            for key, store in self.live(at_row):
                if store.source is not None:
                    await self.sample(at_row, key, lambda s=store: s.append_at(self.sizes.at))
        self.report_row(at_row)

    async def bench_list(self) -> None:
        from repos import JsonlSessionRepo

        row = row_names(sizes=self.sizes)[-1]
        log(f"{row}: seeding ...")
        files = self.folder_files()
        parsed: list[tuple[str, list[dict[str, Any]]]] | None = None
        for key, store in self.live(row):
            if key in OURS:
                listing = None
                if key == "jsonl":
                    listing = JsonlSessionRepo(self.data / "sessions", fsync="never")
                await self.sample(row, key, lambda s=store, lst=listing: s.seed_list(files, lst))
            else:
                if parsed is None:
                    parsed = [self.file_messages(p) for p in files]
                await self.sample(row, key, lambda s=store, p=parsed: s.seed_list(p))
            self.cell(row, key).samples.clear()  # seeding is not timed
        log(f"{row} ...")
        for key, store in self.live(row):  # one call first: every store serves repeat calls
            await self.sample(row, key, lambda s=store: s.list_ms(self.cwd))
            self.cell(row, key).samples.clear()
        for _ in range(self.runs):
            for key, store in self.live(row):
                await self.sample(row, key, lambda s=store: s.list_ms(self.cwd))
        self.report_row(row)


# --- the table -----------------------------------------------------------------------------------

NOTES = {
    ("openai", "open"): "lazy: reads nothing",
    ("openai", "fork"): "no fork: new session from the first half",
    ("langgraph_sqlite", "fork"): "no fork: new thread from the first half",
    ("langgraph_postgres", "fork"): "no fork: new thread from the first half",
    ("langgraph_sqlite", "list"): "no list: checkpoints by metadata",
    ("langgraph_postgres", "list"): "no list: checkpoints by metadata",
    ("openai", "resume"): "get_items",
    ("openai", "first context"): "get_items",
    ("langgraph_sqlite", "resume"): "get_state",
    ("langgraph_postgres", "resume"): "get_state",
}


# Not the same operation: OpenAI's "open" reads nothing (its get_items is the context row).
NO_RATIO = {("openai", "open")}


def ratio(r: float) -> str:
    """Two decimals; below 0.1 two significant digits (0.0042), so a small ratio shows."""
    return f"{r:.2f}{TIMES}" if r >= 0.095 else f"{r:.2g}{TIMES}"


def _note(key: str, row: str) -> str:
    for (k, word), note in NOTES.items():
        if k == key and row.startswith(word):
            return note
    return ""


def render(bench: Bench, meta: dict[str, Any]) -> str:
    out = [
        f"Database store benchmarks ({meta['profile']} workload, medians of --runs "
        f"{meta['runs']}; {meta['nproc']} cores, {meta['cpu']}, Python {meta['python']}; "
        f"{meta['date']}; load average {meta['load_start']} -> {meta['load_end']})",
        f"competitors: {meta['competitors']}",
        f"postgres: {meta['postgres']}",
        "",
    ]
    heads = [h for _, h in COLUMNS] + [h for _, _, h in RATIOS]
    out.append("| operation | " + " | ".join(heads) + " |")
    out.append("|---" * (len(heads) + 1) + "|")
    for row, cells in bench.table.items():
        values: list[str] = []
        for key, _ in COLUMNS:
            c = cells.get(key)
            if key in bench.absent:
                values.append(f"not measured ({bench.absent[key]})")
            elif c is None:
                values.append(DASH)
            elif c.text:
                values.append(c.text)
            else:
                note = _note(key, row)
                values.append(fmt(c.value) + (f" ({note})" if note else ""))
        for ours, theirs, _ in RATIOS:
            a, b = cells.get(ours), cells.get(theirs)
            av = a.value if a is not None else None
            bv = b.value if b is not None else None
            if av is None or not bv or (theirs, row.split()[0]) in NO_RATIO:
                values.append(DASH)
            else:
                values.append(ratio(av / bv))
        out.append(f"| {row} | " + " | ".join(values) + " |")
    return "\n".join(out)


def issue24_rows(bench: Bench) -> list[Any]:
    """Issue 24's database rows (``issue24.IssueRow``, the columns of bench_storage.py's
    closing table): our resume on each engine against the same engine's peers."""
    row = row_names(sizes=bench.sizes)[-3]  # resume = open + first context
    cells = bench.table[row]
    heads = dict(COLUMNS)

    def figure(key: str) -> tuple[float | None, str]:
        """A store's resume: its median and its text as the table above prints it."""
        if key in bench.absent:
            return None, f"not measured ({bench.absent[key]})"
        c = cells.get(key)
        if c is None or c.text:
            return None, c.text if c is not None else DASH
        note = _note(key, row)
        return c.value, f"{fmt(c.value)} ms" + (f" ({note})" if note else "")

    out = []
    for template, key, peer_keys, target in (
        (issue24.SQLITE_RESUME, "sqlite", ("openai", "langgraph_sqlite"), issue24.SQLITE_TARGET),
        (issue24.POSTGRES_RESUME, "postgres", ("langgraph_postgres",), issue24.POSTGRES_TARGET),
    ):
        ours, ours_text = figure(key)
        peers = [figure(k) for k in peer_keys]
        values = [value for value, _ in peers if value is not None]
        if ours is None:
            met = "error" if cells.get(key, Cell()).error else "not measured"
        elif len(values) < len(peers):
            met = "no verdict: a peer not measured"
        else:
            met = issue24.verdict(all(ours <= value for value in values))
        out.append(
            issue24.IssueRow(
                issue24.resume_name(template, bench.sizes.appends[-1]),
                ours_text,
                DASH,
                "; ".join(
                    f"{heads[k]} {text}" for k, (_, text) in zip(peer_keys, peers, strict=True)
                ),
                DASH,
                " / ".join(issue24.ratio(ours, value) for value, _ in peers),
                target,
                met,
            )
        )
    return out


def issue24_title(sizes: Sizes) -> str:
    entries = sizes.appends[-1]
    size = ""
    if entries != issue24.ISSUE_RESUME_ENTRIES:
        size = (
            f"; resumed at {entries:,} entries, the issue's rows are at "
            f"{issue24.ISSUE_RESUME_ENTRIES:,} (--entries {issue24.ISSUE_RESUME_ENTRIES})"
        )
    return (
        "Issue 24's rows for the database stores, as measured in this run (bench_storage.py's "
        f"closing table lists every row of the issue){size}; met: yes, NO, or why there is "
        "no verdict"
    )


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
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


def _loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


async def amain(a: argparse.Namespace, venv_reason: str) -> tuple[int, dict[str, Any]]:
    from repos import JsonlSessionRepo, SqliteSessionRepo, decode_message

    sizes = QUICK if a.quick else FULL
    if not a.quick and a.entries != FULL.appends[-1]:
        sizes = replace(FULL, profile=f"full, {_n(a.entries)} entries", appends=(1_000, a.entries))
    gen = _load("gen_workload", HERE / "gen_workload.py")
    log(f"workload: {sizes.profile} (bench/gen_workload.py, seed {a.seed})")
    data = gen.ensure("quick" if sizes is QUICK else "full", a.seed, a.data)
    meta: dict[str, Any] = {
        "profile": sizes.profile,
        "runs": a.runs,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": _loadavg(),
        **machine(),
    }
    work = Path(tempfile.mkdtemp(prefix="repos-work-", dir=data))
    bench = Bench(data, sizes, a.runs)
    raw = bench.raw_messages()
    typed = [decode_message(m) for m in raw]
    bench.stores["jsonl"] = OursStore(
        "jsonl", JsonlSessionRepo(work / "jsonl", fsync="always"), typed
    )
    bench.stores["sqlite"] = OursStore(
        "sqlite", SqliteSessionRepo(work / "ours.db", fsync="always"), typed
    )
    pg = Postgres(a.postgres)
    if a.quick and a.postgres is None:
        pg.reason = "--quick"
    elif pg.start():
        from repos.postgres import PostgresSessionRepo

        bench.stores["postgres"] = OursStore(
            "postgres", PostgresSessionRepo(pg.new_database(), fsync="always"), typed
        )
    if pg.reason:
        bench.absent["postgres"] = bench.absent["langgraph_postgres"] = pg.reason
    meta["postgres"] = pg.version or f"not measured ({pg.reason})"
    theirs_reason = "--quick" if a.quick else ("--no-compare" if a.no_compare else venv_reason)
    if not theirs_reason:
        try:
            theirs = _load("_theirs", HERE / "_theirs.py")
            found = theirs.versions()
            url = pg.new_database if not pg.reason else None
            for store in theirs.make_stores(work, url, raw, APPEND_CWD, Unsupported):
                bench.stores[store.key] = store
            meta["competitors"] = ", ".join(f"{k} {v}" for k, v in found.items())
        except Exception as exc:
            theirs_reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    if theirs_reason:
        for key in THEIRS:
            bench.absent.setdefault(key, theirs_reason)
        meta["competitors"] = f"not measured ({theirs_reason})"
    try:
        await bench.bench_append()
        await bench.bench_reads()
        await bench.bench_list()
    finally:
        for store in bench.stores.values():
            await store.close()
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    meta["load_end"] = _loadavg()
    print(render(bench, meta))
    closing = issue24_rows(bench)
    print()
    print(issue24.render(closing, issue24_title(sizes)))
    report = {
        "meta": meta,
        "absent": bench.absent,
        "rows": {
            row: {
                k: {"median_ms": c.value, "samples": c.samples, "text": c.text}
                for k, c in cells.items()
            }
            for row, cells in bench.table.items()
        },
        "issue24": [asdict(r) for r in closing],
    }
    return (1 if bench.failed else 0), report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (median; default 3)")
    ap.add_argument("--quick", action="store_true", help="small sizes, ours only: a smoke run")
    ap.add_argument("--postgres", metavar="URL", help="a PostgreSQL server to use")
    ap.add_argument("--no-compare", action="store_true", help="ours only (no competitor venv)")
    ap.add_argument("--json", metavar="OUT", help="also write every figure to OUT")
    ap.add_argument(
        "--entries",
        type=int,
        default=FULL.appends[-1],
        help="entries of the session the open/context/resume/fork rows read (default 10,000;"
        " more than 1,000; not with --quick)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", type=Path, help="workload folder (default bench/.data/...)")
    args = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(args)
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    if a.entries <= 1_000:
        ap.error("--entries must be more than 1,000")
    venv_reason = ""
    if not (a.quick or a.no_compare or os.environ.get(IN_VENV)):
        python, venv_reason = ensure_venv()
        if python is not None:
            env = dict(os.environ, **{IN_VENV: "1"})
            os.execve(python, [str(python), str(Path(__file__).resolve()), *args], env)
        log(f"competitors not measured: {venv_reason}")
    status, report = asyncio.run(amain(a, venv_reason))
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
