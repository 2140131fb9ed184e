"""The closing table of issue 24's rows, printed in one format by ``bench/bench_storage.py``
(every row of the issue: the ones it measures, and where the others come from) and by
``bench/bench_repos.py`` (the database-store rows it measures against their peers).

Each row: what ours took, its floor and its peers as measured in the same run, the ratios the
target is about, the issue's target, and whether the run met it: ``yes``, ``NO``, or why there
is no verdict (not measured in this run, an error, or the run that measures the row).
"""

from __future__ import annotations

from dataclasses import dataclass

DASH, TIMES = "\u2013", "\u00d7"  # en dash (nothing to show), times sign (ratios)

# The rows the database benchmark measures (bench_repos.py), named and targeted alike in both
# tables; ``resume_name`` gives the size the run resumed.
SQLITE_RESUME = "SQLite store, resume {n} entries"
POSTGRES_RESUME = "PostgreSQL store, resume {n} entries"
SQLITE_TARGET = f"≤ 1.0{TIMES} both peers"
POSTGRES_TARGET = f"≤ 1.0{TIMES} LangGraph PostgresSaver"
ISSUE_RESUME_ENTRIES = 3_000  # the size of the issue's resume rows (bench_repos --entries 3000)


def resume_name(template: str, entries: int = ISSUE_RESUME_ENTRIES) -> str:
    return template.format(n=f"{entries:,}")


@dataclass(frozen=True)
class IssueRow:
    """One row of the table; every cell is text as printed (figures carry their unit)."""

    name: str
    ours: str
    floor: str
    peers: str
    vs_floor: str
    vs_peers: str
    target: str
    met: str


def verdict(met: bool | None) -> str:
    """``yes`` / ``NO``; None (no figure to judge by) prints a dash."""
    return DASH if met is None else ("yes" if met else "NO")


def ratio(ours: float | None, other: float | None) -> str:
    """Two decimals; below 0.1 two significant digits (0.0042), so a small ratio shows."""
    if ours is None or not other:
        return DASH
    r = ours / other
    return f"{r:.2f}{TIMES}" if r >= 0.095 else f"{r:.2g}{TIMES}"


def render(rows: list[IssueRow], title: str) -> str:
    out = [title, ""]
    out.append("| issue 24 row | ours | floor | peers | ours/floor | ours/peers | target | met |")
    out.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = (r.name, r.ours, r.floor, r.peers, r.vs_floor, r.vs_peers, r.target, r.met)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
