"""Types of the C extension built from ``_rows_c.c`` (see its docstrings)."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provstream.core.triples import StepTriples

class Unsupported(Exception): ...

def write_rows(batch: Sequence[StepTriples], lineage: Iterable[Mapping[str, Any]], /
               ) -> tuple[int, list[dict[str, Any]]]: ...
def configure(settings: dict[str, Any], /) -> None: ...
