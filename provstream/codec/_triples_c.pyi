"""Types of the C extension built from ``_triples_c.c`` (see its docstrings)."""

from provstream.core.triples import StepTriples

FINGERPRINT: str

def read_step_triples(buf: bytes, pos: int, /) -> StepTriples: ...
def direct_construction(enabled: bool | None = None, /) -> bool: ...
