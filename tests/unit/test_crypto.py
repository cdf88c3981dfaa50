"""Crypto-shredding without servers: sealing, the key ring, erase by tombstone, the fold passing ciphertext through."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from provstream.acls import grants
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.triples import Literal
from provstream.crypto import ERASED, KeyRing, MemoryKeyStore, parse_master_key, scope_of, seal_event
from provstream.errors import ConfigError
from provstream.keys import keys_topic_spec, load_master_key
from provstream.settings import Settings
from provstream.testing import fold_all

MARKER = "zebra-marker-4711"
PERSONAL = ("query", "thought", "arguments", "observation", "answer", "content", "reasoning")


def _ring(store: MemoryKeyStore | None = None) -> KeyRing:
    return KeyRing(store or MemoryKeyStore(), AESGCM(bytes(range(32))))


def _record(ring: KeyRing, user: str = "alice", session: str = "s1") -> list[ev.Event]:
    transport = MemoryTransport()
    with Emitter(Settings(), transport=transport, keys=ring) as emitter:
        a = emitter.agent(f"what {MARKER}?", user=user, collection="c", session_id=session)
        a.iteration(thought=f"think {MARKER}", action="Search", arguments={"q": MARKER}, observation=f"saw {MARKER}")
        a.conclude(f"answer {MARKER}")
        g = emitter.graphrag(f"graph {MARKER}", user=user, collection="c", session_id=session + "g")
        g.explore(3)
        g.focus([("urn:x", "urn:p", "o", f"because {MARKER}")])
        g.synthesize(f"synth {MARKER}")
    from provstream.codec.records import decode_event

    return [decode_event(v) for _, v in transport.sent]


def test_sealed_events_hold_no_plaintext_and_keep_their_structure() -> None:
    events = _record(_ring())
    for e in events:
        assert MARKER not in repr(e)
    iteration = next(e.payload for e in events if isinstance(e.payload, ev.AgentIteration))
    assert iteration.action == "Search" and iteration.arguments.startswith(ev.SEALED_PREFIX)


def test_fold_passes_ciphertext_through_and_readers_open_it() -> None:
    ring = _ring()
    messages = fold_all(_record(ring))
    assert all(MARKER not in str(t) for m in messages for t in m.triples)
    opened = [ring.open_triples(m) for m in messages]
    texts = [t.o.value for m in opened for t in m.triples if isinstance(t.o, Literal)]
    assert sum(MARKER in x for x in texts) == 8 and '{"q": "zebra-marker-4711"}' in texts


def test_a_tombstone_erases_and_a_new_reader_reads_the_marker() -> None:
    store = MemoryKeyStore()
    writer = _ring(store)
    alice, bob = fold_all(_record(writer, "alice", "a1")), fold_all(_record(writer, "bob", "b1"))
    for kid, record in list(store.live().items()):
        if scope_of(record).matches("alice"):
            store.put(kid, None)
    reader = _ring(MemoryKeyStore())
    reader.store = type("Compacted", (), {"read_new": lambda self: list(store.live().items())})()
    erased = [reader.open_triples(m) for m in alice]
    kept = [reader.open_triples(m) for m in bob]
    erased_texts = {t.o.value for m in erased for t in m.triples if isinstance(t.o, Literal)}
    assert ERASED in erased_texts and not any(MARKER in x for x in erased_texts)
    assert [len(m.triples) for m in erased] == [len(m.triples) for m in alice]  # structure intact
    assert sum(MARKER in t.o.value for m in kept for t in m.triples if isinstance(t.o, Literal)) == 8


def test_forget_drops_a_session_from_a_running_reader() -> None:
    store = MemoryKeyStore()
    ring = _ring(store)
    messages = fold_all(_record(ring, "carol", "c1"))
    assert MARKER in str(ring.open_triples(messages[0]).triples)
    assert ring.forget("carol", "c", "c1")
    assert MARKER not in str(ring.open_triples(messages[0]).triples)


def test_empty_fields_stay_empty_and_other_payloads_are_untouched() -> None:
    from datetime import UTC, datetime
    e = ev.Event("e", "s", ev.Mechanism.DOCRAG, 1, datetime(2025, 1, 1, tzinfo=UTC),
                 ev.DocRagExploration(2, ("chunk-1",)))
    assert seal_event(e, AESGCM(bytes(32)), "s~1") is e
    i = replace(e, mechanism=ev.Mechanism.AGENT, payload=ev.AgentIteration(1, thought="", action="A"))
    assert seal_event(i, AESGCM(bytes(32)), "s~1").payload.thought == ""


def test_another_master_key_is_refused_in_one_line() -> None:
    store = MemoryKeyStore()
    _ring(store).key_for("u", "c", "s")
    with pytest.raises(ConfigError, match="not wrapped by this master key"):
        KeyRing(store, AESGCM(bytes(32))).refresh()


def test_master_key_file_is_made_once_with_mode_0600(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(master_key_file=str(tmp_path / "secrets" / "master-key"))
    with pytest.raises(ConfigError, match="no master key"):
        load_master_key(settings)
    load_master_key(settings, create=True)
    first = (tmp_path / "secrets" / "master-key").read_bytes()
    load_master_key(settings, create=True)
    assert (tmp_path / "secrets" / "master-key").read_bytes() == first
    assert (tmp_path / "secrets" / "master-key").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ConfigError, match="not base64"):
        parse_master_key(base64.b64encode(b"short"), "f")


def test_settings_keys_topic_and_acls() -> None:
    s = Settings.from_env({"PROVSTREAM_ENCRYPT": "1", "PROVSTREAM_KEYS_COMPACTION_MS": "500"})
    assert s.encrypt == 1 and keys_topic_spec(s).topic_configs["segment.ms"] == "500"
    assert Settings().encrypt == 0
    keys = {(g.role, g.operation) for g in grants(s) if g.name == s.keys_topic}
    assert keys == {("emitter", "WRITE"), ("emitter", "DESCRIBE"), ("otlp", "WRITE"), ("otlp", "DESCRIBE"),
                    ("otlp", "READ"), ("sink", "READ"), ("reader", "READ")}
    assert not [g for g in grants(Settings()) if g.name == Settings().keys_topic]
