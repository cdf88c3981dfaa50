"""Crypto-shredding of the personal text fields (docs/security.md, "Erase").

The personal text fields of a step (``query``, ``thought``, ``arguments``,
``observation``, ``answer``, ``content``, ``reasoning``) travel on Kafka only
as AES-GCM ciphertext under a *data key* of their session. A sealed field is
one opaque string::

    ps-enc:1:<kid>:<base64url(12-byte nonce + ciphertext + 16-byte tag)>

where ``kid`` (``<session>~<16 hex>``) names the data key and is the AES-GCM
associated data. The fold passes such strings through as literal text; the
readers (sink, replay, follow, as-of) open them with :class:`KeyRing`, and a
field whose key was erased reads :data:`ERASED`.

Data keys live in the compacted keys topic (:mod:`provstream.keys`), each
wrapped (AES-GCM) by the master key, in a record keyed by its ``kid`` whose
value names its scope (user, collection, session). Erasing tombstones the
record: once compacted, no copy of the data key is left and the ciphertext on
every topic is noise.

This module does no I/O: the key records come from a :class:`KeyStore`
(:class:`MemoryKeyStore` here, :class:`provstream.keys.KafkaKeyStore` on Kafka).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Final, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from provstream.core import events as ev
from provstream.core.events import SEALED_PREFIX
from provstream.core.triples import Literal, StepTriples, Triple
from provstream.errors import ConfigError

ERASED: Final = "[erased]"
"""What a sealed field reads as once its data key is gone (erased)."""

TRACE_SCOPE_PREFIX: Final = "otlp-trace-"
"""The session of an OTLP trace's key scope is this and the trace id (:func:`provstream.codec.otlp.key_scope`)."""

KEY_BYTES: Final = 32  # AES-256
NONCE_BYTES: Final = 12
_SESSION_CACHE: Final = 10_000  # data keys an emitter keeps for its open sessions


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose a data key is: the session's user, collection and session id."""

    user: str
    collection: str
    session: str

    def matches(self, user: str, collection: str | None = None, session: str | None = None) -> bool:
        """Whether an erase of ``user`` [``collection``] [``session``] covers this scope.

        >>> Scope("alice", "c", "s1").matches("alice", session="s1")
        True
        """
        return (self.user == user and (collection is None or self.collection == collection)
                and (session is None or self.session == session))


class KeyStore(Protocol):
    """Where wrapped data keys are kept: ``kid`` -> record bytes; ``None`` is a tombstone."""

    def put(self, kid: str, record: bytes | None) -> None:
        """Store ``record`` under ``kid`` durably before returning (``None``: delete)."""
        ...

    def read_new(self) -> list[tuple[str, bytes | None]]:
        """The records stored since the last call (all of them on the first), in order."""
        ...


class MemoryKeyStore:
    """A :class:`KeyStore` in memory (unit tests, benchmarks).

    >>> store = MemoryKeyStore(); store.put("k", b"x"); store.read_new()
    [('k', b'x')]
    """

    def __init__(self) -> None:
        self.log: list[tuple[str, bytes | None]] = []
        self._read = 0
        self._lock = threading.Lock()

    def put(self, kid: str, record: bytes | None) -> None:
        with self._lock:
            self.log.append((kid, record))

    def read_new(self) -> list[tuple[str, bytes | None]]:
        with self._lock:
            new, self._read = self.log[self._read:], len(self.log)
        return new

    def live(self) -> dict[str, bytes]:
        """What a compacted topic would keep: the last non-tombstone record per ``kid``."""
        out: dict[str, bytes] = {}
        for kid, record in self.log:
            if record is None:
                out.pop(kid, None)
            else:
                out[kid] = record
        return out


def put_all(store: KeyStore, records: list[tuple[str, bytes]]) -> None:
    """Store several key records durably: together when the store can (``put_many``), else one by one."""
    many = getattr(store, "put_many", None)
    if many is not None:
        many(records)
    else:
        for kid, record in records:
            store.put(kid, record)


def new_master_key() -> bytes:
    """A fresh 256-bit master key, base64 text (what the stack's ``secrets/master-key`` file holds)."""
    return base64.b64encode(os.urandom(KEY_BYTES))


def parse_master_key(text: bytes, where: str) -> AESGCM:
    """The master key of a secret file's content (base64 of 32 bytes).

    :param text: the file's content.
    :param where: the file, for the error message.
    :returns: the AES-GCM cipher of the master key.
    :raises ConfigError: not base64 of 32 bytes.

    >>> parse_master_key(base64.b64encode(bytes(32)), "f").__class__.__name__
    'AESGCM'
    """
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != KEY_BYTES:
        raise ConfigError(f"the master key in {where} is not base64 of {KEY_BYTES} bytes "
                          "(check PROVSTREAM_MASTER_KEY_FILE)")
    return AESGCM(raw)


def wrap_key(master: AESGCM, kid: str, scope: Scope, key: bytes) -> bytes:
    """The keys-topic record of data key ``key``: its scope in clear, the key wrapped by the master key.

    :param master: the master key's cipher.
    :param kid: the data key's id (associated data of the wrapping, with the scope).
    :param scope: whose key it is.
    :param key: the 32-byte data key.
    :returns: the record value (JSON bytes).

    >>> m = AESGCM(bytes(32)); rec = wrap_key(m, "s~1", Scope("u", "c", "s"), bytes(32))
    >>> unwrap_key(m, "s~1", rec)[0]
    Scope(user='u', collection='c', session='s')
    """
    nonce = os.urandom(NONCE_BYTES)
    wrapped = nonce + master.encrypt(nonce, key, _wrap_aad(kid, scope))
    return json.dumps({"v": 1, "user": scope.user, "collection": scope.collection, "session": scope.session,
                       "wrapped": base64.b64encode(wrapped).decode()}, sort_keys=True).encode()


def scope_of(record: bytes) -> Scope:
    """The scope a keys-topic record names (no master key needed: erase finds keys by it).

    >>> scope_of(b'{"user": "u", "collection": "c", "session": "s"}')
    Scope(user='u', collection='c', session='s')
    """
    data = json.loads(record)
    return Scope(str(data["user"]), str(data["collection"]), str(data["session"]))


def unwrap_key(master: AESGCM, kid: str, record: bytes) -> tuple[Scope, bytes]:
    """The scope and data key of a keys-topic record.

    :raises ConfigError: the record was wrapped by another master key (or altered).
    """
    scope = scope_of(record)
    wrapped = base64.b64decode(json.loads(record)["wrapped"])
    try:
        return scope, master.decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], _wrap_aad(kid, scope))
    except InvalidTag as exc:
        raise ConfigError(f"data key {kid} was not wrapped by this master key "
                          "(check PROVSTREAM_MASTER_KEY_FILE)") from exc


def _wrap_aad(kid: str, scope: Scope) -> bytes:
    return json.dumps([kid, scope.user, scope.collection, scope.session]).encode()


def seal_text(cipher: AESGCM, kid: str, text: str) -> str:
    """``text`` sealed under data key ``kid``; ``""`` stays ``""`` (an absent field stays absent).

    >>> c = AESGCM(bytes(32)); sealed = seal_text(c, "s~1", "secret")
    >>> sealed.startswith("ps-enc:1:s~1:"), open_text(c, "s~1", sealed)
    (True, 'secret')
    """
    if not text:
        return text
    nonce = os.urandom(NONCE_BYTES)
    body = nonce + cipher.encrypt(nonce, text.encode("utf-8"), kid.encode())
    return f"{SEALED_PREFIX}{kid}:{base64.urlsafe_b64encode(body).decode()}"


def siv_nonce_key(key: bytes) -> bytes:
    """The key :func:`seal_text_siv` derives its nonces with: HMAC-SHA256 of a fixed label under the data key.

    A key of its own (not the data key itself), so the AES-GCM key is used for AES-GCM only.

    :param key: the 32-byte data key.
    :returns: 32 bytes.

    >>> len(siv_nonce_key(bytes(32)))
    32
    """
    return hmac.new(key, b"provstream seal_text_siv nonce v1", hashlib.sha256).digest()


def seal_text_siv(cipher: AESGCM, nonce_key: bytes, kid: str, text: str) -> str:
    """``text`` sealed as :func:`seal_text` does, but deterministically: the same key and text give the same string.

    The nonce is HMAC-SHA256(``nonce_key``, kid | 0 | text) truncated to 12 bytes (a synthetic IV): a nonce
    repeats only with its text, so the one thing this reveals is which sealed texts are equal under one key
    (what the OTLP translation compares). The result has the format of :func:`seal_text` and opens with
    :func:`open_text` / :meth:`KeyRing.open`.

    :param cipher: the data key's cipher.
    :param nonce_key: :func:`siv_nonce_key` of the same data key.
    :param kid: the data key's id (associated data, as in :func:`seal_text`).
    :param text: the plain text; ``""`` stays ``""``.
    :returns: ``ps-enc:1:<kid>:<base64url(nonce | ciphertext | tag)>``.

    >>> key = bytes(32); c, n = AESGCM(key), siv_nonce_key(key)
    >>> seal_text_siv(c, n, "s~1", "secret") == seal_text_siv(c, n, "s~1", "secret")
    True
    >>> open_text(c, "s~1", seal_text_siv(c, n, "s~1", "secret"))
    'secret'
    """
    if not text:
        return text
    data = text.encode("utf-8")
    nonce = hmac.digest(nonce_key, kid.encode() + b"\0" + data, "sha256")[:NONCE_BYTES]
    body = nonce + cipher.encrypt(nonce, data, kid.encode())
    return f"{SEALED_PREFIX}{kid}:{base64.urlsafe_b64encode(body).decode()}"


@dataclass(frozen=True)
class SivSealer:
    """A data key that seals deterministically (:func:`seal_text_siv`); made by :meth:`KeyRing.shared_sealer`.

    >>> s = SivSealer("s~1", AESGCM(bytes(32)), siv_nonce_key(bytes(32)))
    >>> s.seal("x") == s.seal("x"), s.seal("")
    (True, '')
    """

    kid: str
    cipher: AESGCM = field(repr=False)
    nonce_key: bytes = field(repr=False)

    def seal(self, text: str) -> str:
        """``text`` sealed under this key (``""`` stays ``""``)."""
        return seal_text_siv(self.cipher, self.nonce_key, self.kid, text)


def kid_of(sealed: str) -> str | None:
    """The data key id of a sealed field, ``None`` for plain text.

    >>> kid_of("ps-enc:1:s~1:AAAA"), kid_of("plain")
    ('s~1', None)
    """
    if not sealed.startswith(SEALED_PREFIX):
        return None
    kid, sep, _ = sealed[len(SEALED_PREFIX):].partition(":")
    return kid if sep else None


def open_text(cipher: AESGCM, kid: str, sealed: str) -> str:
    """The plain text of a field :func:`seal_text` sealed under ``kid``; :data:`ERASED` if it does not open."""
    try:
        body = base64.urlsafe_b64decode(sealed.rpartition(":")[2])
        return cipher.decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], kid.encode()).decode("utf-8")
    except (InvalidTag, ValueError, binascii.Error):
        return ERASED


def seal_event(event: ev.Event, cipher: AESGCM, kid: str) -> ev.Event:
    """``event`` with its personal text fields sealed (everything else, the structure, unchanged).

    :param event: a validated event.
    :param cipher: the session's data key; ``kid`` its id.
    :returns: the event to put on Kafka.

    >>> from datetime import UTC, datetime
    >>> e = ev.Event("e", "s", ev.Mechanism.AGENT, 1, datetime(2025, 1, 1, tzinfo=UTC),
    ...              ev.AgentIteration(1, thought="t", action="Search", arguments="{}"))
    >>> p = seal_event(e, AESGCM(bytes(32)), "s~1").payload
    >>> p.thought.startswith("ps-enc:1:"), p.action, p.observation
    (True, 'Search', '')
    """
    p = event.payload

    def s(text: str) -> str:
        return seal_text(cipher, kid, text)

    sealed: ev.Payload
    if isinstance(p, (ev.AgentQuestion, ev.GraphRagQuestion, ev.DocRagQuestion)):
        sealed = replace(p, query=s(p.query))
    elif isinstance(p, ev.AgentIteration):
        sealed = replace(p, thought=s(p.thought), arguments=s(p.arguments), observation=s(p.observation))
    elif isinstance(p, ev.AgentConclusion):
        sealed = replace(p, answer=s(p.answer))
    elif isinstance(p, (ev.GraphRagSynthesis, ev.DocRagSynthesis)):
        sealed = replace(p, content=s(p.content))
    elif isinstance(p, ev.GraphRagFocus):
        sealed = replace(p, edges=tuple(replace(e, reasoning=s(e.reasoning)) for e in p.edges))
    else:
        return event
    return replace(event, payload=sealed)


class KeyRing:
    """The data keys a process can still get: it creates (emitter) and opens (readers) sealed fields.

    Reads the key store lazily: a field sealed under a key not seen yet makes
    it read what the store gained since; a key still absent then was erased
    (the emitter stores a session's key durably before its first event).
    Thread-safe.

    :param store: where the wrapped keys live.
    :param master: the master key's cipher.

    >>> ring = KeyRing(MemoryKeyStore(), AESGCM(bytes(32)))
    >>> kid, cipher = ring.key_for("alice", "c", "s1")
    >>> ring.open(seal_text(cipher, kid, "hello"))
    'hello'
    >>> gone = ring.forget("alice"); ring.open(seal_text(cipher, kid, "hello"))
    '[erased]'
    """

    def __init__(self, store: KeyStore, master: AESGCM) -> None:
        self.store, self.master = store, master
        self._keys: dict[str, tuple[Scope, AESGCM]] = {}
        self._erased: set[str] = set()
        self._sessions: OrderedDict[tuple[str, str, str], tuple[str, AESGCM]] = OrderedDict()
        self._by_scope: dict[Scope, dict[str, bytes]] = {}  # the live data keys of each scope (shared_sealer)
        self._sealers: OrderedDict[Scope, SivSealer] = OrderedDict()
        self._lock = threading.Lock()
        self._create = threading.Lock()  # shared_sealer: one lookup-or-create at a time

    # -- the emitter's side ----------------------------------------------------------

    def key_for(self, user: str, collection: str, session: str) -> tuple[str, AESGCM]:
        """The data key (id, cipher) this process seals ``session``'s fields with; made and stored on first use.

        Every process makes its own key for a session it emits (``kid``
        ``<session>~<random>``), so two emitters of one session never race;
        an erase removes them all.
        """
        scope_key = (user, collection, session)
        with self._lock:
            found = self._sessions.get(scope_key)
            if found is not None:
                self._sessions.move_to_end(scope_key)
                return found
        key = AESGCM.generate_key(bit_length=256)
        kid = f"{session}~{os.urandom(8).hex()}"
        self.store.put(kid, wrap_key(self.master, kid, Scope(*scope_key), key))
        cipher = AESGCM(key)
        with self._lock:
            self._sessions[scope_key] = (kid, cipher)
            if len(self._sessions) > _SESSION_CACHE:
                self._sessions.popitem(last=False)
        return kid, cipher

    def seal(self, event: ev.Event) -> ev.Event:
        """``event`` sealed under its session's data key (see :func:`seal_event`)."""
        kid, cipher = self.key_for(event.user, event.collection, event.session_id)
        return seal_event(event, cipher, kid)

    def shared_sealer(self, user: str, collection: str, session: str) -> SivSealer:
        """A deterministic sealer for a scope that several processes (or restarts) seal for: the OTLP receiver's.

        Unlike :meth:`key_for`, it first looks for a live data key of exactly this scope in the key store
        (the one with the smallest id) and uses it, so a span re-sent to another receiver or after a restart
        is sealed to the same bytes; it makes and stores a key only when the scope has none (or it was erased).

        :param user: the scope's user.
        :param collection: the scope's collection.
        :param session: the scope's session (the OTLP receiver: :func:`provstream.codec.otlp.key_scope`).
        :returns: the :class:`SivSealer`.

        >>> store = MemoryKeyStore(); ring = KeyRing(store, AESGCM(bytes(32)))
        >>> a = ring.shared_sealer("u", "c", "otlp-trace-1")
        >>> copy = MemoryKeyStore(); copy.log = list(store.log)  # a second process reading the same topic
        >>> KeyRing(copy, AESGCM(bytes(32))).shared_sealer("u", "c", "otlp-trace-1").seal("x") == a.seal("x")
        True
        >>> ring.open(a.seal("x"))
        'x'
        """
        scope = Scope(user, collection, session)
        return self.shared_sealers([scope])[scope]

    def shared_sealers(self, scopes: Iterable[Scope]) -> dict[Scope, SivSealer]:
        """:meth:`shared_sealer` for several scopes at once: one read of the key store, the new keys stored
        together (one OTLP request's traces).

        :param scopes: the scopes.
        :returns: each scope's :class:`SivSealer`.

        >>> ring = KeyRing(MemoryKeyStore(), AESGCM(bytes(32)))
        >>> sorted(s.session for s in ring.shared_sealers([Scope("u", "c", "t1"), Scope("u", "c", "t2")]))
        ['t1', 't2']
        """
        wanted = set(scopes)
        out: dict[Scope, SivSealer] = {}
        with self._lock:
            for scope in wanted:
                found = self._sealers.get(scope)
                if found is not None:
                    self._sealers.move_to_end(scope)
                    out[scope] = found
        missing = [scope for scope in wanted if scope not in out]
        if not missing:
            return out
        with self._create:
            self.refresh()
            new: list[tuple[str, bytes]] = []
            for scope in missing:
                with self._lock:
                    live = self._by_scope.get(scope)
                    kid = min(live) if live else ""
                    key = live[kid] if live else b""
                if not kid:
                    key = AESGCM.generate_key(bit_length=256)
                    kid = f"{scope.session}~{os.urandom(8).hex()}"
                    new.append((kid, wrap_key(self.master, kid, scope, key)))
                out[scope] = SivSealer(kid, AESGCM(key), siv_nonce_key(key))
            put_all(self.store, new)
            with self._lock:
                for scope in missing:
                    self._sealers[scope] = out[scope]
                while len(self._sealers) > _SESSION_CACHE:
                    self._sealers.popitem(last=False)
        return out

    # -- the readers' side --------------------------------------------------------------

    def refresh(self) -> None:
        """Take in the records stored since the last refresh (tombstones drop their keys)."""
        records = self.store.read_new()
        with self._lock:
            for kid, record in records:
                if record is None:
                    gone = self._keys.pop(kid, None)
                    self._erased.add(kid)
                    if gone is not None:
                        self._by_scope.get(gone[0], {}).pop(kid, None)
                    continue
                try:
                    scope, key = unwrap_key(self.master, kid, record)
                except (ValueError, KeyError) as exc:
                    raise ConfigError(f"unreadable record {kid!r} in the keys topic: {exc}") from exc
                self._keys[kid] = (scope, AESGCM(key))
                self._by_scope.setdefault(scope, {})[kid] = key
                self._erased.discard(kid)

    def cipher(self, kid: str) -> AESGCM | None:
        """The data key ``kid``, or ``None`` once erased."""
        with self._lock:
            found = self._keys.get(kid)
            if found is not None or kid in self._erased:
                return found[1] if found else None
        self.refresh()
        with self._lock:
            found = self._keys.get(kid)
            if found is None:
                self._erased.add(kid)  # not stored before its first field: erased and compacted away
            return found[1] if found else None

    def open(self, text: str) -> str:
        """The plain text of a field: itself when not sealed, :data:`ERASED` when its key is gone."""
        kid = kid_of(text)
        if kid is None:
            return text
        cipher = self.cipher(kid)
        return ERASED if cipher is None else open_text(cipher, kid, text)

    def open_triples(self, msg: StepTriples) -> StepTriples:
        """``msg`` with every sealed literal opened (see :func:`open_triples`)."""
        return open_triples(msg, self.open)

    def forget(self, user: str, collection: str | None = None, session: str | None = None) -> list[str]:
        """Drop the keys of an erased scope from memory (a retraction record's effect); their ids."""
        with self._lock:
            gone = [kid for kid, (scope, _) in self._keys.items() if scope.matches(user, collection, session)]
            for kid in gone:
                del self._keys[kid]
                self._erased.add(kid)
            for key in [k for k in self._sessions if Scope(*k).matches(user, collection, session)]:
                del self._sessions[key]
            for scope in [k for k in self._sealers if k.matches(user, collection, session)]:
                del self._sealers[scope]
            for scope in [k for k in self._by_scope if k.matches(user, collection, session)]:
                del self._by_scope[scope]
        return gone


def open_triples(msg: StepTriples, opener: object) -> StepTriples:
    """``msg`` with each literal sealed by :func:`seal_text` replaced by ``opener(text)``.

    :param msg: a step's triples as the fold made them (sealed fields are literal text).
    :param opener: text -> plain text (:meth:`KeyRing.open`).
    :returns: ``msg`` itself when nothing in it is sealed, else a copy with plain literals.

    >>> from provstream.core.triples import Iri, SessionState, SessionStatus
    >>> t = Triple(Iri("urn:a"), Iri("urn:p"), Literal("ps-enc:1:k:xx"))
    >>> m = StepTriples("e", "s", ev.Mechanism.AGENT, 0, "u", "c", "urn:q", (t,), SessionStatus(SessionState.OPEN, 1))
    >>> open_triples(m, lambda text: "[erased]").triples[0].o.value
    '[erased]'
    """
    assert callable(opener)
    if not any(isinstance(t.o, Literal) and t.o.value.startswith(SEALED_PREFIX) for t in msg.triples):
        return msg
    return replace(msg, triples=tuple(_open_triple(t, opener) for t in msg.triples))


def _open_triple(t: Triple, opener: object) -> Triple:
    if isinstance(t.o, Literal) and t.o.value.startswith(SEALED_PREFIX):
        assert callable(opener)
        return Triple(t.s, t.p, Literal(opener(t.o.value), t.o.datatype, t.o.language))
    return t


def sealed_kids(texts: Iterable[str]) -> set[str]:
    """The data key ids the sealed texts among ``texts`` name.

    >>> sealed_kids(["ps-enc:1:a~1:x", "plain"])
    {'a~1'}
    """
    return {kid for kid in map(kid_of, texts) if kid is not None}
