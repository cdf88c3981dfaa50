"""A private Kafka + Neo4j stack and the pipeline's processes, for bench_e2e.py and tests/faults.

The shared servers on the default ports are never touched: a
:class:`PrivateStack` runs ``deploy/kafka.sh`` and ``deploy/neo4j.sh`` with
its own stack directory (``<repo>/.stack/private-<name>``, git-ignored) and
ports. Its first start reuses the jars of the main stack (``.stack/lib``,
hard-linked, class-data-sharing archives left out) instead of resolving them
again.

:class:`Child` is one ``provstream worker`` / ``provstream sink`` (or any
command) as a child process: readiness line on stdout, stderr in a log file,
SIGKILL / SIGTERM, and its CPU seconds and peak RSS read from ``/proc``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from provstream.settings import Settings, cluster_bootstrap
from provstream.streams.runner import READY as WORKER_READY

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
MAIN_LIB = REPO / ".stack" / "lib"
SINK_READY = "provstream sink ready"
SERVERS = ("kafka", "neo4j")
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Ports:
    kafka: int
    controller: int
    bolt: int
    http: int


_OFF = int(os.environ.get("PROVSTREAM_PRIVATE_PORT_OFFSET", "0"))  # scripts/bench, scripts/faults: the same
FAULT_PORTS = Ports(19092 + _OFF, 19093 + _OFF, 17687 + _OFF, 17474 + _OFF)
BENCH_PORTS = Ports(19192 + _OFF, 19193 + _OFF, 17787 + _OFF, 17574 + _OFF)
# a 3-broker cluster (brokers on kafka, kafka+2, kafka+4; controllers likewise); PROVSTREAM_CLUSTER_PORT_BASE moves it
def cluster_ports(offset: int = 0) -> Ports:
    base = int(os.environ.get("PROVSTREAM_CLUSTER_PORT_BASE", "22000")) + offset
    return Ports(base + 92, base + 93, base + 687, base + 474)


CLUSTER_PORTS = cluster_ports()  # tests/faults_cluster; the cluster benchmark uses cluster_ports(100)


class StackFailed(RuntimeError):
    """A deploy script failed (its last stderr line)."""


@dataclass(frozen=True)
class PrivateStack:
    name: str
    ports: Ports
    brokers: int = 1
    pagecache: str = ""  # PROVSTREAM_NEO4J_PAGECACHE for this stack ("": deploy/neo4j.sh's default or the caller's)
    heap: str = ""  # PROVSTREAM_NEO4J_HEAP for this stack (likewise)

    @property
    def dir(self) -> Path:
        return REPO / ".stack" / f"private-{self.name}"

    def env(self) -> dict[str, str]:
        p = self.ports
        return {**os.environ, "PROVSTREAM_STACK_DIR": str(self.dir),
                "PROVSTREAM_KAFKA_PORT": str(p.kafka), "PROVSTREAM_KAFKA_CONTROLLER_PORT": str(p.controller),
                "PROVSTREAM_NEO4J_BOLT_PORT": str(p.bolt), "PROVSTREAM_NEO4J_HTTP_PORT": str(p.http),
                "PROVSTREAM_KAFKA_BROKERS": str(self.brokers),
                **({"PROVSTREAM_NEO4J_PAGECACHE": self.pagecache} if self.pagecache else {}),
                **({"PROVSTREAM_NEO4J_HEAP": self.heap} if self.heap else {})}

    def script(self, server: str, verb: str, *args: str) -> str:
        """``deploy/<server>.sh <verb> [args]`` on this stack; its stdout, or :class:`StackFailed`."""
        done = subprocess.run(["bash", str(DEPLOY / f"{server}.sh"), verb, *args], env=self.env(),
                              capture_output=True, text=True, check=False)
        if done.returncode != 0 and not (verb == "status" and done.returncode == 3):
            last = (done.stderr.strip().splitlines() or [f"{server} {verb} failed"])[-1]
            raise StackFailed(last)
        return done.stdout.strip()

    def up(self, fresh: bool = False) -> None:
        """Start Kafka and Neo4j; ``fresh``: first delete what earlier runs stored (topics, graph, Faust state)."""
        if fresh:
            for folder in (self.dir / "data", self.dir / "neo4j" / "data", self.dir / "faust"):
                shutil.rmtree(folder, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        seed_libs(self.dir / "lib")
        for server in SERVERS:
            self.script(server, "up")

    def down(self) -> list[str]:
        """Stop both servers (each attempted even if the other fails); the errors."""
        errors = []
        for server in reversed(SERVERS):
            try:
                self.script(server, "down")
            except StackFailed as exc:
                errors.append(str(exc))
        return errors

    def settings(self) -> Settings:
        """Settings pointing at this stack (password from its secret file unless set in the environment)."""
        p = self.ports
        return replace(
            Settings.from_env(), kafka_bootstrap=cluster_bootstrap(p.kafka, self.brokers), kafka_brokers=self.brokers,
            neo4j_uri=f"bolt://127.0.0.1:{p.bolt}",
            neo4j_http=f"http://127.0.0.1:{p.http}", stack_dir=self.dir,
            neo4j_password=os.environ.get("PROVSTREAM_NEO4J_PASSWORD", ""),
        ).with_stack_secret()

    def server_pid(self, server: str) -> int | None:
        """The pid of ``kafka`` / ``neo4j``, or of one broker of a cluster (``kafka-2``)."""
        try:
            return int((self.dir / "run" / f"{server}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def kill_broker(self, broker: int) -> None:
        """SIGKILL broker ``broker`` (1..brokers) of this cluster; waits until it is gone."""
        pid = self.server_pid(f"kafka-{broker}" if self.brokers > 1 else "kafka")
        assert pid is not None, f"no pid file for broker {broker}"
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while proc_usage(pid) is not None and time.monotonic() < deadline:  # gone (or a zombie)
            time.sleep(0.1)


def leaders(settings: Settings, topic: str) -> dict[int, int]:
    """partition -> the broker id leading it (-1: none) of ``topic`` now."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-e2e-probe")
    try:
        [desc] = admin.describe_topics([topic])
        return {p["partition_index"]: p["leader_id"] for p in desc["partitions"]}
    finally:
        admin.close()


def in_sync(settings: Settings, topic: str) -> dict[int, list[int]]:
    """partition -> the in-sync replicas of ``topic`` now."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-e2e-probe")
    try:
        [desc] = admin.describe_topics([topic])
        return {p["partition_index"]: sorted(p["isr_nodes"]) for p in desc["partitions"]}
    finally:
        admin.close()


def seed_libs(lib: Path) -> None:
    """Hard-link the main stack's resolved jars into ``lib`` (no download; CDS archives are per class path)."""
    for server in SERVERS:
        mine, main = lib / server, MAIN_LIB / server
        if (mine / ".resolved").exists() or not (main / ".resolved").exists():
            continue
        tmp = lib / f".{server}.seed"
        shutil.rmtree(tmp, ignore_errors=True)
        lib.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["cp", "-al", str(main), str(tmp)], capture_output=True).returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(main, tmp)
        shutil.rmtree(tmp / "cds", ignore_errors=True)
        for archive in tmp.glob("cds-*"):
            archive.unlink()
        shutil.rmtree(mine, ignore_errors=True)
        tmp.rename(mine)


# -- child processes ----------------------------------------------------------------

def child_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment that makes a ``provstream`` child read exactly these settings."""
    env = dict(os.environ)
    for f in fields(settings):
        if f.repr:  # the password (repr=False) is read by the child from the stack's secret file
            env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    env.update(extra)
    return env


@dataclass(frozen=True)
class Usage:
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0


def proc_usage(pid: int) -> Usage | None:
    """CPU seconds and peak RSS of a live process with its descendants; ``None`` if it is gone.

    CPU: utime + stime of the process and of every live descendant (the
    worker's fold helper process, the JVM's children), plus what their exited
    children used (cutime + cstime). Peak RSS: the sum of their VmHWM (an
    upper bound of the tree's peak).
    """
    tree = [pid, *_descendants(pid)]
    cpu, rss, seen = 0.0, 0.0, False
    for member in tree:
        try:
            stat = Path(f"/proc/{member}/stat").read_text()
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        ticks = stat.rsplit(")", 1)[1].split()
        hwm = next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")), None)
        if hwm is None:  # a zombie has no memory left to report
            continue
        seen = seen or member == pid
        cpu += sum(int(ticks[i]) for i in (11, 12, 13, 14)) / _TICKS
        rss += int(hwm) / 1024
    return Usage(cpu, rss) if seen else None


def _descendants(pid: int) -> list[int]:
    """The pids of every live descendant of ``pid`` (from /proc/*/stat's parent field)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@dataclass
class Child:
    """A child process whose stdout lines are collected; ready once a line starts with ``ready_text``."""

    name: str
    proc: subprocess.Popen[str]
    ready_text: str
    log: Path
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    last_usage: Usage = field(default_factory=Usage)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(self.ready_text):
                self.ready.set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 120.0) -> float:
        """Seconds it took; AssertionError (with the log's tail) if it exits or times out."""
        began = time.monotonic()
        while not self.ready.wait(0.1):
            if not self.alive() or time.monotonic() - began > timeout:
                raise AssertionError(f"{self.name} not ready (exit {self.proc.poll()}); log {self.log}:\n"
                                     f"{self.tail()}")
        return time.monotonic() - began

    def usage(self) -> Usage:
        """CPU and peak RSS now (or as last seen, once the process is gone)."""
        now = proc_usage(self.pid) if self.alive() else None
        if now is not None:
            self.last_usage = now
        return self.last_usage

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL (a crash: nothing is flushed or committed)."""
        if self.alive():
            self.usage()
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, SIGKILL after ``timeout``; the exit code."""
        if self.alive():
            self.usage()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        return self.proc.returncode


def start_child(name: str, argv: Sequence[str], ready_text: str, env: dict[str, str], log: Path,
                cwd: Path | None = None) -> Child:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as err:
        proc = subprocess.Popen(list(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err, text=True)
    child = Child(name, proc, ready_text, log)
    threading.Thread(target=child._read, name=f"{name}-stdout", daemon=True).start()
    return child


def provstream_argv(*args: str, profile: Path | None = None) -> list[str]:
    prof = ["-m", "cProfile", "-o", str(profile)] if profile else []
    return [sys.executable, *prof, "-m", "provstream", *args]


def start_worker(settings: Settings, logs: Path, name: str = "worker", *args: str,
                 profile: Path | None = None) -> Child:
    """``provstream worker`` with its own Faust data directory (several may run side by side)."""
    datadir = settings.stack_dir / "faust" / f"{settings.worker_app_id}-{name}"
    argv = provstream_argv("worker", "--datadir", str(datadir), *args, profile=profile)
    return start_child(name, argv, WORKER_READY, child_env(settings), logs / f"{name}.log", cwd=settings.stack_dir)


def start_sink(settings: Settings, logs: Path, name: str = "sink", *args: str, profile: Path | None = None) -> Child:
    return start_child(name, provstream_argv("sink", *args, profile=profile), SINK_READY, child_env(settings),
                       logs / f"{name}.log", cwd=settings.stack_dir)


# -- Kafka progress -----------------------------------------------------------------

def end_offsets(settings: Settings, topic: str) -> int:
    """Sum of the topic's end offsets (records ever written)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False,
                             client_id="provstream-e2e-probe")
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return sum(consumer.end_offsets(parts).values()) if parts else 0
    finally:
        consumer.close(autocommit=False)


def committed(settings: Settings, group: str, topic: str) -> int:
    """Sum of the offsets ``group`` committed on ``topic``."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-e2e-probe")
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
        return sum(o.offset for tp, o in offsets.items() if tp.topic == topic and o.offset > 0)
    finally:
        admin.close()
