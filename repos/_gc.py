"""The cyclic garbage collector around bulk decoding.

Opening a long session builds one row per line, and its first context builds every message of
the kept window: hundreds of thousands of objects, none of them part of a cycle. Left alone, the
collector would look at them several times while they are built (each young collection walks
every object built since the last) and twice more as they age. :func:`bulk` pauses it, then
moves what was built straight to the oldest generation, so only a full collection ever looks at
them, once, as it looks at every object (``bench/README.md`` has the figures).

Known limit: another thread calling ``gc.freeze()`` or ``gc.disable()`` while a bulk decode
runs may see it undone when the decode ends (the collector's state is process-wide and has no
atomic test-and-set).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["LARGE_ENTRIES", "LARGE_FILE", "bulk"]

# From these sizes on, a bulk decode is worth promoting (its young collection would walk tens of
# thousands of objects; the collection at entry costs well under a millisecond).
LARGE_ENTRIES = 4096
LARGE_FILE = 2 << 20  # bytes of a session file to open


@contextmanager
def bulk(large: bool = True) -> Iterator[None]:
    """Pause the cyclic collector for a bulk decode; when it is ``large`` (thousands of
    objects), move what it built to the oldest generation on exit.

    Promotion: the young generations are collected first (``gc.collect(1)``: the caller's
    young garbage is reclaimed now, not promoted with the rest; a process that opens sessions
    in a loop keeps collecting it), then on exit every tracked object is promoted
    (``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no traversal). It is skipped when
    the caller disabled the collector (it is left disabled) or keeps a frozen generation of its
    own (``gc.get_freeze_count()`` > 0, a pre-fork server's): unfreezing would release that too.
    A small decode only pauses the collector: a collection of its few objects costs less than
    the one at entry.
    """
    enabled = gc.isenabled()
    promote = large and enabled and gc.get_freeze_count() == 0
    if promote:
        gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if promote and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
