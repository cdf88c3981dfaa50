"""The local stack: Kafka and Neo4j (deploy/*.sh) plus the managed worker and sink.

Servers are started by their deploy scripts; the Faust worker and the sink are
``provstream worker`` / ``provstream sink`` processes started detached, with a
pid file under ``<stack dir>/run`` and a log under ``<stack dir>/logs``. Every
operation is idempotent: ``up`` twice is harmless, ``down`` with nothing
running is harmless, and a process that fails to become ready is stopped
before the error is raised, so nothing is left half-started. A failed ``up``
stops only what that call started: servers and apps that were already
running stay up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from provstream.errors import ProvstreamError
from provstream.progress import Ticker
from provstream.settings import Settings
from provstream.topics import describe_cluster, ensure_topics

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
SERVERS = ("kafka", "neo4j")


@dataclass(frozen=True)
class App:
    """A managed Python process: its subcommand and the log line that says it is ready."""

    name: str
    argv: tuple[str, ...]
    ready: str


APPS = (
    App("worker", ("supervise", "worker"), "provstream worker ready"),  # restarted when it exits 75
    App("sink", ("sink",), "provstream sink ready"),
    App("otlp", ("otlp",), "provstream otlp ready"),  # OTLP receiver, docs/integrations.md
)


class StackError(ProvstreamError):
    pass


def instances(settings: Settings) -> list[App]:
    """The managed processes: ``settings.workers`` workers, ``settings.sinks`` sinks, the OTLP receiver.

    The first of each keeps its historical name (``worker``, ``sink``); more are
    ``worker-2``, ``sink-2``, ... Each extra worker gets a Faust data directory of its own.
    """
    out: list[App] = []
    for app in APPS:
        count = {"worker": settings.workers, "sink": settings.sinks}.get(app.name, 1)
        out.append(app)
        for i in range(2, count + 1):
            extra = ("--datadir", str(settings.stack_dir / "faust" / f"{settings.worker_app_id}-{i}")) \
                if app.name == "worker" else ()
            out.append(App(f"{app.name}-{i}", (*app.argv, *extra), app.ready))
    return out


def _stray(settings: Settings) -> list[App]:
    """Extra worker/sink instances left running by an ``up`` with a larger count (stopped by ``down``)."""
    run = settings.stack_dir / "run"
    names = {a.name for a in instances(settings)}
    found = []
    for pidfile in sorted(run.glob("*-[0-9]*.pid")) if run.is_dir() else ():
        name = pidfile.stem
        base = name.rsplit("-", 1)[0]
        if base in ("worker", "sink") and name not in names:
            found.append(App(name, (), ""))
    return found


def _env(settings: Settings) -> dict[str, str]:
    return {**os.environ, "PROVSTREAM_STACK_DIR": str(settings.stack_dir)}


def _script(settings: Settings, server: str, verb: str, *args: str,
            extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(DEPLOY / f"{server}.sh"), verb, *args], env={**_env(settings), **(extra_env or {})},
        capture_output=True, text=True, check=False,
    )


def server(settings: Settings, name: str, verb: str, *args: str, extra_env: Mapping[str, str] | None = None) -> str:
    """Run ``deploy/<name>.sh <verb> [args]`` (``extra_env`` over the environment); a one-line error: StackError."""
    done = _script(settings, name, verb, *args, extra_env=extra_env)
    if done.returncode != 0 and not (verb == "status" and done.returncode == 3):
        last = (done.stderr.strip().splitlines() or [f"{name} {verb} failed"])[-1]
        raise StackError(last.removeprefix("provstream: "))
    return done.stdout.strip()


# -- managed apps -----------------------------------------------------------

def _pidfile(settings: Settings, app: App) -> Path:
    return settings.stack_dir / "run" / f"{app.name}.pid"


def _logfile(settings: Settings, app: App) -> Path:
    return settings.stack_dir / "logs" / f"{app.name}.log"


def app_pid(settings: Settings, app: App) -> int | None:
    try:
        pid = int(_pidfile(settings, app).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def start_app(settings: Settings, app: App, timeout: float = 90.0) -> int:
    if (pid := app_pid(settings, app)) is not None:
        return pid
    log = _logfile(settings, app)
    log.parent.mkdir(parents=True, exist_ok=True)
    _pidfile(settings, app).parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        start = out.tell()
        proc = subprocess.Popen(
            [sys.executable, "-m", "provstream", *app.argv], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=_env(settings), start_new_session=True,
        )
    _pidfile(settings, app).write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _pidfile(settings, app).unlink(missing_ok=True)
            raise StackError(f"{app.name} exited with code {proc.returncode} (see {log})")
        if app.ready in _tail(log, start):
            return proc.pid
        time.sleep(0.2)
    stop_app(settings, app)
    raise StackError(f"{app.name} not ready after {timeout:.0f}s (see {log})")


def _tail(log: Path, start: int) -> str:
    with log.open("rb") as f:
        f.seek(start)
        return f.read().decode("utf-8", "replace")


def stop_app(settings: Settings, app: App, timeout: float = 30.0) -> bool:
    pid = app_pid(settings, app)
    if pid is None:
        _pidfile(settings, app).unlink(missing_ok=True)
        return False
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        _signal_group(pid, signal.SIGKILL)
    _pidfile(settings, app).unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


# -- the whole stack --------------------------------------------------------

def up(settings: Settings, *, apps: bool = True, say=print) -> None:  # type: ignore[no-untyped-def]
    """Start Kafka, Neo4j, the topics and (unless ``apps`` is false) the worker and the sink.

    :param settings: where the stack lives (``stack_dir``) and what the clients use.
    :param apps: also start the managed worker and sink.
    :param say: receives one progress line per component.
    :raises ProvstreamError: a component failed to start; what *this call* started
        has been stopped again, what was already running is left running.
    """
    started_servers: list[str] = []
    started_apps: list[App] = []
    try:
        for name in SERVERS:
            t0 = time.monotonic()
            with Ticker(f"{name}: starting (a first start downloads it from Maven Central)"):
                out = server(settings, name, "up")
            last = out.splitlines()[-1] if out else "up"
            if "already running" not in last:
                started_servers.append(name)
            say(f"{name}: {last} ({time.monotonic() - t0:.1f}s)")
        settings = settings.with_stack_secret()  # the first neo4j up may just have written it
        say(f"topics: checking on Kafka at {settings.kafka_bootstrap} ...")
        created = ensure_topics(settings)
        if created:
            say(f"topics created: {', '.join(created)}")
        if settings.encrypt:
            from provstream.keys import load_master_key

            load_master_key(settings, create=True)
            say(f"master key: {settings.master_key_path} (PROVSTREAM_ENCRYPT=1, docs/security.md)")
        if settings.secure:
            from provstream.acls import ensure_acls

            say(f"acls: {ensure_acls(settings)} least-privilege ACLs in place (docs/security.md)")
        if apps:
            for app in instances(settings):
                was_running = app_pid(settings, app) is not None
                with Ticker(f"{app.name}: starting"):
                    pid = start_app(settings, app)
                if not was_running:
                    started_apps.append(app)
                say(f"{app.name}: {'already running' if was_running else 'running'} "
                    f"(pid {pid}, log {_logfile(settings, app)})")
    except ProvstreamError:
        mine = [*started_servers, *(a.name for a in started_apps)]
        say(f"stack: start failed; stopping what this call started: {', '.join(mine)}" if mine
            else "stack: start failed; nothing was started by this call, nothing stopped")
        for app in reversed(started_apps):
            stop_app(settings, app)
        for name in reversed(started_servers):
            with contextlib.suppress(ProvstreamError):
                server(settings, name, "down")
        raise


def down(settings: Settings, *, say=print) -> None:  # type: ignore[no-untyped-def]
    for app in reversed([*instances(settings), *_stray(settings)]):
        if stop_app(settings, app):
            say(f"{app.name}: stopped")
    for name in reversed(SERVERS):
        say(server(settings, name, "down") or f"{name}: stopped")


def status(settings: Settings) -> tuple[list[str], bool]:
    """One line per component, and whether everything (servers and apps) runs."""
    lines, healthy = [], True
    for name in SERVERS:
        done = _script(settings, name, "status")
        lines.append(done.stdout.strip() or done.stderr.strip() or f"{name} unknown")
        healthy &= done.returncode == 0
        if name == "kafka" and settings.kafka_brokers > 1:  # a cluster: which broker leads which partition
            try:
                lines.extend("  " + line for line in describe_cluster(settings, timeout_ms=5000))
            except ProvstreamError as exc:
                lines.append(f"  partitions unknown: {exc}")
    for app in instances(settings):
        pid = app_pid(settings, app)
        lines.append(f"{app.name} running (pid {pid})" if pid else f"{app.name} stopped")
        healthy &= pid is not None
    return lines, healthy
