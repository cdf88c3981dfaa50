"""Bad input on the events topic: every record ends dead-lettered or as inert data, and the pipeline keeps going.

Each case runs good sessions, the bad input, then good sessions again
(:func:`run_bad_input`): the good sessions must all arrive exactly once, the
worker and the sink must not exit, and every bad record must come out of the
worker as a dead letter or as a triples message.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from e2e_graph import Cypher, check, log_triples, same_graph, stored_triples
from e2e_workload import Planned, emit_steps, plan
from fastavro import schemaless_writer
from fastavro.schema import load_schema
from faults_support import emit_sessions, run_bad_input
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer
from kafka.errors import MessageSizeTooLargeError

from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.trajectories import AgentTrajectory, DocRagRun, GraphRagRun, Step
from provstream.core.triples import Literal
from provstream.core.vocab import SESSION_ID_PATTERN, Mechanism
from provstream.errors import EncodeError, InvalidStep
from provstream.settings import Settings
from provstream.testing import trajectory_events

pytestmark = pytest.mark.faults
FUZZ_USER = "fuzz"
EXAMPLES = 300
LONG = st.integers(-(2**63), 2**63 - 1)


def producer(s: Settings, **config: object) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=s.kafka_bootstrap, acks="all", linger_ms=5, **config)


def _fuzz() -> Callable[[Any], Any]:
    return settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _emitted(s: Settings, sessions: list[Planned], user: str) -> list[tuple[bytes, bytes]]:
    """The encoded events of ``sessions`` (through the emitter, into memory)."""
    memory = MemoryTransport()
    with Emitter(s, transport=memory) as emitter:
        for p in sessions:
            list(emit_steps(emitter, p, user, s.collection))
    return memory.sent


# -- fuzzed bytes -------------------------------------------------------------------

def _mutate(value: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    data = bytearray(value)
    for position, byte in edits:
        data[position % len(data)] = byte
    return bytes(data[:cut] if cut is not None else data)


def test_fuzzed_bytes(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    """Random bytes, and real events with bytes overwritten or cut short (hypothesis)."""
    valid = _emitted(isolated, plan(f"fz{unique}", 10), FUZZ_USER)
    records = st.one_of(
        st.tuples(st.one_of(st.none(), st.binary(max_size=40)), st.binary(max_size=3000)),
        st.tuples(st.sampled_from(valid), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                                   min_size=1, max_size=8), st.none() | st.integers(0, 2000))
        .map(lambda t: (t[0][0], _mutate(t[0][1], t[1], t[2]))),
    )

    def send_bad() -> int:
        sent: list[int] = []
        p = producer(isolated)

        @_fuzz()
        @given(records)
        def send(record: tuple[bytes | None, bytes]) -> None:
            p.send(isolated.events_topic, key=record[0], value=record[1])
            sent.append(1)

        try:
            send()
            p.flush()
        finally:
            p.close()
        return len(sent)

    outcome = run_bad_input("fuzzed bytes (hypothesis)", isolated, logs, f"gb{unique}", send_bad, results_file)
    assert outcome.report.ok, outcome.report.summary()
    assert outcome.restarts == ()
    assert outcome.dead_lettered > 0


# -- schema-valid nonsense ------------------------------------------------------------

TEXT = st.text(max_size=120)
SESSIONS = st.one_of(st.sampled_from([f"fz-{i}" for i in range(8)]), st.from_regex(SESSION_ID_PATTERN,
                                                                                    fullmatch=True))
MECHANISMS = st.sampled_from(list(Mechanism))
JSONISH = st.one_of(TEXT, st.dictionaries(TEXT, st.one_of(TEXT, st.integers(), st.none()), max_size=3).map(json.dumps))
EDGES = st.builds(ev.SelectedEdge, TEXT | st.just("urn:x:s"), TEXT | st.just("urn:x:p"), TEXT, TEXT)
PAYLOADS = st.one_of(
    st.builds(ev.AgentQuestion, TEXT), st.builds(ev.GraphRagQuestion, TEXT), st.builds(ev.DocRagQuestion, TEXT),
    st.builds(ev.AgentIteration, LONG | st.integers(0, 6), TEXT, TEXT, JSONISH, TEXT,
              st.lists(LONG | st.integers(0, 6), max_size=3).map(tuple),
              st.none() | st.builds(ev.SubTrace, MECHANISMS, SESSIONS)),
    st.builds(ev.AgentConclusion, TEXT, LONG | st.integers(0, 6)),
    st.builds(ev.GraphRagExploration, LONG), st.builds(ev.GraphRagFocus, st.lists(EDGES, max_size=3).map(tuple)),
    st.builds(ev.GraphRagSynthesis, TEXT), st.builds(ev.DocRagSynthesis, TEXT),
    st.builds(ev.DocRagExploration, LONG, st.lists(TEXT, max_size=4).map(tuple)),
)


@st.composite
def nonsense(draw: st.DrawFn) -> ev.Event:
    """Mostly events that pass the fold's checks (so their nonsense reaches Neo4j), some that do not."""
    payload = draw(PAYLOADS)
    mechanism = draw(st.just(ev.MECHANISM_OF[type(payload)]) | MECHANISMS)
    user = draw(st.just(FUZZ_USER) | TEXT.filter(lambda u: u != "trustgraph"))
    return ev.Event(draw(TEXT), draw(SESSIONS), mechanism, draw(LONG), draw(st.datetimes(timezones=st.just(UTC))),
                    payload, user, draw(st.just("fuzz") | TEXT))


EVENTS = nonsense()


EXTREMES = (  # each alone once stopped the worker, or might: sent before the generated ones
    ev.AgentConclusion("claims the largest count the schema allows", 2**63 - 1),
    ev.AgentIteration(2**63 - 1, "the largest iteration number"),
    ev.AgentIteration(3, used=(1, 2, 2**63 - 1)),
    ev.DocRagExploration(2**63 - 1, ("",) * 1000),
    ev.GraphRagExploration(-(2**63)),
)


def _extremes(unique: str) -> list[tuple[bytes, bytes]]:
    t = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    events = [ev.Event(f"x{i}", f"fz-x{i}-{unique}", ev.MECHANISM_OF[type(p)], 2**63 - 1, t, p, FUZZ_USER)
              for i, p in enumerate(EXTREMES)]
    return [(e.session_id.encode(), wire.encode_event(e)) for e in events]


def test_schema_valid_nonsense(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    """Events that decode (hypothesis-built) but say anything at all: invalid ones are dead-lettered,
    valid-looking ones become data in their own scope; the good sessions are untouched."""

    def send_bad() -> int:
        sent: list[int] = []
        p = producer(isolated)

        @_fuzz()
        @given(EVENTS, st.booleans())
        def send(event: ev.Event, own_key: bool) -> None:
            try:
                value = wire.encode_event(event)
            except EncodeError:
                assume(False)  # not schema-valid (e.g. a lone surrogate in a string): not this case
                return
            key = event.session_id.encode("utf-8", "replace") if own_key else b"someone-else"
            p.send(isolated.events_topic, key=key, value=value)
            sent.append(1)

        try:
            for key, value in _extremes(unique):
                p.send(isolated.events_topic, key=key, value=value)
                sent.append(1)
            send()
            p.flush()
        finally:
            p.close()
        return len(sent)

    outcome = run_bad_input("schema-valid nonsense (hypothesis) and extreme values", isolated, logs,
                            f"gn{unique}", send_bad, results_file)
    assert outcome.report.ok, outcome.report.summary()
    assert outcome.restarts == ()
    assert outcome.dead_lettered > 0 and outcome.folded > 0


# -- oversized steps ------------------------------------------------------------------

def test_oversized_steps(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    """Over the limit: the emitter records a too-large marker instead, the broker refuses a raw record. Just under it:
    the step goes through (or is dead-lettered if its triples outgrow the limit)."""
    limit = isolated.max_message_bytes

    def send_bad() -> int:
        with Emitter(isolated) as emitter:
            agent = emitter.agent("How big can one step be?", session_id=f"big-{unique}", user=FUZZ_USER)
            agent.iteration(thought="too big", action="Search", observation="x" * limit)  # recorded as a marker
            assert emitter.too_large == 1
            agent.iteration(thought="just under", action="Search", observation="y" * (limit - 2_000))
            agent.conclude("a step may take almost the whole message limit")
        raw = producer(isolated, max_request_size=4 * limit)
        try:
            record = {"question": "raw", "answer": "raw", "steps": [{"observation": "z" * (2 * limit)}]}
            [_q, step, _c] = trajectory_events(record, f"raw-{unique}", datetime(2025, 1, 1, tzinfo=UTC), FUZZ_USER,
                                               isolated.collection)
            with pytest.raises(MessageSizeTooLargeError):
                raw.send(isolated.events_topic, key=step.session_id.encode(), value=wire.encode_event(step)).get(30)
        finally:
            raw.close()
        return 4  # the question, the too-large marker, the step just under the limit, the conclusion

    outcome = run_bad_input("oversized steps", isolated, logs, f"go{unique}", send_bad, results_file)
    assert outcome.report.ok, outcome.report.summary()
    assert outcome.restarts == ()


# -- unknown mechanisms -------------------------------------------------------------------

def _with_unknown_mechanism(event: ev.Event, symbol: str) -> bytes:
    """``event`` written with a Mechanism enum that has one more symbol, under the current fingerprint."""
    schema: Any = copy.deepcopy(load_schema(str(codec.schema_dir() / f"{codec.EVENT}.avsc")))
    [mechanism] = [f["type"] for f in schema["fields"] if f["name"] == "mechanism"]
    mechanism["symbols"] = [*mechanism["symbols"], symbol]
    record = wire.event_to_avro(event)
    record["mechanism"] = symbol
    body = io.BytesIO()
    schemaless_writer(body, schema, record)
    return codec.MAGIC + codec.current_fingerprint(codec.EVENT) + body.getvalue()


def test_unknown_mechanisms(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    """A mechanism the schema does not know, a payload of another mechanism, an agent as a sub-trace,
    and a message from an unknown schema version: all dead-lettered."""
    t = datetime(2025, 1, 1, tzinfo=UTC)
    q = ev.Event(f"u1-{unique}", f"um-{unique}", Mechanism.AGENT, 0, t, ev.AgentQuestion("?"), FUZZ_USER)
    records = [
        (q.session_id, _with_unknown_mechanism(q, "SQLRAG")),
        (q.session_id, wire.encode_event(ev.Event(f"u2-{unique}", q.session_id, Mechanism.GRAPHRAG, 1, t,
                                                  ev.AgentIteration(1, "t"), FUZZ_USER))),
        (q.session_id, wire.encode_event(ev.Event(f"u3-{unique}", q.session_id, Mechanism.DOCRAG, 0, t,
                                                  ev.AgentConclusion("a", 0), FUZZ_USER))),
        (q.session_id, wire.encode_event(ev.Event(
            f"u4-{unique}", f"um2-{unique}", Mechanism.AGENT, 1, t,
            ev.AgentIteration(1, "t", subtrace=ev.SubTrace(Mechanism.AGENT, "x")), FUZZ_USER))),
        (q.session_id, codec.MAGIC + bytes(8) + wire.encode_event(q)[codec.HEADER_LEN:]),
    ]

    def send_bad() -> int:
        p = producer(isolated)
        try:
            for key, value in records:
                p.send(isolated.events_topic, key=key.encode(), value=value).get(timeout=30)
        finally:
            p.close()
        return len(records)

    outcome = run_bad_input("unknown mechanisms, foreign payloads, unknown schema", isolated, logs, f"gu{unique}",
                            send_bad, results_file)
    assert outcome.report.ok, outcome.report.summary()
    assert (outcome.dead_lettered, outcome.folded, outcome.restarts) == (len(records), 0, ())


# -- Cypher injection ---------------------------------------------------------------------

INJECTIONS = (
    '"}) MATCH (n) DETACH DELETE n //',
    "'}) MATCH (n) DETACH DELETE n //",
    "`}) MATCH (n) DETACH DELETE n //",
    "n`:Pwned {pwned: true}) //",
    "$param",
    "$rows",
    "{iri: $iri}",
    "x' OR 1=1 WITH 1 AS x MATCH (n) SET n.pwned = true //",
    "CALL dbms.security.createUser('pwned', 'pwned', false)",
    "\\u0027}) DETACH DELETE n //",
)
ALLOWED_LABELS = {"Resource", "Activity", "Entity", "Question", "AgentQuestion", "GraphRagQuestion",
                  "DocRagQuestion", "Analysis", "Conclusion", "Exploration", "Focus", "Synthesis"}
ALLOWED_TYPES = {"wasDerivedFrom", "wasGeneratedBy", "selectedEdge", "LINK"}


def _injected(prefix: str) -> list[Planned]:
    """Sessions of every mechanism with an injection attempt in every text field."""
    out = []
    for i, text in enumerate(INJECTIONS):
        steps = (Step(thought=text, action=text, arguments={text: text, "input": [text]}, observation=text),
                 Step(thought=f"{text} (2)", action="Search", arguments={"input": text}, observation=text))
        edges = (ev.SelectedEdge("urn:inj:')MATCH(n)DETACH(n)//$param", "urn:inj:')SET(n.pwned)//", text, text),)
        out += [Planned(f"{prefix}-a{i}", AgentTrajectory(text, text, steps)),
                Planned(f"{prefix}-d{i}", DocRagRun(text, text, (text, f"{text} 2"), 2)),
                Planned(f"{prefix}-g{i}", GraphRagRun(text, text, 1, edges))]
    return out


def test_cypher_injection_in_every_text_field(isolated: Settings, unique: str, logs: Path,
                                               results_file: Path) -> None:
    """Injection attempts in every text field and in the scope itself are stored verbatim as values."""
    injected = _injected(f"ci{unique}")
    collection = f"{isolated.collection} {INJECTIONS[1]}"

    def send_bad() -> int:
        with Emitter(isolated) as emitter:
            with pytest.raises(InvalidStep):
                emitter.agent("?", session_id=INJECTIONS[0])
        return emit_sessions(isolated, injected, collection=collection)

    outcome = run_bad_input("Cypher injection in every text field", isolated, logs, f"gc{unique}", send_bad,
                            results_file)
    assert outcome.report.ok, outcome.report.summary()
    assert outcome.restarts == () and outcome.dead_lettered == 0
    with Cypher(isolated) as db:
        report = check(db, injected, isolated.user, collection)
        assert report.ok, report.summary()
        labels = {r["label"] for r in db.rows("CALL db.labels() YIELD label RETURN label")}
        types = {r["t"] for r in db.rows("CALL db.relationshipTypes() YIELD relationshipType AS t RETURN t")}
        keys = {r["k"] for r in db.rows("CALL db.propertyKeys() YIELD propertyKey AS k RETURN k")}
    assert labels <= ALLOWED_LABELS, labels - ALLOWED_LABELS
    assert types <= ALLOWED_TYPES, types - ALLOWED_TYPES
    assert "pwned" not in keys
    expected, _ = log_triples(isolated, isolated.user, collection)
    stored = stored_triples(isolated, isolated.user, collection)
    cmp = same_graph(stored, expected)
    assert cmp.isomorphic, (cmp.missing, cmp.extra)
    texts = {t.o.value for t in stored if isinstance(t.o, Literal)}
    assert set(INJECTIONS) <= texts, set(INJECTIONS) - texts
