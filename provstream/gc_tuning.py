"""Python's cyclic garbage collector, tuned for provstream's long-running processes.

The worker, the sink, the OTLP receiver and replay make and drop tens of
container objects per step (decoded terms, rows, records). None of them form
reference cycles, so reference counting frees them; but with Python's default
thresholds (700, 10, 10) the cyclic collector runs every 700 allocations and,
every hundred runs, walks every object the process holds (the imported
modules, the clients, the batch in hand). In the sink's decode-and-build path
that walk cost about half the CPU (BENCHMARKS.md, "Python's cyclic collector").

:func:`tune_gc` moves what start-up created out of the collector's sight
(``gc.freeze``) and makes the youngest generation ``gc_gen0`` allocations
deep, so cycles (asyncio's and the clients' own) are still collected, less
often. Only provstream's own processes call it: the emitter runs in the
agent's process and leaves its collector alone.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from provstream.settings import Settings


def tune_gc(settings: Settings) -> tuple[int, int, int]:
    """Freeze the objects made so far and set the collector's thresholds from ``settings.gc_gen0``.

    :param settings: ``gc_gen0`` (``PROVSTREAM_GC_GEN0``): allocations between
        collections of the youngest generation; ``0`` leaves Python's defaults
        and freezes nothing.
    :returns: the thresholds in force afterwards.

    Example: ``tune_gc(Settings(gc_gen0=100_000))`` returns ``(100000, 10, 10)``.
    """
    if settings.gc_gen0 > 0:
        gc.collect()
        gc.freeze()
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(settings.gc_gen0, gen1, gen2)
    return gc.get_threshold()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Turn the cyclic collector off for a phase that builds one large acyclic structure, then back on.

    The bulk rebuild folds the whole triples topic into an in-memory graph of
    millions of objects (dicts, lists, sets: all tracked by the collector, none
    in a cycle). With the collector on, each of its older-generation passes walks
    everything built so far, so the work grows with the square of the log. Reference
    counting still frees every acyclic object at once; cycles made meanwhile (the
    clients' own) wait until the phase ends. Nests: an inner pause leaves the
    collector as the outer one set it.

    Example::

        with collector_paused():
            image = fold_everything()   # gc.isenabled() is False here
        # back to what it was before
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
