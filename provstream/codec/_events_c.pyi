"""Types of the C extension built from ``_events_c.c`` (see its docstrings)."""

from provstream.core.events import Event

FINGERPRINT: str

def read_event(buf: bytes, pos: int, /) -> Event: ...
def direct_construction(enabled: bool | None = None, /) -> bool: ...
