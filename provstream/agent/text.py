"""Plain-text helpers shared by the corpus builder and the search: pure functions."""

from __future__ import annotations

import re
import unicodedata
from typing import Final

_WORD: Final = re.compile(r"[a-z0-9]+")
# A sentence ends at . ! ? (optionally closed by a quote or bracket) followed by
# a capital, a digit, a quote or an opening bracket.
_SENTENCE_END: Final = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[A-Z0-9\"(])")
_ABBREVIATIONS: Final = ("U.S.", "Jr.", "Sr.", "Dr.", "Mr.", "Mrs.", "St.", "vs.")

STOPWORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also known many much one two
    """.split()
)


def fold_accents(text: str) -> str:
    """``Jalapeño`` -> ``Jalapeno``: compare text without diacritics."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _stem(word: str) -> str:
    """A deliberately tiny stemmer: drop a plural ``s`` (not ``ss``/``us``/``is``)."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased, accent-folded, stop-word-free terms, in order (duplicates kept)."""
    words = _WORD.findall(fold_accents(text).lower())
    return [_stem(w) for w in words if len(w) > 1 and w not in STOPWORDS]


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences, keeping common abbreviations intact."""
    pieces = _SENTENCE_END.split(text.strip())
    sentences: list[str] = []
    for piece in pieces:
        if sentences and sentences[-1].endswith(_ABBREVIATIONS):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return [s.strip() for s in sentences if s.strip()]


def slug(title: str) -> str:
    """``New Paltz (village), New York`` -> ``new-paltz-village-new-york``."""
    words = _WORD.findall(fold_accents(title).lower().replace("'", ""))
    return "-".join(words)
