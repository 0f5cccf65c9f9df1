"""Python's cyclic garbage collector held off while a sync or a graph load runs.

Both make millions of short-lived tuples, lists and dicts and no reference cycles: reference
counting frees every one of them, and the collector would only rescan them. Its full
collections alone cost 45-75 ms each once a process holds a few hundred thousand objects (a
full sync of 100k rows met one or two; a re-sync, often one).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (it is process-wide: other threads' too); the
    collector comes back as it was, and picks up any cycle made meanwhile at its next run."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
