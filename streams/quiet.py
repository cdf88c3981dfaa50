"""A logging filter that lets one of each repeated warning or error through per interval.

While Kafka is down, aiokafka logs the same few errors (``Unable connect to
node ...``, ``Unable to update metadata ...``) about a hundred times a
second. :class:`RepeatLimit` passes the first record of each kind (logger,
level and message template, not the formatted text), drops the repeats for
:data:`INTERVAL` seconds, and then passes the next one with how many were
dropped appended, so the log still says what is going on and how often.
Records below WARNING are never touched.

Example::

    handler.addFilter(RepeatLimit())
    # Unable connect to node with id 1: [Errno 111] Connect call failed
    # ... 30 s later:
    # Unable connect to node with id 1: [Errno 111] Connect call failed (2,941 more like this in the last 30 s)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

INTERVAL = 30.0
KINDS = 1000  # distinct kinds remembered at most (then forgotten all at once)


class RepeatLimit(logging.Filter):
    """At most one record per kind (logger, level, message template) and ``interval``; see the module doc.

    :param interval: seconds during which repeats of a kind are dropped.
    :param clock: the time source (tests pass a fake one).
    """

    def __init__(self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self._clock = clock
        self._kinds: dict[tuple[str, int, str], list[float | int]] = {}  # kind -> [window start, dropped]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        decided = getattr(record, "_provstream_passed", None)  # the same record at a second handler
        if decided is not None:
            return bool(decided)
        record._provstream_passed = passed = self._decide(record)
        return passed

    def _decide(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            seen = self._kinds.get(kind)
            if seen is not None and now - seen[0] < self.interval:
                seen[1] += 1
                return False
            if len(self._kinds) >= KINDS:
                self._kinds.clear()
            self._kinds[kind] = [now, 0]
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} ({int(seen[1]):,} more like this in the last {now - seen[0]:.0f} s)"
            record.args = ()
        return True


def limit_repeats(logger: logging.Logger, interval: float = INTERVAL) -> RepeatLimit:
    """Add one :class:`RepeatLimit` to every handler of ``logger``; return it.

    A handler filter sees the records propagated from every child logger
    (aiokafka's included), which a logger filter would not.
    """
    limit = RepeatLimit(interval)
    for handler in logger.handlers:
        handler.addFilter(limit)
    return limit
