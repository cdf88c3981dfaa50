"""A :class:`.image.GraphImage` as the CSV files ``neo4j-admin database import full`` reads.

Nodes are grouped by the set of properties they hold (name and type), one file
per group with its own header (``iri:ID,:LABEL,name:type,...``), so that every
column of a file has a value on every row and an empty field never has to mean
"absent". Relationships likewise (``:START_ID,:END_ID,:TYPE,graph:string[,
predicate:string]``). Strings are always quoted (quotes doubled, RFC 4180),
numbers bare; list elements and labels are joined with an array delimiter
chosen among characters that occur in none of them. Empty lists cannot travel
in CSV (an empty field is no property): :attr:`ImportPlan.empty_lists` names
them, to be set after the import.

Example::

    plan = write_csv(image, Path("/tmp/bulk"))
    plan.arguments("neo4j")   # the importer's options and files
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provstream.connectors.neo4j.image import GraphImage, ImageNode, ImageRelationship, Moment, empty_lists
from provstream.errors import ProvstreamError

# Characters tried, in order, as the array delimiter: ASCII separators, then the private use area.
DELIMITER_CANDIDATES = ("\x1f", "\x1e", "\x1d", "\x1c", *(chr(c) for c in range(0xE000, 0xE100)))
MIN_READ_BUFFER = 4 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

Signature = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ImportPlan:
    """What was written and how the importer must read it.

    :ivar node_files: one CSV per node property signature.
    :ivar relationship_files: one CSV per relationship type and property signature.
    :ivar array_delimiter: the character between list elements and labels.
    :ivar multiline: whether any value holds a line break (``--multiline-fields``).
    :ivar read_buffer: bytes the importer's read buffer needs (the largest value, doubled, at least 4 MiB).
    :ivar nodes: node rows written.
    :ivar relationships: relationship rows written.
    :ivar empty_lists: property name -> IRIs of the nodes that hold it as ``[]``.
    """

    node_files: tuple[Path, ...]
    relationship_files: tuple[Path, ...]
    array_delimiter: str
    multiline: bool
    read_buffer: int
    nodes: int
    relationships: int
    empty_lists: Mapping[str, tuple[str, ...]]

    def arguments(self, database: str) -> tuple[str, ...]:
        """The ``neo4j-admin database import full`` arguments (database first: the file options are lists).

        :param database: the database to overwrite.
        :returns: e.g. ``("neo4j", "--overwrite-destination=true", ..., "--nodes=/x/nodes-0.csv")``.
        """
        return (
            database, "--overwrite-destination=true",
            f"--array-delimiter=U+{ord(self.array_delimiter):04X}",
            f"--multiline-fields={'true' if self.multiline else 'false'}",
            f"--read-buffer-size={self.read_buffer}",
            "--id-type=string", "--ignore-empty-strings=false", "--normalize-types=true",
            "--skip-bad-relationships=false", "--skip-duplicate-nodes=false", "--bad-tolerance=0",
            *(f"--nodes={p}" for p in self.node_files),
            *(f"--relationships={p}" for p in self.relationship_files),
        )


def csv_type(name: str, value: Any) -> str:
    """The importer's column type of a property value.

    :raises ProvstreamError: a value the model never writes (a mixed or nested list, an unknown type).

    >>> csv_type("steps", 3), csv_type("types", ["urn:a"]), csv_type("startedAtTime", Moment("x"))
    ('long', 'string[]', 'datetime')
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Moment):
        return "datetime"
    if isinstance(value, list) and value:
        kinds = {csv_type(name, x) for x in value}
        if len(kinds) == 1 and next(iter(kinds)) in ("string", "long", "double", "boolean"):
            return next(iter(kinds)) + "[]"
    raise ProvstreamError(f"cannot import property {name!r}: unsupported value {value!r:.80}")


def choose_delimiter(texts: Iterable[str]) -> str:
    """The first candidate array delimiter that occurs in none of ``texts``.

    >>> choose_delimiter(["a\\x1fb"])
    '\\x1e'
    """
    seen: set[str] = set()
    for text in texts:
        seen.update(c for c in text if c in _CANDIDATE_SET)
    for c in DELIMITER_CANDIDATES:
        if c not in seen:
            return c
    raise ProvstreamError("cannot import: every candidate array delimiter occurs in the list values")


_CANDIDATE_SET = frozenset(DELIMITER_CANDIDATES)


def _cell(value: Any, delimiter: str) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Moment):
        return value.text
    if isinstance(value, list):
        return delimiter.join(str(_cell(x, delimiter)) for x in value)
    return value


def _node_signature(node: ImageNode) -> Signature:
    return tuple(sorted((name, csv_type(name, value)) for name, value in node.props.items()
                        if name != "iri" and not (isinstance(value, list) and not value)))


def write_csv(image: GraphImage, directory: Path) -> ImportPlan:
    """Write ``image`` as the importer's CSV files into ``directory`` (created; files overwritten).

    :param image: the graph to write.
    :param directory: where the files go.
    :returns: the plan that names the files and the importer options they need.
    :raises ProvstreamError: a property name or value the importer cannot carry.
    """
    directory.mkdir(parents=True, exist_ok=True)
    nodes = list(image.nodes())
    rels = list(image.relationships())
    delimiter = choose_delimiter(_list_texts(nodes))
    groups: dict[Signature, list[ImageNode]] = {}
    for node in nodes:
        groups.setdefault(_node_signature(node), []).append(node)
    longest, multiline = 0, False
    node_files: list[Path] = []
    for i, (signature, members) in enumerate(sorted(groups.items())):
        names = [name for name, _ in signature]
        for name in names:
            if not _NAME.match(name):
                raise ProvstreamError(f"cannot import property name {name!r}")
        path = directory / f"nodes-{i}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            out = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
            out.writerow(["iri:ID", ":LABEL", *(f"{n}:{t}" for n, t in signature)])
            for node in members:
                row = [node.iri, delimiter.join(sorted(node.labels)),
                       *(_cell(node.props[n], delimiter) for n in names)]
                longest, multiline = _scan(row, longest, multiline)
                out.writerow(row)
        node_files.append(path)
    rel_groups: dict[tuple[str, Signature], list[ImageRelationship]] = {}
    for rel in rels:
        signature = tuple(sorted((name, csv_type(name, value)) for name, value in rel.props.items()))
        rel_groups.setdefault((rel.type, signature), []).append(rel)
    rel_files: list[Path] = []
    for i, ((rel_type, signature), rel_members) in enumerate(sorted(rel_groups.items())):
        names = [name for name, _ in signature]
        path = directory / f"relationships-{i}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            out = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
            out.writerow([":START_ID", ":END_ID", ":TYPE", *(f"{n}:{t}" for n, t in signature)])
            for rel in rel_members:
                row = [rel.start, rel.end, rel_type, *(_cell(rel.props[n], delimiter) for n in names)]
                longest, multiline = _scan(row, longest, multiline)
                out.writerow(row)
        rel_files.append(path)
    return ImportPlan(
        node_files=tuple(node_files), relationship_files=tuple(rel_files), array_delimiter=delimiter,
        multiline=multiline, read_buffer=max(MIN_READ_BUFFER, 2 * longest + 1024), nodes=len(nodes),
        relationships=len(rels), empty_lists={k: tuple(v) for k, v in empty_lists(nodes).items()},
    )


def _list_texts(nodes: Iterable[ImageNode]) -> Iterable[str]:
    for node in nodes:
        yield from node.labels
        for value in node.props.values():
            if isinstance(value, list):
                yield from (str(x) for x in value)


def _scan(row: list[Any], longest: int, multiline: bool) -> tuple[int, bool]:
    for cell in row:
        if isinstance(cell, str):
            if len(cell) * 4 > longest:  # UTF-8: at most 4 bytes a character
                longest = max(longest, len(cell.encode("utf-8")))
            if not multiline and ("\n" in cell or "\r" in cell):
                multiline = True
    return longest, multiline
