"""Every form ``tg-show-explain-trace`` can print a trace in (pure dispatch).

Example::

    >>> "mermaid" in SHOW_FORMATS
    True
"""

from __future__ import annotations

from provstream.read import render_json
from provstream.read.model import Trace
from provstream.read.pictures import dot, html, mermaid
from provstream.read.render_text import render_trace

SHOW_FORMATS = ("text", "json", "mermaid", "dot", "html")


def render(trace: Trace, fmt: str, *, width: int = 100, mark: str | None = None) -> str:
    """The trace in ``fmt`` (one of :data:`SHOW_FORMATS`).

    :param trace: the trace model.
    :param fmt: ``text`` (terminal text, ``width`` wide, ``mark`` pointing at one step), ``json``,
        ``mermaid``, ``dot`` or ``html`` (one self-contained page).
    :returns: the rendered text, ending with a newline.
    """
    if fmt == "json":
        return render_json.dumps(trace)
    if fmt == "mermaid":
        return mermaid(trace)
    if fmt == "dot":
        return dot(trace)
    if fmt == "html":
        return html(trace)
    return render_trace(trace, width, mark=mark)
