"""What the session records about skills, as custom entries (never sent to the model):

- ``harness.skills.catalog``: a :class:`SkillOffer` (``{"scopes", "entries", "omitted"}``),
  appended when a run is offered a catalog that differs from the last one on the branch;
- ``harness.skills.body``: ``{"name", "scope", "location", "body"}``, each body the ``skill``
  tool served, appended before the tool result;
- ``harness.skills.run``: ``{"skill", "scope", "sessionId", "sessionPath", "stopReason"}``, a
  ``run_skill`` call, linking its child session.

A harness opened on a session reads the last catalog and every served body of its branch back,
so the model keeps being offered, and served, the text it was first given, whatever happened to
the files since (adonis's journaled checkpoints).
"""

from __future__ import annotations

from collections.abc import Sequence

from hooks import JSONValue
from repos import CustomEntry, Entry, Session

from .catalog import SkillOffer

__all__ = ["SKILL_BODY_TYPE", "SKILL_CATALOG_TYPE", "SKILL_RUN_TYPE", "SkillJournal"]

SKILL_CATALOG_TYPE = "harness.skills.catalog"
SKILL_BODY_TYPE = "harness.skills.body"
SKILL_RUN_TYPE = "harness.skills.run"


class SkillJournal:
    """The offered catalog and the served bodies of one harness's session branch."""

    def __init__(self) -> None:
        self.offer: SkillOffer | None = None
        self._bodies: dict[tuple[str, str], str] = {}

    def restore(self, branch: Sequence[Entry]) -> None:
        """Read the last catalog and the served bodies of ``branch`` (foreign shapes skipped)."""
        for entry in branch:
            if not isinstance(entry, CustomEntry) or not isinstance(entry.data, dict):
                continue
            data = entry.data
            if entry.custom_type == SKILL_CATALOG_TYPE:
                try:
                    self.offer = SkillOffer.from_json(data)
                except (KeyError, TypeError, ValueError):
                    continue
            elif entry.custom_type == SKILL_BODY_TYPE:
                name, scope, body = data.get("name"), data.get("scope"), data.get("body")
                if isinstance(name, str) and isinstance(scope, str) and isinstance(body, str):
                    self._bodies[(name, scope)] = body

    def body(self, name: str, scope: str) -> str | None:
        return self._bodies.get((name, scope))

    def forget_bodies(self) -> None:
        """Serve every body fresh from now on (after ``refresh_skills``: take the disk's)."""
        self._bodies.clear()

    def set_offer(self, offer: SkillOffer) -> dict[str, JSONValue] | None:
        """Make ``offer`` the current one; returns the entry data to journal (custom type
        :data:`SKILL_CATALOG_TYPE`), or None when it equals the last one (a session that was
        never offered a skill gets no entry for an empty catalog)."""
        previous, self.offer = self.offer, offer
        if previous is None:
            return offer.to_json() if offer.entries else None
        return None if offer == previous else offer.to_json()

    def record_body(
        self, session: Session, name: str, scope: str, location: str | None, body: str
    ) -> str:
        """Append a served body; returns the entry id."""
        data: dict[str, JSONValue] = {
            "name": name,
            "scope": scope,
            "location": location,
            "body": body,
        }
        entry = session.append_custom(SKILL_BODY_TYPE, data)
        self._bodies[(name, scope)] = body
        return entry.id
