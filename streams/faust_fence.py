"""The fence around Faust: every upstream internal the worker replaces or relies on, checked.

The worker patches faust-streaming / aiokafka internals
(:mod:`.faust_fixes`: ``Recovery.on_recovery_completed``,
``Recovery._resume_streams``, ``AIOKafkaConsumerThread._fetch_records``;
:mod:`.faust_speedups`: ``Consumer._drain_messages``, plus wrappers around
``Consumer.on_buffer_drop`` and ``App.on_init_dependencies``, and the ``sleep`` of the
Cython ``StreamIterator.next``; :mod:`.take`: a variant of
``Stream.take_events``) and reads a few private attributes. The copies of
upstream methods use the attributes their originals use; all other code reads
them through the accessors below, nowhere else. Those were written against
exact upstream versions, so:

* :data:`PINNED` holds the versions ``pyproject.toml`` pins; :func:`check_versions`
  refuses to start the worker on any other, with a clear error;
* :data:`UPSTREAM` holds a fingerprint (SHA-256 of the source text, first 16
  hex digits) of every upstream function replaced or relied on, read from the
  installed package's source file (not the live attribute, which may be
  patched). ``tests/unit/test_faust_fence.py`` fails on an upgrade that
  changes one, naming it: re-read that function, re-check the patch or
  accessor that depends on it, then update the fingerprint.

Example::

    >>> from provstream.streams import faust_fence
    >>> faust_fence.check_versions()          # raises ConfigError on a mismatch
    >>> faust_fence.changed_upstream()        # [] when every fingerprint matches
    []
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from provstream.errors import ConfigError

PINNED: Final = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0"}

# "module:Class.method" -> fingerprint, with what depends on it.
UPSTREAM: Final = {
    # replaced by faust_fixes (seek before resume; no fetch for an empty active set)
    "faust.tables.recovery:Recovery.on_recovery_completed": "cd8604c016ec07c2",
    "faust.tables.recovery:Recovery._resume_streams": "12032bac421b7e18",
    "faust.transport.drivers.aiokafka:AIOKafkaConsumerThread._fetch_records": "42af390b23296396",
    # replaced by faust_speedups (eager delivery; same semantics)
    "faust.transport.consumer:Consumer._drain_messages": "35808b82ae2fb175",
    # wrapped by faust_speedups (wakes the fetch); relied on: on_buffer_full takes a partition out, and
    # wake_fetch(): a fetch waiter set wakes fetched_records, which looks at its records again
    "faust.transport.consumer:Consumer.on_buffer_drop": "025c8c202874f7b4",
    "faust.transport.consumer:Consumer.on_buffer_full": "e208d4e5463ff9af",
    "aiokafka.consumer.fetcher:Fetcher._create_fetch_waiter": "587dca1be22a22eb",
    # followed by take.take_ready (take_events with one more way to close a batch), which also relies on
    # _enable_passive and the stream's _processors and _active_agens
    "faust.streams:Stream.take_events": "c38c1ba0050c13ef",
    "faust.streams:Stream._enable_passive": "356274e655d9b08b",
    # its `sleep` (asyncio.sleep, one loop trip per event) replaced by faust_speedups.SometimesYield
    "faust._cython.streams:StreamIterator.next": "c774d1c1555e920d",
    # replaced by faust_speedups (the setting each reads, read once)
    "faust.transport.producer:ProducerBuffer.size": "d9d0567eb7cfc388",
    "faust.app.base:App.create_event": "f558911ecd766e3c",
    # wrapped by faust_speedups.without_monitor
    "faust.app.base:App.on_init_dependencies": "ffe75fe2458138c1",
    # extended by runner.QuietWorker (one of each repeated warning/error per 30 s on the log handlers)
    "faust.worker:Worker.on_setup_root_logger": "650587e8d6d36bff",
    # done by app._Fold itself (store, then the changelog record through a BatchPublisher): what
    # `table[key] = state` and `del table[key]` do (a changelog record, then the store), and what the
    # record's delivery callback does with a memory store (set_persisted_offset: nothing)
    "faust.tables.table:Table.on_key_set": "0cb79da5f6fcf1db",
    "faust.tables.table:Table.on_key_del": "a418c7177e1ebe64",
    "faust.tables.base:Collection.send_changelog": "acd15729b1d3fb21",
    "faust.tables.base:Collection._on_changelog_sent": "111970fd6e1effbb",
    "faust.tables.base:Collection.data": "6eac370e67297e52",
    "faust.stores.base:Store.set_persisted_offset": "1ed5deca99d3d68b",
    "mode.utils.collections:ManagedUserDict.__setitem__": "8f0f4e5c9e4263c9",
    "mode.utils.collections:ManagedUserDict.__delitem__": "daaf5224e4a6b203",
    # relied on: raw_producer(), committed_offsets(), in_recovery(), and the patched code's calls
    "faust.transport.drivers.aiokafka:Producer._ensure_producer": "7dcc5fae06118503",
    "faust.transport.consumer:Consumer._commit_offsets": "e2ab6185fcf7c9de",
    "faust.tables.recovery:Recovery._set_recovery_ended": "451eea5e4c717c33",
    "aiokafka.consumer.fetcher:Fetcher.fetched_records": "b4ecba13bb50c17a",
    "aiokafka.consumer.subscription_state:SubscriptionState.fetch_context": "cb3d3108eea860e8",
}


def check_versions(installed: dict[str, str] | None = None) -> None:
    """Refuse to run the patched worker on other faust-streaming / aiokafka versions.

    :param installed: distribution name -> version (default: what is installed).
    :raises ConfigError: naming each distribution whose version differs from :data:`PINNED`.
    """
    found = installed if installed is not None else {name: _version(name) for name in PINNED}
    wrong = [f"{name} {found.get(name)} (needs {want})" for name, want in PINNED.items() if found.get(name) != want]
    if wrong:
        raise ConfigError("the worker's Faust patches were written for other versions: " + ", ".join(wrong)
                          + "; reinstall with `make` (pyproject.toml pins them)")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def fingerprint(target: str) -> str:
    """The fingerprint of ``module:Class.method`` as the installed source file defines it.

    :param target: e.g. ``"faust.tables.recovery:Recovery._resume_streams"``.
    :returns: the first 16 hex digits of the SHA-256 of the function's source text.
    :raises LookupError: when the module, class or function no longer exists.
    """
    module, qualname = target.split(":")
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise LookupError(f"{module} is not installed")
    origin = Path(spec.origin)
    if origin.suffix != ".py":  # a compiled Cython module: its .pyx source is installed beside it
        pyx = origin.with_name(module.rpartition(".")[2] + ".pyx")
        if not pyx.is_file():
            raise LookupError(f"{target}: no source {pyx.name} beside {origin}")
        text = _pyx_segment(pyx.read_text(encoding="utf-8"), qualname, target)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
    source = origin.read_text(encoding="utf-8")
    node: Any = ast.parse(source)
    for name in qualname.split("."):
        node = next((n for n in node.body if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                     and n.name == name), None)
        if node is None:
            raise LookupError(f"{target}: {name} not found in {spec.origin}")
    text = ast.get_source_segment(source, node, padded=True) or ""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _pyx_segment(source: str, qualname: str, target: str) -> str:
    """The text of ``Class.method`` in Cython source: from its ``def`` line to the next line indented no deeper."""
    lines = source.splitlines(keepends=True)
    start, indent = 0, -1
    for name in qualname.split("."):
        pattern = re.compile(rf"^(\s*)(?:cdef |cpdef |async )*(?:class|def|object) {re.escape(name)}\b")
        for i in range(start, len(lines)):
            found = pattern.match(lines[i])
            if found and len(found.group(1)) > indent:
                start, indent = i, len(found.group(1))
                break
        else:
            raise LookupError(f"{target}: {name} not found")
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    return "".join(lines[start:end]).rstrip() + "\n"


def changed_upstream(expected: dict[str, str] = UPSTREAM) -> list[str]:
    """The targets whose installed source no longer matches its recorded fingerprint (or is gone)."""
    changed = []
    for target, want in expected.items():
        try:
            have = fingerprint(target)
        except LookupError as exc:
            changed.append(f"{target} ({exc})")
            continue
        if have != want:
            changed.append(f"{target} (fingerprint {have}, recorded {want})")
    return changed


# -- private attributes, read only here ----------------------------------------

def raw_producer(app: Any) -> Any:
    """The aiokafka producer under Faust's (``Producer._ensure_producer``), for whole record batches."""
    return app.producer._ensure_producer()


def committed_offsets(consumer: Any) -> Any:
    """Faust's next offset after the last commit, per partition (``Consumer._committed_offset``)."""
    return getattr(consumer, "_committed_offset", {})


def buffered_partitions(consumer: Any) -> Any:
    """The partitions Faust took out of its fetch set for a full stream buffer (``Consumer._buffered_partitions``)."""
    return consumer._buffered_partitions


def wake_fetch(consumer: Any) -> None:
    """Wake a ``fetched_records`` call waiting in Faust's consumer thread, so it looks at its records again.

    ``ThreadDelegateConsumer._thread`` runs the aiokafka consumer (``_consumer``) in its own loop
    (``thread_loop``); aiokafka's ``Fetcher._fetch_waiters`` are the futures such a call waits on,
    set (from that loop) whenever new records arrive. Nothing happens before the consumer started.
    """
    thread = getattr(consumer, "_thread", None)
    aio = getattr(thread, "_consumer", None)
    fetcher = getattr(aio, "_fetcher", None)
    if fetcher is None or thread is None:
        return
    with contextlib.suppress(RuntimeError):  # the thread's loop closed meanwhile (the worker is stopping)
        thread.thread_loop.call_soon_threadsafe(_set_waiters, fetcher)


def _set_waiters(fetcher: Any) -> None:
    for waiter in list(fetcher._fetch_waiters):
        if not waiter.done():
            waiter.set_result(None)


def in_recovery(app: Any) -> bool:
    """Whether the table manager is restoring from its changelog (``TableManager.recovery``)."""
    return bool(app.tables.recovery.in_recovery)
