"""The suite's cases can fail: each repo here breaks one rule of the protocol, and the case
that guards that rule must fail on it (while the same case passes on the honest repo)."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from repos import (
    InvalidSessionIdError,
    MemorySessionRepo,
    Session,
    SessionExistsError,
    SessionInfo,
    SessionNotFoundError,
    SessionRepo,
)
from repos._memory import _load, _Record
from repos.testing import ConformanceSuite


class _Wrapper:
    """A repo delegating to a ``MemorySessionRepo``; subclasses break one thing."""

    def __init__(self) -> None:
        self.inner = MemorySessionRepo()

    async def create(
        self,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        return await self.inner.create(
            cwd, session_id=session_id, parent_session=parent_session, metadata=metadata
        )

    async def open(self, ref: str | Path) -> Session:
        return await self.inner.open(ref)

    async def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        return await self.inner.list(cwd)

    async def delete(self, ref: str | Path) -> None:
        await self.inner.delete(ref)

    async def fork(self, source: str | Path, **kwargs: object) -> Session:
        return await self.inner.fork(source, **kwargs)  # type: ignore[arg-type]


class DeleteOfMissingRaises(_Wrapper):
    async def delete(self, ref: str | Path) -> None:
        await self.inner.open(ref)  # raises SessionNotFoundError for a missing one
        await self.inner.delete(ref)


class DeleteDoesNothing(_Wrapper):
    async def delete(self, ref: str | Path) -> None:
        return None


class ListOldestFirst(_Wrapper):
    async def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        return list(reversed(await self.inner.list(cwd)))


class ListByCwdPrefix(_Wrapper):
    async def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        infos = await self.inner.list()
        return [i for i in infos if cwd is None or i.cwd.startswith(cwd)]


class CreateOverwrites(_Wrapper):
    async def create(
        self,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        try:
            return await super().create(cwd, session_id=session_id, metadata=metadata)
        except SessionExistsError:
            await self.inner.delete(session_id or "")
            return await super().create(cwd, session_id=session_id, metadata=metadata)


class SanitisesIds(_Wrapper):
    @staticmethod
    def _clean(sid: str) -> str:
        return "".join(c for c in sid if c.isalnum()) or "empty"

    async def create(
        self,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        sid = None if session_id is None else self._clean(session_id)
        return await super().create(cwd, session_id=sid, metadata=metadata)

    async def open(self, ref: str | Path) -> Session:
        return await super().open(self._clean(str(ref)))


class ForkCopiesTheTree(_Wrapper):
    async def fork(self, source: str | Path, **kwargs: object) -> Session:
        return await self.inner.fork(source, scope="tree")


class ForkDropsLabels(_Wrapper):
    """Forks at the default leaf through a path that skips label entries: parents dangle."""

    async def fork(self, source: str | Path, **kwargs: object) -> Session:
        fork = await self.inner.fork(source, **kwargs)  # type: ignore[arg-type]
        record = self.inner._sessions[fork.id]
        record.lines[1:] = [line for line in record.lines[1:] if b'"type":"label"' not in line]
        fork.close()
        return await self.inner.open(fork.id)


class OpenDropsTheLastLine(_Wrapper):
    """``open`` reads all lines but the last, as a reader that misses a final line would."""

    async def open(self, ref: str | Path) -> Session:
        record = self.inner._sessions.get(str(ref))
        if record is None or len(record.lines) < 2:
            return await super().open(ref)
        return _load(_Record(header=record.header, lines=record.lines[:-1]))


Case = Callable[[ConformanceSuite, SessionRepo], Awaitable[None]]

FAULTS: list[tuple[type[_Wrapper], Case]] = [
    (
        DeleteOfMissingRaises,
        ConformanceSuite.test_delete_is_idempotent_and_open_after_delete_raises_not_found,
    ),
    (
        DeleteDoesNothing,
        ConformanceSuite.test_delete_is_idempotent_and_open_after_delete_raises_not_found,
    ),
    (DeleteDoesNothing, ConformanceSuite.test_a_session_deleted_while_open_refuses_appends),
    (ListOldestFirst, ConformanceSuite.test_list_reports_sessions_newest_activity_first),
    (ListByCwdPrefix, ConformanceSuite.test_list_filters_on_the_exact_cwd),
    (CreateOverwrites, ConformanceSuite.test_create_refuses_a_taken_id),
    (SanitisesIds, ConformanceSuite.test_the_longest_valid_id_is_accepted),
    (ForkCopiesTheTree, ConformanceSuite.test_fork_keeps_labels_as_the_source_has_them),
    (ForkDropsLabels, ConformanceSuite.test_fork_keeps_labels_as_the_source_has_them),
    (OpenDropsTheLastLine, ConformanceSuite.test_reopen_sees_every_append),
    (OpenDropsTheLastLine, ConformanceSuite.test_every_entry_type_round_trips_through_a_reopen),
]


# What a failing case raises: a failed assert, a `pytest.raises` that saw nothing (`Failed`),
# or the repo's own error where the case expected success.
FAILURES = (AssertionError, pytest.fail.Exception, SessionNotFoundError, InvalidSessionIdError)


class _Suite(ConformanceSuite):
    supports_paths = False


@pytest.mark.parametrize(
    ("faulty", "case"), FAULTS, ids=[f"{f.__name__}-{c.__name__}" for f, c in FAULTS]
)
async def test_a_faulty_repo_fails_the_case_guarding_its_rule(
    faulty: type[_Wrapper], case: Case
) -> None:
    await case(_Suite(), _Wrapper())  # the honest wrapper passes
    with pytest.raises(FAILURES):
        await case(_Suite(), faulty())


@pytest.mark.parametrize("bad", ["../x", "a/b", ".hidden"])
async def test_a_repo_that_sanitises_hostile_ids_fails(bad: str) -> None:
    with pytest.raises(FAILURES):
        await _Suite().test_hostile_session_ids_are_refused(SanitisesIds(), bad)
