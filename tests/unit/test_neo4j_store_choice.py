"""Which write the store chooses when the server cannot say whether it has the procedure (no I/O)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from neo4j.exceptions import Neo4jError

from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.errors import StoreError
from provstream.settings import Settings


class _Refusing:
    """A driver whose sessions' reads fail with the server error ``code``."""

    def __init__(self, code: str) -> None:
        self.code = code

    def session(self, **_: Any) -> _Refusing:
        return self

    def __enter__(self) -> _Refusing:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def execute_read(self, *_: Any, **__: Any) -> Any:
        raise Neo4jError._hydrate_neo4j(code=self.code, message="refused")

    def close(self) -> None:
        return None


def _store(mode: str, code: str) -> Neo4jStore:
    store = Neo4jStore(replace(Settings(), neo4j_procedure=mode, neo4j_password="x"))
    store._driver = _Refusing(code)  # type: ignore[assignment]
    return store


@pytest.mark.parametrize("code", ["Neo.ClientError.Security.Forbidden", "Neo.ClientError.Statement.SyntaxError"])
def test_auto_writes_with_the_cypher_statement_when_procedures_cannot_be_listed(code: str) -> None:
    assert _store("auto", code).write_statement == q.WRITE_BATCH_QUERY


def test_on_and_refused_credentials_are_errors_not_a_fallback() -> None:
    with pytest.raises(StoreError):
        _ = _store("on", "Neo.ClientError.Security.Forbidden").write_statement
    with pytest.raises(StoreError):
        _ = _store("auto", "Neo.ClientError.Security.Unauthorized").write_statement


def test_off_asks_the_server_nothing() -> None:
    assert _store("off", "Neo.ClientError.Security.Forbidden").write_statement == q.WRITE_BATCH_QUERY
