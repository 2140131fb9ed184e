"""The cyclic garbage collector around bulk decoding.

Opening a long session builds one row per line, and its first context builds every message of
the kept window: hundreds of thousands of objects, none of them part of a cycle. Left alone, the
collector would look at them several times while they are built (each young collection walks
every object built since the last) and twice more as they age. :func:`bulk` pauses it, then
moves what was built straight to the oldest generation, so only a full collection ever looks at
them, once, as it looks at every object (``bench/README.md`` has the figures).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["bulk"]


@contextmanager
def bulk() -> Iterator[None]:
    """Pause the cyclic collector for a bulk decode; on exit, promote every tracked object to the
    oldest generation (``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no traversal)
    and resume it.

    The promotion is skipped when the collector was disabled by the caller (it is left disabled)
    or when the process keeps a frozen generation of its own (``gc.get_freeze_count()`` > 0, a
    pre-fork server's): unfreezing would release that too. The caller's young garbage cycles,
    promoted with the rest, are reclaimed by the next full collection instead of a young one.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
