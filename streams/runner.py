"""Running the Faust worker in the foreground until SIGTERM/SIGINT.

Before Faust starts, the provstream topics are created and the events topic's
partition count is checked against ``settings.partitions`` (the state table's
changelog uses that count; a mismatch would split a session's state from its
events). Once the first partition assignment and the table recovery are done,
one line starting with :data:`READY` is printed on stdout.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import faust
from kafka import KafkaConsumer
from kafka.errors import KafkaError

from provstream.errors import ConfigError, ProvstreamError
from provstream.security import kafka_python_options
from provstream.settings import Settings
from provstream.streams.app import WorkerOptions, create_app, datadir
from provstream.streams.quiet import limit_repeats
from provstream.topics import ensure_topics

READY = "provstream worker ready"


def _say(line: str) -> None:
    print(line, flush=True)


def prepare(settings: Settings) -> None:
    """Create missing topics; refuse an events topic that is not co-partitioned with the table."""
    ensure_topics(settings, role="worker")
    count = _partition_count(settings)
    if count != settings.partitions:
        raise ConfigError(
            f"topic {settings.events_topic} has {count} partitions but PROVSTREAM_PARTITIONS is "
            f"{settings.partitions}: the worker's state table must be co-partitioned with the events"
        )


def _partition_count(settings: Settings) -> int:
    consumer = None
    try:
        consumer = KafkaConsumer(**kafka_python_options(settings, "worker"), client_id="provstream-worker-check")
        return len(consumer.partitions_for_topic(settings.events_topic) or ())
    except KafkaError as exc:
        raise ProvstreamError(f"cannot read topic metadata from Kafka at {settings.kafka_bootstrap}: {exc}") from exc
    finally:
        if consumer is not None:
            consumer.close()


def run(settings: Settings, options: WorkerOptions | None = None, loglevel: str = "WARNING",
        say: Callable[[str], None] = _say) -> int:
    """Run the worker until it is told to stop; the process exit code."""
    prepare(settings)
    options = options or WorkerOptions()
    try:
        datadir(settings, options).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the worker's data directory: {exc}") from exc
    app = create_app(settings, options)
    _announce_ready(app, settings, say)
    worker = QuietWorker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False, stdout=sys.stdout)
    worker.spinner = None  # no terminal escape codes on stdout: it is often a log file
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


class QuietWorker(faust.Worker):
    """Faust's worker, its log handlers limited to one of each repeated warning or error per 30 s.

    While Kafka is down, aiokafka would otherwise write about a hundred ERROR
    lines a second (see :mod:`.quiet`).
    """

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        limit_repeats(logger)


def _announce_ready(app: faust.App, settings: Settings, say: Callable[[str], None]) -> None:
    announced = False

    async def on_rebalance_complete(sender: Any, **_kwargs: Any) -> None:
        nonlocal announced
        if not announced:
            announced = True
            say(f"{READY}: app {settings.worker_app_id}, {settings.events_topic} -> {settings.triples_topic}")

    app.on_rebalance_complete.connect(on_rebalance_complete, weak=False)  # type: ignore[arg-type]
