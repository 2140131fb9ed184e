"""The catalog: which skills a turn is offered, resolved by scope precedence (adonis's
``resolveSkillCatalog``), and the one line per skill the model reads.

Pure and in one place, because the model's catalog and a user's listing must be the same answer.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from attrs import field, frozen

from hooks import JSONValue

from .records import ResourceDiagnostic, SkillSummary

__all__ = [
    "DEFAULT_MAX_SKILLS",
    "CatalogEntry",
    "Resolved",
    "SkillOffer",
    "catalog_block",
    "make_offer",
    "resolve_precedence",
]

DEFAULT_MAX_SKILLS = 20
"""How many skills a catalog lists before leaving some out (a ceiling on the system prompt's
share, not on how many skills there may be)."""


def _strings(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class CatalogEntry:
    """One skill as offered: to the model in the system prompt and to a user's listing.

    ``shadows`` are the scopes of same-named skills it outranks, widest last (empty: none), so a
    reader can tell "there is no wider default" from "there is one and this one wins".
    """

    name: str
    description: str
    scope: str
    location: str | None = None
    shadows: tuple[str, ...] = field(default=(), converter=_strings)


def _entries(value: Sequence[CatalogEntry]) -> tuple[CatalogEntry, ...]:
    return tuple(value)


@frozen(kw_only=True)
class SkillOffer:
    """What one turn was offered: journaled whole (custom entry ``harness.skills.catalog``), so
    the prompt can be rebuilt from the session alone.

    Attributes:
        scopes: the scopes the turn drew from, most specific first.
        entries: the skills offered, most specific scope first, then by name.
        omitted: applicable skills the cap left out (non-zero: the list is not everything).
    """

    scopes: tuple[str, ...] = field(converter=_strings)
    entries: tuple[CatalogEntry, ...] = field(converter=_entries)
    omitted: int = 0

    def entry(self, name: str) -> CatalogEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "scopes": list(self.scopes),
            "entries": [
                {
                    "name": e.name,
                    "description": e.description,
                    "scope": e.scope,
                    "location": e.location,
                    "shadows": list(e.shadows),
                }
                for e in self.entries
            ],
            "omitted": self.omitted,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SkillOffer:
        """Read a journaled offer back. Raises ``KeyError``/``TypeError`` on a foreign shape."""
        return cls(
            scopes=[str(s) for s in data["scopes"]],
            entries=[
                CatalogEntry(
                    name=str(e["name"]),
                    description=str(e["description"]),
                    scope=str(e["scope"]),
                    location=None if e.get("location") is None else str(e["location"]),
                    shadows=[str(s) for s in e.get("shadows", ())],
                )
                for e in data["entries"]
            ],
            omitted=int(data.get("omitted", 0)),
        )


@frozen(kw_only=True)
class Resolved:
    """A name's winner after precedence, the scopes it shadows, and the skills it beat."""

    winner: SkillSummary
    shadows: tuple[str, ...]
    losers: tuple[SkillSummary, ...]


def resolve_precedence(
    summaries: Sequence[SkillSummary], scopes: Sequence[str]
) -> tuple[list[Resolved], list[ResourceDiagnostic]]:
    """Resolve listed skills against ordered scopes: the most specific scope wins a name.

    Skills outside ``scopes`` are dropped. Within one scope the first listed wins (the
    composite provider's order). Each loser gets a ``collision`` diagnostic. Result: winners
    by scope order, then name.
    """
    rank = {scope: i for i, scope in enumerate(scopes)}
    by_name: dict[str, list[SkillSummary]] = {}
    for skill in summaries:
        if skill.scope in rank:
            by_name.setdefault(skill.name, []).append(skill)
    resolved: list[Resolved] = []
    diagnostics: list[ResourceDiagnostic] = []
    for name, group in by_name.items():
        ordered = sorted(group, key=lambda s: rank[s.scope])  # stable: ties keep list order
        winner, losers = ordered[0], tuple(ordered[1:])
        shadows = tuple(dict.fromkeys(s.scope for s in losers if s.scope != winner.scope))
        for loser in losers:
            reason = (
                f"scope {winner.scope!r} outranks {loser.scope!r}"
                if loser.scope != winner.scope
                else f"same scope {winner.scope!r}: listed first (earlier provider)"
            )
            diagnostics.append(
                ResourceDiagnostic(
                    code="collision",
                    message=f"skill {name!r}: {winner.location or winner.scope} wins over "
                    f"{loser.location or loser.scope} ({reason})",
                    name=name,
                    path=loser.location,
                    dropped=True,
                    winner_path=winner.location,
                    loser_path=loser.location,
                    reason=reason,
                )
            )
        resolved.append(Resolved(winner=winner, shadows=shadows, losers=losers))
    resolved.sort(key=lambda r: (rank[r.winner.scope], r.winner.name))
    return resolved, diagnostics


def make_offer(
    resolved: Sequence[Resolved],
    scopes: Sequence[str],
    *,
    disabled: Collection[str] = (),
    max_skills: int = DEFAULT_MAX_SKILLS,
) -> SkillOffer:
    """The model's catalog: enabled winners without ``disable_model_invocation``, capped.

    A disabled skill is left out by name: it does not let a shadowed one through.
    """
    offered = [
        CatalogEntry(
            name=r.winner.name,
            description=r.winner.description,
            scope=r.winner.scope,
            location=r.winner.location,
            shadows=r.shadows,
        )
        for r in resolved
        if r.winner.name not in disabled and not r.winner.disable_model_invocation
    ]
    kept = offered[: max(0, max_skills)]
    return SkillOffer(scopes=scopes, entries=kept, omitted=len(offered) - len(kept))


def catalog_block(offer: SkillOffer) -> str:
    """The catalog as the model reads it: one line per skill (name, scope, description,
    location, shadows) and the omitted count; empty when nothing is offered."""
    if not offer.entries:
        return ""
    lines = [
        "<skills>",
        "Skills are written procedures for particular tasks. Before doing a task that a skill "
        "below covers, call the `skill` tool with its name and follow what it returns; it runs "
        "nothing, it only gives you instructions. Paths in a skill are relative to its location.",
    ]
    for e in offer.entries:
        line = f"- {e.name} [{e.scope}]: {_one_line(e.description)}"
        if e.location is not None:
            line += f" (location: {e.location})"
        if e.shadows:
            line += f" (overrides: {', '.join(e.shadows)})"
        lines.append(line)
    if offer.omitted:
        lines.append(f"({offer.omitted} more skills are not listed.)")
    lines.append("</skills>")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())
