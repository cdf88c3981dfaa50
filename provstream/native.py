"""Whether provstream may use its optional C extensions (read once per choice, at import).

The codec's C reader and writers (``provstream/codec/_triples_c.c``, ``_events_c.c``),
the sink's C rows (``connectors/neo4j/_rows_c.c``), the bulk rebuild's C image write
(``connectors/neo4j/_image_c.c``) and C CSV lines (``connectors/neo4j/_csv_c.c``) are each chosen once, at
import, beside the Python or fastavro path that does the same work. This module
holds only the switch they share, so that a module can ask without importing the
codec.
"""

from __future__ import annotations

import os


def c_extensions_off() -> bool:
    """``PROVSTREAM_NO_C_EXTENSIONS=1`` (any value but empty or ``0``): no C extension is used.

    >>> import os
    >>> os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") in ("", "0") or c_extensions_off()
    True
    """
    return os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")
