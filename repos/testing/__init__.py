"""A conformance suite for :class:`repos.SessionRepo` implementations, ours or anyone's.

Needs ``pytest`` and ``pytest-asyncio`` (test dependencies only: import this package from tests,
never from application code). Subclass :class:`ConformanceSuite` in a test module, under a name
pytest collects (``Test...``), and supply the repo under test as a ``session_repo`` fixture::

    # tests/test_my_repo.py
    import pytest
    from repos.testing import ConformanceSuite

    class TestMyRepo(ConformanceSuite):
        supports_paths = False          # capabilities your repo lacks (see below)

        @pytest.fixture
        def session_repo(self, tmp_path):
            return MyRepo(tmp_path)     # a fresh repo for every case

The fixture may be async (``async def``, and in pytest-asyncio's strict mode decorated with
``@pytest_asyncio.fixture``) and may ``yield`` to clean up. The cases are coroutines marked
``pytest.mark.asyncio``, so they run under ``asyncio_mode = "strict"`` or ``"auto"``.
``ConformanceSuite`` itself is not collected (its name does not start with ``Test``).

Every case uses its own cwd (``/conformance/<case>-<random>``) and ids prefixed ``conf``, and
filters ``list`` on that cwd, so a repo that already holds sessions works too; a fresh one per
case is still best, since the cases create and delete sessions.

Capabilities (class attributes):

``supports_paths`` (default True)
    Sessions have a ``path`` that exists, and ``open``, ``fork`` and ``delete`` accept it as a
    ref; refused appends must leave the file's bytes unchanged. Set it to False for a repo
    without files (``MemorySessionRepo``): ``path`` must then be None everywhere.

To mark a case your repo is known to fail, override it in the subclass::

    @pytest.mark.xfail(strict=True, reason="...")
    async def test_refresh_of_a_deleted_session_raises_gone(self, session_repo):
        await super().test_refresh_of_a_deleted_session_raises_gone(session_repo)

Each case takes only ``session_repo`` (plus its parameter, for parametrized cases), so a case
can also be awaited directly: ``await ConformanceSuite().test_paths(repo)``.
"""

import pytest

# Before the modules are imported: pytest then rewrites their asserts, so a failing case says
# which values differed.
pytest.register_assert_rewrite("repos.testing._suite", "repos.testing._helpers")

from ._suite import HOSTILE_SESSION_IDS, NON_JSON_VALUES, ConformanceSuite, nested  # noqa: E402

__all__ = ["HOSTILE_SESSION_IDS", "NON_JSON_VALUES", "ConformanceSuite", "nested"]
