"""Handing items from one thread to another through a bounded queue: the producer waits for
room, but never for ever once the other side has stopped (it would hold its thread, and the
connection or socket that thread reads, until the process ends)."""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

POLL_S = 0.1  # how often a full queue's producer looks whether the other side has stopped


def put_unless(waiting: queue.Queue[Any], item: Any, stopped: Callable[[], bool]) -> bool:
    """Put `item` into `waiting` once it has room, unless `stopped()` comes true first: then
    the item is dropped and the answer is False."""
    while not stopped():
        try:
            waiting.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False
