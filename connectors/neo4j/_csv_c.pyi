"""Types of the C extension built from ``_csv_c.c`` (see its docstrings)."""

from collections.abc import Sequence
from typing import Any

class Unsupported(Exception): ...

def node_lines(nodes: Sequence[Any], names: tuple[str, ...], kinds: bytes, delimiter: str, /
               ) -> tuple[bytes, int, bool]: ...
def relationship_lines(relationships: Sequence[Any], rel_type: str, names: tuple[str, ...], kinds: bytes,
                       delimiter: str, /) -> tuple[bytes, int, bool]: ...
