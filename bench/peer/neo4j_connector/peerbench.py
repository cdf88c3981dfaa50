"""Side by side: the official Neo4j Connector for Kafka (Cypher strategy, Kafka Connect
standalone) against ``provstream sink``, draining the same backlog into an emptied Neo4j.

Run with the project's interpreter (it imports provstream), from the project's
repository root, on a private stack that run.sh started. Steps:

* ``gen``: build N sessions from the bundled ReAct trajectories, fold them offline
  (as bench/bench_sink.py does) and produce the StepTriples messages twice, with the
  same keys (session id) and so the same partitions: Avro (the project's wire format)
  on ``peer.<id>.avro`` for provstream, and JSON on ``peer.<id>.json`` for the
  connector. A JSON message is ``{"rows": write_rows(build_rows([message]))}`` (the
  project's own row builder) rendered as JSON: the connector's Cypher then runs
  exactly the project's write statement (connectors/neo4j/cypher.py WRITE_BATCH)
  with ``UNWIND $batch.rows`` replaced by ``UNWIND event.rows``. Also writes the expected node/relationship counts
  (``build_rows`` over the whole backlog).
* ``bench``: starts a Kafka Connect standalone worker (kept for the whole run so
  its JIT is warm), then runs warm-up A and B (discarded) and ``--pairs`` times A, B
  alternately. Before each run the graph is emptied (schema kept). A run = a fresh
  connector (REST, new consumer group) or a fresh ``provstream sink`` process (new
  group); the clock watches Neo4j (node and relationship counts, polled every
  0.1 s): first write visible -> counts equal to the expected totals. CPU (utime +
  stime from /proc) of the sink process, Neo4j and Kafka is sampled at both ends, and
  apart, that of Neo4j's JIT compiler threads (part of Neo4j's: a JVM still compiling
  the statement's code paths weighs on a short run).
  After each run the graph is digested (counts, per-label and per-type counts,
  SHA-256 over every node's labels + properties and every relationship).
* ``report``: results.jsonl -> Markdown tables of one benchmark; its last line is
  ``peer ratio: R (...); CPU ratio sink+neo4j: C`` (medians over the measured pairs).
* ``cypher``: print the connector's Cypher as generated from the project's statements
  (``connector-cypher.cypher`` is this output; regenerate it, never edit it by hand).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from neo4j import GraphDatabase

from provstream.codec import records as wire
from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.rows import build_rows, write_rows
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core.fold import FoldState, fold
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings
from provstream.testing import load_trajectories, sessions

START = datetime(2025, 3, 1, tzinfo=UTC)
CONNECTOR_CLASS = "org.neo4j.connectors.kafka.sink.Neo4jConnector"
STALL_S = 120
POLL_S = 0.1
# provstream sink's offset lineage (connectors/neo4j/cypher.py WRITE_BATCH, from rows the connector's
# messages do not carry): where each node came from on Kafka. The connector has no such thing, so the graphs
# are compared without these node properties; the digest also hashes everything and counts the nodes that
# carry them.
LINEAGE_PROPS = ("eventPartition", "eventOffset", "triplesPartition", "triplesOffset")
assert all(f"n.{k} = coalesce(n.{k}, l.{k})" in q.WRITE_BATCH for k in LINEAGE_PROPS), "the lineage changed"


# ---------------------------------------------------------------- helpers

def stat_cpu_s(stat: Path) -> float:
    """utime + stime, in seconds, of a ``/proc/<pid>[/task/<tid>]/stat`` file (0 if it is gone)."""
    try:
        f = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int | None) -> float:
    return stat_cpu_s(Path(f"/proc/{pid}/stat")) if pid else 0.0


def jit_cpu_s(pid: int | None) -> float:
    """CPU seconds of a JVM's JIT compiler threads (``C1/C2 CompilerThread*``): part of ``cpu_s(pid)``."""
    if not pid:
        return 0.0
    total = 0.0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            compiler = (task / "comm").read_text().startswith(("C1 Compiler", "C2 Compiler"))
        except OSError:
            continue
        if compiler:
            total += stat_cpu_s(task / "stat")
    return total


def cpu_sample(pids: dict[str, int | None]) -> dict[str, float]:
    """CPU seconds of each process so far, and of Neo4j's JIT compiler threads as ``neo4j_jit``."""
    return {**{k: cpu_s(p) for k, p in pids.items()}, "neo4j_jit": jit_cpu_s(pids.get("neo4j"))}


def pid_file(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def message_json(msg: Any) -> bytes:
    """One StepTriples message as the JSON the connector reads: the project's rows for it (no lineage)."""
    doc = {"rows": write_rows(build_rows([msg]))}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def peer_cypher(write: str = "") -> str:
    """The project's write statement in a CALL subquery, reading one message's rows.

    ``write`` (default: ``$PEER_CONNECTOR_WRITE``, else ``cypher``): ``cypher`` for the
    Cypher statement, ``procedure`` for the ``provstream.writeBatch`` procedure the sink
    calls when the server has it (one call per message).
    """
    write = write or os.environ.get("PEER_CONNECTOR_WRITE", "cypher")
    if write == "procedure":
        return "CALL (event) {\n  CALL provstream.writeBatch(event)\n}"
    if write != "cypher":
        raise SystemExit(f"PEER_CONNECTOR_WRITE must be cypher or procedure, got {write!r}")
    body = q.WRITE_BATCH.strip()
    head = "UNWIND $batch.rows AS row"
    assert body.startswith(head), body[:40]
    return "CALL (event) {\n  UNWIND event.rows AS row\n  " + body[len(head):].strip() + "\n}"


def http(method: str, url: str, body: Any = None, timeout: float = 30) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


# ---------------------------------------------------------------- data

def cmd_gen(args: argparse.Namespace, settings: Settings) -> None:
    prefix = f"peer-{args.run_id}"
    per_session = list(sessions(load_trajectories(Path(args.data)), prefix, START, args.sessions, settings.user,
                                f"peer-{args.run_id}"))
    events = [s[i] for i in range(max(map(len, per_session))) for s in per_session if i < len(s)]
    states: dict[str, FoldState] = {}
    messages = []
    for e in events:
        states[e.session_id], msg = fold(states.get(e.session_id), e)
        messages.append(msg)
    triples = sum(len(m.triples) for m in messages)
    whole = build_rows(messages)
    nodes = len(whole.nodes) + len(whole.objects)
    rels = sum(len(r) for r in whole.relationships.values())
    # cost of what the JSON side gets done for it upstream: build_rows + write_rows per message (CPU s)
    t = time.process_time()
    json_values = [message_json(m) for m in messages]
    json_cpu = time.process_time() - t
    t = time.process_time()
    for m in messages:
        write_rows(build_rows([m]))
    rows_cpu = time.process_time() - t
    avro_values = [wire.encode_triples(m) for m in messages]
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:
        existing = set(admin.list_topics())
        specs = [NewTopic(f"peer.{args.run_id}.{kind}", settings.partitions, 1,
                          topic_configs={"retention.ms": "-1", "max.message.bytes": str(settings.max_message_bytes)})
                 for kind in ("avro", "json")]
        admin.create_topics([s for s in specs if s.name not in existing])
    finally:
        admin.close()
    for kind, values in (("avro", avro_values), ("json", json_values)):
        producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=20,
                                 batch_size=256 * 1024, max_request_size=settings.max_message_bytes + 65536)
        for m, value in zip(messages, values, strict=True):
            producer.send(f"peer.{args.run_id}.{kind}", key=m.session_id.encode(), value=value)
        producer.flush()
        producer.close(timeout=30)
    meta = {"run_id": args.run_id, "sessions": args.sessions, "messages": len(messages), "events": len(events),
            "triples": triples, "nodes": nodes, "relationships": rels,
            "avro_bytes": sum(map(len, avro_values)), "json_bytes": sum(map(len, json_values)),
            "build_rows_cpu_us_per_message": round(rows_cpu / len(messages) * 1e6, 1),
            "json_render_cpu_us_per_message": round(json_cpu / len(messages) * 1e6, 1),
            "avro_topic": f"peer.{args.run_id}.avro", "json_topic": f"peer.{args.run_id}.json",
            "cypher": peer_cypher(), "connector_write": os.environ.get("PEER_CONNECTOR_WRITE", "cypher")}
    Path(args.meta).write_text(json.dumps(meta, indent=1))
    print(f"gen: {args.sessions} sessions, {len(messages)} messages, {triples} triples -> "
          f"{nodes} nodes, {rels} relationships expected; avro {meta['avro_bytes'] / 1e6:.1f} MB, "
          f"json {meta['json_bytes'] / 1e6:.1f} MB; build_rows {meta['build_rows_cpu_us_per_message']} us/message")


# ---------------------------------------------------------------- graph

class Graph:
    def __init__(self, settings: Settings) -> None:
        self.driver = GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth,
                                           notifications_min_severity="OFF")
        self.db = settings.neo4j_database

    def close(self) -> None:
        self.driver.close()

    def counts(self) -> tuple[int, int]:
        rec, _, _ = self.driver.execute_query(
            "CALL () { MATCH (n) RETURN count(n) AS n } CALL () { MATCH ()-[r]->() RETURN count(r) AS r } "
            "RETURN n, r", database_=self.db, routing_="w")
        return int(rec[0]["n"]), int(rec[0]["r"])

    def reset(self) -> None:
        with self.driver.session(database=self.db) as s:
            while True:
                res = s.run("MATCH (n) WITH n LIMIT 20000 DETACH DELETE n RETURN count(*) AS c")
                left = res.single(strict=True)["c"]
                if left == 0:
                    break

    def digest(self) -> dict[str, Any]:
        def canon(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: canon(v[k]) for k in sorted(v)}
            if isinstance(v, list):
                return [canon(x) for x in v]
            if isinstance(v, (str, int, float, bool)) or v is None:
                return v
            return str(v)  # DateTime
        h_ordered, h_sorted, h_full = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
        lineage_nodes = 0
        keys: set[str] = set()
        with self.driver.session(database=self.db) as s:
            full = sorted(
                json.dumps([r["iri"], sorted(r["labels"]), canon(r["props"])], ensure_ascii=False)
                for r in s.run("MATCH (n) RETURN n.iri AS iri, labels(n) AS labels, properties(n) AS props"))
            nodes = []
            for line in full:
                h_full.update(line.encode() + b"\n")
                iri, labels, props = json.loads(line)
                keys.update(props)
                lineage = {k: props.pop(k) for k in LINEAGE_PROPS if k in props}
                lineage_nodes += bool(lineage)
                nodes.append(json.dumps([iri, labels, props], ensure_ascii=False))
            rels = sorted(
                json.dumps([r["s"], r["t"], canon(r["p"]), r["o"]], ensure_ascii=False)
                for r in s.run("MATCH (a)-[r]->(b) RETURN a.iri AS s, type(r) AS t, properties(r) AS p, b.iri AS o"))
            labels = {r["l"]: r["c"] for r in s.run("MATCH (n) UNWIND labels(n) AS l RETURN l, count(*) AS c")}
            types = {r["t"]: r["c"] for r in s.run("MATCH ()-[r]->() RETURN type(r) AS t, count(*) AS c")}
        for line in rels:
            h_full.update(line.encode() + b"\n")
        for line in nodes + rels:
            h_ordered.update(line.encode() + b"\n")
            doc = json.loads(line)
            h_sorted.update(json.dumps(_sort_lists(doc), ensure_ascii=False).encode() + b"\n")
        return {"nodes": len(nodes), "relationships": len(rels), "labels": dict(sorted(labels.items())),
                "types": dict(sorted(types.items())), "sha256": h_ordered.hexdigest()[:16],
                "sha256_lists_sorted": h_sorted.hexdigest()[:16], "sha256_with_lineage": h_full.hexdigest()[:16],
                "lineage_nodes": lineage_nodes, "node_property_keys": sorted(keys)}


def _sort_lists(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _sort_lists(x) for k, x in v.items()}
    if isinstance(v, list):
        return sorted((_sort_lists(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
    return v


# ---------------------------------------------------------------- runs

def watch(graph: Graph, meta: dict[str, Any], pids: dict[str, int | None], alive: Any) -> dict[str, Any]:
    """Poll Neo4j until the expected graph is there; times and CPU at the first write and at the end."""
    want = (meta["nodes"], meta["relationships"])
    first: dict[str, Any] | None = None
    progress = (time.perf_counter(), (0, 0))
    while True:
        now = time.perf_counter()
        got = graph.counts()
        if got[0] > 0 and first is None:
            first = {"t": now, "nodes": got[0], "cpu": cpu_sample(pids)}
        if got == want:
            return {"first": first, "end": {"t": now, "cpu": cpu_sample(pids)}}
        if got[0] > want[0] or got[1] > want[1]:
            raise SystemExit(f"graph larger than expected: {got} > {want}")
        if got != progress[1]:
            progress = (now, got)
        elif now - progress[0] > STALL_S:
            raise SystemExit(f"no progress for {STALL_S} s at {got} of {want}")
        if not alive():
            raise SystemExit("the sink process died")
        time.sleep(POLL_S)


def summarize(kind: str, label: str, t0: float, w: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    first, end = w["first"], w["end"]
    share = 1 - first["nodes"] / meta["nodes"]  # the part of the backlog written after the first write
    window = end["t"] - first["t"]
    triples_in_window = meta["triples"] * share
    cpu = {k: end["cpu"][k] - first["cpu"][k] for k in end["cpu"]}
    if window <= 0 or triples_in_window <= 0:
        raise SystemExit(f"{label}: the whole backlog landed in one transaction; use a larger backlog")
    per_k = {k: v / (triples_in_window / 1000) for k, v in cpu.items()}
    return {"sink": kind, "label": label, "sustained_triples_s": triples_in_window / window,
            "from_start_triples_s": meta["triples"] / (end["t"] - t0), "window_s": window,
            "first_write_after_s": first["t"] - t0, "first_write_share": 1 - share, "total_s": end["t"] - t0,
            "cpu_s": cpu, "cpu_s_per_1k_triples": per_k}


class Connect:
    """A Kafka Connect standalone worker (the official runtime), kept for the whole benchmark."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        self.args, self.settings = args, settings
        self.url = f"http://127.0.0.1:{args.connect_port}"
        work = Path(args.work)
        run = work / "run"
        run.mkdir(parents=True, exist_ok=True)
        props = run / "connect-worker.properties"
        props.write_text("\n".join([
            f"bootstrap.servers={settings.kafka_bootstrap}",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable=false",
            f"offset.storage.file.filename={run / 'connect.offsets'}",
            "offset.flush.interval.ms=1000",
            f"plugin.path={work / 'connect' / 'plugins'}",
            "plugin.discovery=only_scan",
            f"listeners=http://127.0.0.1:{args.connect_port}",
            "rest.advertised.host.name=127.0.0.1",
            "connector.client.config.override.policy=All",
            "",
        ]))
        log4j = run / "connect-log4j2.xml"
        log4j.write_text(f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><File name="f" fileName="{run / 'connect.log'}" append="false">
    <PatternLayout pattern="[%d] %p %m (%c)%n"/></File></Appenders>
  <Loggers>
    <Logger name="org.neo4j.connectors.kafka.sink.Neo4jSinkTask" level="WARN"/>
    <Logger name="org.reflections" level="ERROR"/>
    <Root level="INFO"><AppenderRef ref="f"/></Root>
  </Loggers>
</Configuration>
""")
        java = args.java
        # the JVM flags of Kafka's bin/connect-standalone.sh (kafka-run-class.sh defaults)
        cmd = [java, "-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
               "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
               "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}", "-Dpeerbench.connect=1",
               "-cp", str(work / "connect" / "lib") + "/*", "org.apache.kafka.connect.cli.ConnectStandalone",
               str(props)]
        self.out = (run / "connect.stdout").open("w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 180
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"Kafka Connect exited with {self.proc.returncode} (see {run / 'connect.log'})")
            try:
                plugins = http("GET", f"{self.url}/connector-plugins", timeout=5)
                if any(p["class"] == CONNECTOR_CLASS for p in plugins):
                    self.version = next(p["version"] for p in plugins if p["class"] == CONNECTOR_CLASS)
                    break
                raise SystemExit(f"Kafka Connect is up but has no {CONNECTOR_CLASS}: {plugins}")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit("Kafka Connect did not answer within 180 s")
            time.sleep(1)
        self.worker_version = http("GET", f"{self.url}/")["version"]
        print(f"connect: worker {self.worker_version} pid {self.proc.pid}, {CONNECTOR_CLASS} {self.version}")

    def config(self, topic: str, cypher: str) -> dict[str, str]:
        s, a = self.settings, self.args
        return {
            "connector.class": CONNECTOR_CLASS, "tasks.max": "1", "topics": topic,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "neo4j.uri": s.neo4j_uri, "neo4j.database": s.neo4j_database,
            "neo4j.authentication.type": "BASIC", "neo4j.authentication.basic.username": s.neo4j_user,
            "neo4j.authentication.basic.password": s.neo4j_password,
            f"neo4j.cypher.topic.{topic}": cypher,
            "neo4j.batch-size": str(a.a_batch_size),
            "consumer.override.max.poll.records": str(a.a_poll_records),
            "errors.tolerance": "none",
        }

    def run(self, graph: Graph, meta: dict[str, Any], label: str, pids: dict[str, int | None]) -> dict[str, Any]:
        name = f"neo4j-peer-{label}-{int(time.time())}"
        t0 = time.perf_counter()
        http("POST", f"{self.url}/connectors", {"name": name, "config": self.config(meta["json_topic"],
                                                                                    meta["cypher"])})
        try:
            def alive() -> bool:
                if self.proc.poll() is not None:
                    return False
                st = http("GET", f"{self.url}/connectors/{name}/status")
                failed = [t for t in st.get("tasks", []) if t.get("state") == "FAILED"]
                if failed:
                    print(failed[0].get("trace", "")[:3000], file=sys.stderr)
                    return False
                return True
            w = watch(graph, meta, {**pids, "sink": self.proc.pid}, alive)
        finally:
            http("DELETE", f"{self.url}/connectors/{name}")
        return summarize("A", label, t0, w, meta)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


def run_b(args: argparse.Namespace, settings: Settings, graph: Graph, meta: dict[str, Any], label: str,
          pids: dict[str, int | None]) -> dict[str, Any]:
    s = replace(settings, triples_topic=meta["avro_topic"], events_topic=f"peer.{meta['run_id']}.events",
                events_dlq_topic=f"peer.{meta['run_id']}.events.dlq",
                triples_dlq_topic=f"peer.{meta['run_id']}.triples.dlq",
                sink_group=f"peer-sink-{label}-{int(time.time())}")
    env = dict(os.environ)
    env.update({"PROVSTREAM_" + f.name.upper(): str(getattr(s, f.name)) for f in fields(s)
                if f.name != "llm_api_key"})
    log = Path(args.work) / "run" / f"sink-{label}.log"
    proc = subprocess.Popen([sys.executable, "-m", "provstream", "sink", "-v"], env=env, stdout=subprocess.PIPE,
                            stderr=log.open("w"), text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "provstream sink ready" not in line:
            raise SystemExit(f"sink did not start: {line!r} (see {log})")
        t0 = time.perf_counter()
        w = watch(graph, meta, {**pids, "sink": proc.pid}, lambda: proc.poll() is None)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return summarize("B", label, t0, w, meta)


def cmd_bench(args: argparse.Namespace, settings: Settings) -> None:
    meta = json.loads(Path(args.meta).read_text())
    stack = settings.stack_dir
    pids = {"neo4j": pid_file(stack / "run" / "neo4j.pid"), "kafka": pid_file(stack / "run" / "kafka.pid")}
    out = Path(args.out)
    graph = Graph(settings)
    with Neo4jStore(settings) as store:
        store.setup()  # the project's constraint and indexes: both sinks write against the same schema
    connect = Connect(args, settings)
    env_line = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                "utc": f"{datetime.now(UTC):%Y-%m-%d %H:%M}", "load": os.getloadavg(),
                "connect_worker": connect.worker_version, "connector": connect.version,
                "a_batch_size": args.a_batch_size, "a_poll_records": args.a_poll_records,
                "b_batch": [settings.sink_batch_size, settings.sink_batch_ms]}
    with out.open("a") as f:
        f.write(json.dumps({"env": env_line, "meta": {k: v for k, v in meta.items() if k != "cypher"}}) + "\n")
    print(f"bench: {env_line}")
    order = ["A", "B"] * args.warmup + ["A", "B"] * args.pairs
    digests: dict[str, dict[str, Any]] = {}
    try:
        for i, kind in enumerate(order):
            warm = i < 2 * args.warmup
            label = f"{'w' if warm else 'm'}{i}{kind}"
            graph.reset()
            assert graph.counts() == (0, 0)
            time.sleep(args.settle)
            load_before = os.getloadavg()[0]
            if kind == "A":
                r = connect.run(graph, meta, label, pids)
            else:
                r = run_b(args, settings, graph, meta, label, pids)
            time.sleep(1.5)  # let the last commit settle before reading the graph back
            d = graph.digest()
            r.update({"warmup": warm, "load1_before": load_before, "digest": d})
            digests[label] = d
            with out.open("a") as f:
                f.write(json.dumps(r) + "\n")
            c = r["cpu_s_per_1k_triples"]
            print(f"{label}: {r['sustained_triples_s']:,.0f} triples/s sustained ({r['window_s']:.2f} s window, "
                  f"first write {r['first_write_after_s']:.2f} s after start), {r['from_start_triples_s']:,.0f}/s "
                  f"from start; CPU/1k triples sink {c['sink']:.3f} s, neo4j {c['neo4j']:.3f} s "
                  f"(JIT {c['neo4j_jit']:.3f}), kafka {c['kafka']:.3f} s; "
                  f"graph {d['nodes']} nodes {d['relationships']} rels {d['sha256']}/{d['sha256_lists_sorted']}",
                  flush=True)
    finally:
        connect.stop()
        graph.close()


def cmd_report(args: argparse.Namespace) -> int:
    """results.jsonl -> a Markdown table of every run and the medians (measured runs only)."""
    env, meta = None, None
    runs: list[Any] = []
    benches: dict[str, tuple[Any, Any, list[Any]]] = {}
    for line in Path(args.out).read_text().splitlines():
        doc = json.loads(line)
        if "env" in doc:
            env, meta, runs = doc["env"], doc["meta"], []
            benches[meta["run_id"]] = (env, meta, runs)
        else:
            runs.append(doc)
    if args.run_id:  # else the last benchmark in the file
        env, meta, runs = benches[args.run_id]
    assert env and meta, "no benchmark in " + args.out
    lines = [f"Backlog: {meta['sessions']} sessions, {meta['messages']:,} messages, **{meta['triples']:,} triples** "
             f"-> {meta['nodes']:,} nodes, {meta['relationships']:,} relationships expected; Avro "
             f"{meta['avro_bytes'] / 1e6:.1f} MB, JSON {meta['json_bytes'] / 1e6:.1f} MB.",
             f"Machine: {env['host']}, {env['cpus']} CPUs, {env['utc']} UTC, load before {env['load'][0]:.2f}; "
             f"Kafka Connect {env['connect_worker']}, connector {env['connector']} (batch-size {env['a_batch_size']}, "
             f"max.poll.records {env['a_poll_records']}); provstream sink batch {env['b_batch'][0]} messages / "
             f"{env['b_batch'][1]} ms; the connector writes with {meta.get('connector_write', 'cypher')}, "
             "provstream sink with the procedure if the server has it.", "",
             "| run | sink | sustained triples/s | from start triples/s | window s | first write after s | "
             "CPU s/1k triples: sink | Neo4j | Kafka | sink+Neo4j | nodes | rels | "
             "graph sha256 (ordered / lists sorted) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        c = r["cpu_s_per_1k_triples"]
        d = r["digest"]
        lines.append(f"| {r['label']}{' (warm-up)' if r['warmup'] else ''} | {r['sink']} | "
                     f"{r['sustained_triples_s']:,.0f} | {r['from_start_triples_s']:,.0f} | {r['window_s']:.2f} | "
                     f"{r['first_write_after_s']:.2f} | {c['sink']:.3f} | {c['neo4j']:.3f} | {c['kafka']:.3f} | "
                     f"{c['sink'] + c['neo4j']:.3f} | {d['nodes']:,} | {d['relationships']:,} | "
                     f"{d['sha256']} / {d['sha256_lists_sorted']} |")
    measured = [r for r in runs if not r["warmup"]]
    med: dict[str, dict[str, float]] = {}
    for kind in ("A", "B"):
        rs = [r for r in measured if r["sink"] == kind]
        if not rs:
            continue
        med[kind] = {
            "sustained": statistics.median(r["sustained_triples_s"] for r in rs),
            "start": statistics.median(r["from_start_triples_s"] for r in rs),
            "sink_cpu": statistics.median(r["cpu_s_per_1k_triples"]["sink"] for r in rs),
            "neo4j_cpu": statistics.median(r["cpu_s_per_1k_triples"]["neo4j"] for r in rs),
            "neo4j_jit_cpu": statistics.median(r["cpu_s_per_1k_triples"].get("neo4j_jit", 0.0) for r in rs),
            "total_cpu": statistics.median(r["cpu_s_per_1k_triples"]["sink"] + r["cpu_s_per_1k_triples"]["neo4j"]
                                           for r in rs),
            "n": len(rs)}
    lines += ["", "| median of measured runs | A: Neo4j connector | B: provstream sink | B/A |", "|---|---|---|---|"]
    pairs: list[tuple[Any, Any]] = []
    if "A" in med and "B" in med:
        a, b = med["A"], med["B"]
        for key, name in (("sustained", "sustained triples/s"), ("start", "triples/s from start"),
                          ("sink_cpu", "sink process CPU s / 1k triples"), ("neo4j_cpu", "Neo4j CPU s / 1k triples"),
                          ("neo4j_jit_cpu", "of which Neo4j's JIT compiler threads"),
                          ("total_cpu", "sink + Neo4j CPU s / 1k triples")):
            fmt = "{:,.0f}" if "cpu" not in key else "{:.3f}"
            ratio_cell = f"{b[key] / a[key]:.2f}" if a[key] else ""
            lines.append(f"| {name} | {fmt.format(a[key])} | {fmt.format(b[key])} | {ratio_cell} |")
        lines.append(f"| runs | {a['n']} | {b['n']} | |")
        pairs = [(measured[i], measured[i + 1]) for i in range(0, len(measured) - 1, 2)
                 if measured[i]["sink"] == "A" and measured[i + 1]["sink"] == "B"]
        lines += ["", "Per measured pair (A then B), B/A sustained: " + ", ".join(
            f"{y['sustained_triples_s'] / x['sustained_triples_s']:.2f}" for x, y in pairs) + "; B/A sink+Neo4j CPU: "
            + ", ".join(f"{(y['cpu_s_per_1k_triples']['sink'] + y['cpu_s_per_1k_triples']['neo4j']) / (x['cpu_s_per_1k_triples']['sink'] + x['cpu_s_per_1k_triples']['neo4j']):.2f}"  # noqa: E501
                        for x, y in pairs) + "."]
    digests = {(r["digest"]["nodes"], r["digest"]["relationships"], r["digest"]["sha256"],
                r["digest"]["sha256_lists_sorted"]) for r in runs}
    lines += ["", f"Graphs: {len(digests)} distinct digest(s) over {len(runs)} runs; expected "
              f"{meta['nodes']:,} nodes / {meta['relationships']:,} relationships. Per-label counts of the last run: "
              f"{runs[-1]['digest']['labels']}; per-type: {runs[-1]['digest']['types']}."]
    if any("lineage_nodes" in r["digest"] for r in runs):
        lines += ["", "The digests leave out provstream sink's offset lineage (node properties "
                  f"{', '.join(LINEAGE_PROPS)}), which the connector does not write. Nodes carrying it, per run: "
                  + ", ".join(f"{r['label']} {r['digest'].get('lineage_nodes')}" for r in runs)
                  + "; digests with it: " + ", ".join(f"{r['label']} {r['digest'].get('sha256_with_lineage', '?')}"
                                                      for r in runs) + "."]
    text = "\n".join(lines) + "\n"
    if args.md:
        Path(args.md).write_text(text)
    print(text)
    if not pairs:
        raise SystemExit("report: no measured A,B pair in this benchmark")
    wrong = [r["label"] for r in runs if (r["digest"]["nodes"], r["digest"]["relationships"])
             != (meta["nodes"], meta["relationships"])]
    if len(digests) != 1 or wrong:
        print(f"report: GRAPHS DIFFER: {len(digests)} distinct digests; runs with unexpected counts: {wrong}",
              file=sys.stderr, flush=True)
    ratio = statistics.median(y["sustained_triples_s"] / x["sustained_triples_s"] for x, y in pairs)
    cpu = statistics.median((y["cpu_s_per_1k_triples"]["sink"] + y["cpu_s_per_1k_triples"]["neo4j"])
                            / (x["cpu_s_per_1k_triples"]["sink"] + x["cpu_s_per_1k_triples"]["neo4j"])
                            for x, y in pairs)
    print(f"peer ratio: {ratio:.2f} (provstream/connector sustained triples/s, median of {len(pairs)} pairs); "
          f"CPU ratio sink+neo4j: {cpu:.2f}", flush=True)
    return 0 if len(digests) == 1 and not wrong else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--sessions", type=int, default=7100)
    g.add_argument("--data", default=str(REACT_TRAJECTORIES),
                   help="ReAct trajectories (default: the bundled provstream/data/react/hotpot_fever.jsonl)")
    g.add_argument("--run-id", required=True)
    g.add_argument("--meta", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--meta", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--work", required=True)
    b.add_argument("--connect-port", type=int, default=18083)
    b.add_argument("--java", default="java", help="the java binary for the Kafka Connect worker (Java 17+)")
    b.add_argument("--pairs", type=int, default=3)
    b.add_argument("--warmup", type=int, default=1, help="A,B pairs run first and discarded")
    b.add_argument("--settle", type=float, default=3.0, help="seconds idle after emptying the graph")
    b.add_argument("--a-batch-size", type=int, default=2000, help="connector neo4j.batch-size")
    b.add_argument("--a-poll-records", type=int, default=2000, help="connector consumer max.poll.records")
    r = sub.add_parser("report")
    r.add_argument("--out", required=True)
    r.add_argument("--md", default="", help="also write the tables to this file")
    r.add_argument("--run-id", default="", help="the benchmark to report (default: the last in --out)")
    sub.add_parser("cypher", help="print the connector's Cypher, generated from the project's statements")
    args = p.parse_args()
    if args.cmd == "report":
        return cmd_report(args)
    if args.cmd == "cypher":
        print(peer_cypher())
        return 0
    settings = Settings.from_env()
    if args.cmd == "gen":
        cmd_gen(args, settings)
    else:
        cmd_bench(args, settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
