"""``harness sessions stats [ID|PATH...] [--by model|day|folder] [--since WHEN] [--json]``:
usage reports (tokens, cost, turns, tool calls and their error rate, compactions, cache hit
rate), per session or grouped. The figures are ``harness._stats`` (the web app shows the same).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import attrs
import click

from harness import HarnessError, load_registry

from .._stats import GroupBy, UsageStats, merge, session_stats
from ._common import SessionRef, one_line, open_ref, open_repo, resolve_ref, root_option, run_async
from ._escape import echo, json_line
from ._sessions import sessions

__all__ = ["parse_since", "stats"]

_DAYS = re.compile(r"(\d{1,5})d")


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """``--since``: ``Nd`` (N days ago), a day (``2025-07-01``, midnight UTC) or an ISO
    date-time (UTC unless it names its zone).

    Raises:
        click.BadParameter: anything else.
    """
    now = now or datetime.now(UTC)
    days = _DAYS.fullmatch(value.strip())
    if days:
        return now - timedelta(days=int(days.group(1)))
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not Nd, YYYY-MM-DD or an ISO date-time", param_hint="--since"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _table(rows: list[tuple[str, UsageStats]], label: str) -> list[str]:
    header = (
        label,
        "SESS",
        "TURNS",
        "INPUT",
        "OUTPUT",
        "CACHE_R",
        "CACHE_W",
        "HIT",
        "TOOLS",
        "ERR",
        "COMPACT",
        "COST",
    )
    cells = [header] + [
        (
            key,
            str(s.sessions),
            str(s.turns),
            str(s.input),
            str(s.output),
            str(s.cache_read),
            str(s.cache_write),
            _rate(s.cache_hit_rate),
            str(s.tool_calls),
            f"{s.tool_errors} ({_rate(s.tool_error_rate)})",
            str(s.compactions),
            ("~" if s.estimated else "") + f"${s.cost:.4f}" + ("?" if s.unpriced else ""),
        )
        for key, s in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in cells
    ]


@sessions.command()
@root_option
@click.argument("refs", nargs=-1, metavar="[ID|PATH]...")
@click.option(
    "--by",
    type=click.Choice(["model", "day", "folder"]),
    default=None,
    help="Group by each reply's model, the UTC day, or the session's folder (default: one "
    "row per session).",
)
@click.option(
    "--since",
    metavar="WHEN",
    default=None,
    help="Only what happened since: Nd (days ago), YYYY-MM-DD or an ISO date-time.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def stats(
    root: str | None, refs: tuple[str, ...], by: str | None, since: str | None, as_json: bool
) -> None:
    """Usage of the sessions under the root (or of ID|PATH...): tokens in, out and cached,
    cache hit rate, cost, turns, tool calls and how many failed, compactions; every branch
    counts.

    A cost marked ~ is partly estimated from the model registry's prices (replies that
    recorded none, such as imported Claude Code ones); ? means some replies have no known
    price. Files that cannot be read are skipped and named on stderr.
    """
    when = parse_since(since) if since is not None else None
    repo = open_repo(root, must_exist=not refs)
    found_refs: list[SessionRef]
    if refs:
        found_refs = [resolve_ref(repo, ref) for ref in refs]
    else:
        infos = run_async(repo.list())
        for path, reason in getattr(repo, "list_problems", ()):
            echo(f"warning: skipped {path}: {one_line(reason)}", err=True)
        found_refs = [i.path if i.path is not None else i.id for i in infos]
    registry = load_registry().registry
    group: GroupBy = "session" if by is None else by  # type: ignore[assignment]
    groups: dict[str, UsageStats] = {}
    counted = 0  # sessions with anything to count, each once whatever the grouping
    for path in found_refs:
        try:
            with run_async(open_ref(repo, path)) as session:
                found = session_stats(
                    session.entries(), registry=registry, by=group, folder=session.cwd, since=when
                )
                if group == "session":
                    found = {session.id: found.get("", UsageStats(sessions=1))}
                counted += bool(found)
                merge(groups, found)
        except (HarnessError, OSError) as exc:
            echo(f"warning: skipped {path}: {one_line(str(exc))}", err=True)
    rows = sorted(groups.items())
    total = UsageStats()
    for stats_ in groups.values():
        total = total + stats_
    total = attrs.evolve(total, sessions=counted)
    if as_json:
        echo(
            json_line(
                {
                    "by": group,
                    "since": when.isoformat() if when is not None else None,
                    "groups": [{"key": key, **s.as_json()} for key, s in rows],
                    "total": total.as_json(),
                },
                indent=True,
            )
        )
        return
    label = {"session": "SESSION", "model": "MODEL", "day": "DAY", "folder": "FOLDER"}[group]
    if not rows:
        echo("no usage found", err=True)
        return
    for line in _table([*rows, ("total", total)], label):
        echo(line)
