"""Types of the C extension built from ``_rows_c.c`` (see its docstrings)."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provstream.core.triples import StepTriples

class Unsupported(Exception): ...

Position = tuple[int, int] | None

def write_rows(batch: Sequence[StepTriples], lineage: Iterable[Mapping[str, Any]], /
               ) -> tuple[int, list[dict[str, Any]]]: ...
def write_rows_at(batch: Sequence[StepTriples], origins: Sequence[tuple[Position, Position]], /
                  ) -> tuple[int, list[dict[str, Any]]]: ...
def caption(labels: list[str], props: dict[str, Any], iri: str, /) -> str: ...
def configure(settings: dict[str, Any], /) -> None: ...
