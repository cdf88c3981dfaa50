"""Shared fixtures.

Unit tests (tests/unit) need nothing running. Integration tests
(tests/integration, marked ``integration``) use the real Kafka and Neo4j that
``make test`` starts once per run; each test gets its own topics, consumer
groups and session scope through :func:`isolated` so tests never see each
other's data; at the end of the run those topics (and the worker's changelog
topics) are deleted and those scopes emptied, so a developer's stack does not
accumulate them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import urlparse

import pytest

from provstream.settings import Settings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BESIDE = os.path.dirname(REPO) + os.sep


def _outside_the_clone(event: str, args: tuple[object, ...]) -> None:
    """Refuse to open anything beside the repository (``../shared`` and the like).

    A user clones the project alone: a test, fixture or library call that reads
    a sibling folder passes here and fails for them. Dot-folders beside the
    clone (``~/.cache``, ``~/.m2`` when it sits in a home directory) are tools'
    caches, not project data, and stay allowed. ``.ci/run`` also runs the
    tests in a fresh clone with nothing beside it, which catches subprocesses.
    """
    if event != "open" or not args or not isinstance(args[0], str | os.PathLike):
        return
    path = os.path.abspath(os.fspath(args[0]))
    if isinstance(path, str) and path.startswith(_BESIDE) and not path.startswith(REPO + os.sep) \
            and not path[len(_BESIDE):].startswith("."):
        raise PermissionError(f"the tests opened {path}, outside the repository {REPO}: "
                              "bundle what the project needs inside it (see provstream/data)")


sys.addaudithook(_outside_the_clone)


@pytest.fixture(scope="session")
def base_settings() -> Settings:
    return Settings.from_env()


def _reachable(host_port: str) -> bool:
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def _require(name: str, addr: str) -> None:
    if not any(_reachable(a.strip()) for a in addr.split(",")):  # a cluster: any broker of the bootstrap list
        pytest.fail(f"{name} is not reachable at {addr}: run `make up` (make test does it for you)")


@pytest.fixture(scope="session")
def kafka_stack(base_settings: Settings) -> Settings:
    """The running Kafka (for tests that need no Neo4j); fails, never skips, when it is down."""
    _require("Kafka", base_settings.kafka_bootstrap)
    return base_settings


@pytest.fixture(scope="session")
def stack(kafka_stack: Settings) -> Settings:
    """The running Kafka and Neo4j; fails (never skips) when either is down."""
    bolt = urlparse(kafka_stack.neo4j_uri)
    _require("Neo4j", f"{bolt.hostname}:{bolt.port}")
    return kafka_stack


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def _isolated_ids(stack: Settings) -> Iterator[list[str]]:
    """The ids :func:`isolated` handed out; their topics and scopes are removed after the run."""
    ids: list[str] = []
    yield ids
    if ids:
        _remove_test_data(stack, ids)


def _remove_test_data(settings: Settings, ids: list[str]) -> None:
    from kafka.admin import KafkaAdminClient

    from provstream.connectors.neo4j.store import Neo4jStore

    prefixes = tuple(p for u in ids for p in (f"test.{u}.", f"test-{u}-"))
    with contextlib.suppress(Exception):  # best effort: a test that broke the stack must not hide its own failure
        admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-tests")
        try:
            doomed = [t for t in admin.list_topics() if t.startswith(prefixes)]
            for i in range(0, len(doomed), 50):
                admin.delete_topics(doomed[i:i + 50])
        finally:
            admin.close()
    with contextlib.suppress(Exception), Neo4jStore(settings.with_stack_secret()) as store:
        for u in ids:
            store.reset_graph(collection=f"test-{u}")


@pytest.fixture
def isolated(stack: Settings, unique: str, _isolated_ids: list[str]) -> Settings:
    """Settings with this test's own topics, groups and collection; topics created."""
    from provstream.topics import ensure_topics

    _isolated_ids.append(unique)

    s = replace(
        stack,
        events_topic=f"test.{unique}.events",
        triples_topic=f"test.{unique}.triples",
        events_dlq_topic=f"test.{unique}.events.dlq",
        triples_dlq_topic=f"test.{unique}.triples.dlq",
        worker_app_id=f"test-{unique}-fold",
        sink_group=f"test-{unique}-sink",
        collection=f"test-{unique}",
    )
    ensure_topics(s)
    return s
