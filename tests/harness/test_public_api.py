"""``harness`` re-exports the whole public API of the three packages."""

from __future__ import annotations

import harness
import hooks
import repos


def test_harness_reexports_everything_public_from_hooks_and_repos() -> None:
    missing = (set(hooks.__all__) | set(repos.__all__)) - set(harness.__all__)
    assert missing == set()


def test_every_exported_name_exists_and_public_classes_name_their_package() -> None:
    for name in harness.__all__:
        obj = getattr(harness, name)
        if isinstance(obj, type) and obj.__module__.split(".")[0] in ("harness", "hooks", "repos"):
            assert obj.__module__ in ("harness", "hooks", "repos"), (name, obj.__module__)


def test_every_error_has_a_stable_code() -> None:
    errors = [getattr(harness, n) for n in harness.__all__ if n.endswith("Error")]
    errors = [e for e in errors if isinstance(e, type) and issubclass(e, harness.HarnessError)]
    codes = [e.code for e in errors if e is not harness.HarnessError]
    assert len(errors) >= 12
    assert all(c and c.islower() and " " not in c for c in codes)
    assert len(codes) == len(set(codes)), "two errors share a code"
