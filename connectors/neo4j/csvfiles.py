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
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from operator import itemgetter
from pathlib import Path
from typing import Any

from provstream.connectors.neo4j.image import GraphImage, ImageNode, ImageRelationship, Moment
from provstream.errors import ProvstreamError
from provstream.native import c_extensions_off

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
        _note_candidates(text, seen)
    return _first_free(seen)


def _note_candidates(text: str, seen: set[str]) -> None:
    # Every candidate is a control or private-use character, none of them printable: most
    # texts are, and the set intersection (a pass over the characters in C) is then skipped.
    if not text.isprintable():
        seen.update(_CANDIDATE_SET.intersection(text))


def _note_element_candidates(values: list[Any], seen: set[str]) -> None:
    for x in values:
        if type(x) is str:
            _note_candidates(x, seen)


def _first_free(seen: set[str]) -> str:
    for c in DELIMITER_CANDIDATES:
        if c not in seen:
            return c
    raise ProvstreamError("cannot import: every candidate array delimiter occurs in the list values")


_CANDIDATE_SET = frozenset(DELIMITER_CANDIDATES)
# The column type of a value of exactly this class (a subclass or a list goes through csv_type).
_SCALAR_TYPES: Mapping[type, str] = {bool: "boolean", int: "long", float: "double", str: "string",
                                     Moment: "datetime"}


def _cell(value: Any, delimiter: str) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Moment):
        return value.text
    if isinstance(value, list):
        return delimiter.join(str(_cell(x, delimiter)) for x in value)
    return value


def _signature(props: Mapping[str, Any], candidates: set[str] | None = None,
               empty: list[str] | None = None) -> Signature:
    """The sorted (name, column type) of ``props`` but ``iri`` and empty lists.

    A signature is worked out once per shape (the names, the exact class of each value, and of
    each list whether it is empty and its elements' class) and looked up after that.

    :param candidates: when given, collects the candidate delimiters found in list elements.
    :param empty: when given, collects the names of the empty lists left out.
    :raises ProvstreamError: a value the importer cannot carry.
    """
    key = _SHAPE_KEY(props, candidates, empty)
    if key is None:  # a list subclass, or a value no column type takes
        return _signature_uncached(props, candidates, empty)
    signature = _SIGNATURES.get(key)
    if signature is None:
        signature = _signature_uncached(props, None, None)
        if len(_SIGNATURES) >= _SIGNATURE_CACHE:
            _SIGNATURES.clear()
        _SIGNATURES[key] = signature
    return signature


_KNOWN_CLASSES = frozenset((*_SCALAR_TYPES, list))


def _shape_key_py(props: Mapping[str, Any], candidates: set[str] | None,
                  empty: list[str] | None) -> tuple[Any, ...] | None:
    """The key :func:`_signature` remembers a signature under: the names, the exact class of each
    value, and of each list whether it is empty and its elements' class; ``None`` (nothing noted)
    when a class is not in ``_KNOWN_CLASSES``. Notes empty lists and list elements' candidates."""
    classes = tuple(map(type, props.values()))
    if not _KNOWN_CLASSES.issuperset(classes):
        return None
    if list not in classes:
        return (tuple(props), classes)
    shape: list[Any] = []
    for name, value in props.items():
        if type(value) is not list:
            continue
        if not value:
            if empty is not None:
                empty.append(name)
            shape.append(None)
            continue
        kinds = set(map(type, value))
        shape.append(kinds.pop() if len(kinds) == 1 else object)
        if candidates is not None:
            _note_element_candidates(value, candidates)
    return (tuple(props), classes, tuple(shape))


ShapeKey = Callable[[Mapping[str, Any], "set[str] | None", "list[str] | None"], "tuple[Any, ...] | None"]


def _choose_shape_key() -> ShapeKey:
    """:func:`_shape_key_py`, or the C ``shape_key`` when built, on (only) dicts, and it gives the
    same keys and notes for a sample of every column shape (not with ``PROVSTREAM_NO_C_EXTENSIONS=1``).

    >>> _choose_shape_key()({"a": 1, "b": []}, None, None) == _shape_key_py({"a": 1, "b": []}, None, None)
    True
    """
    if c_extensions_off():
        return _shape_key_py
    try:
        from provstream.connectors.neo4j import _csv_c
    except ImportError:
        return _shape_key_py
    samples: list[dict[str, Any]] = [
        {"iri": "urn:a", "n": 1, "x": 0.5, "b": True, "t": Moment("t")}, {},
        {"l": [], "m": ["a\x1fb", "\ue000", "c"], "k": [1, 2], "j": [1, "a"], "s": "\x1e"}, {"d": {1: 2}},
    ]
    try:
        exact = True
        for props in samples:
            noted_c: tuple[set[str], list[str]] = (set(), [])
            noted_py: tuple[set[str], list[str]] = (set(), [])
            exact = exact and _csv_c.shape_key(props, _KNOWN_CLASSES, *noted_c) == _shape_key_py(
                props, *noted_py) and noted_c == noted_py
    except Exception:  # noqa: BLE001 - a C key that cannot take the samples is not used
        exact = False
    if not exact:
        return _shape_key_py
    fast, unsupported = _csv_c.shape_key, _csv_c.Unsupported

    def shape_key_c(props: Mapping[str, Any], candidates: set[str] | None,
                    empty: list[str] | None) -> tuple[Any, ...] | None:
        try:
            return fast(props, _KNOWN_CLASSES, candidates, empty)
        except unsupported:
            return _shape_key_py(props, candidates, empty)

    return shape_key_c


_SHAPE_KEY = _choose_shape_key()
_SIGNATURES: dict[tuple[Any, ...], Signature] = {}
_SIGNATURE_CACHE = 4096  # shapes remembered; the model's nodes and relationships have a few dozen


def _signature_uncached(props: Mapping[str, Any], candidates: set[str] | None,
                        empty: list[str] | None) -> Signature:
    out = []
    for name, value in props.items():
        kind = _SCALAR_TYPES.get(type(value))
        if kind is None:
            if isinstance(value, list):
                if not value:
                    if empty is not None:
                        empty.append(name)
                    continue
                if candidates is not None:
                    _note_element_candidates(value, candidates)
            kind = csv_type(name, value)
        if name != "iri":
            out.append((name, kind))
    out.sort()
    return tuple(out)


def _converters(signature: Signature, delimiter: str) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
    """A function that turns a row's values into its cells (lists, datetimes, booleans to text);
    ``None`` when every cell is the value."""
    plain = {"string", "long", "double"}
    columns = [(i, _converter(kind, delimiter)) for i, (_, kind) in enumerate(signature) if kind not in plain]
    if not columns:
        return None

    def convert(values: Sequence[Any]) -> list[Any]:
        cells = list(values)
        for i, cell in columns:
            cells[i] = cell(cells[i])
        return cells

    return convert


def _converter(kind: str, delimiter: str) -> Callable[[Any], str]:
    """The cell of one value of a column type other than ``string``, ``long`` and ``double``."""
    if kind == "string[]":
        return delimiter.join
    if kind in ("long[]", "double[]"):
        return lambda value: delimiter.join(map(str, value))
    return partial(_cell, delimiter=delimiter)


@dataclass(frozen=True)
class NodeScan:
    """A first pass over an image's nodes: their column groups, and what the array delimiter must avoid.

    :ivar groups: property signature -> the nodes that have exactly it.
    :ivar seen: the candidate delimiters that occur in a list element or a label.
    :ivar empty: property name -> IRIs of the nodes that hold it as ``[]``.
    :ivar count: nodes scanned.
    """

    groups: Mapping[Signature, Sequence[ImageNode]]
    seen: frozenset[str]
    empty: Mapping[str, Sequence[str]]
    count: int


def scan_nodes(image: GraphImage, leave_out: Callable[[ImageNode], bool] | None = None) -> NodeScan:
    """Group ``image``'s nodes by property signature and note the candidate delimiters their values use.

    :param image: the graph to scan.
    :param leave_out: when given, the nodes it is true of are not scanned (nor written).
    :returns: what :func:`write_csv` writes, and the characters its delimiter must avoid.
    :raises ProvstreamError: a property value the importer cannot carry.

    Example: ``free_delimiter(scan_nodes(image).seen)`` is the delimiter ``write_csv(image, d)`` uses.
    """
    seen: set[str] = set()
    empty: dict[str, list[str]] = {}
    groups: dict[Signature, list[ImageNode]] = {}
    count = 0
    for node in image.nodes():
        if leave_out is not None and leave_out(node):
            continue
        count += 1
        names: list[str] = []
        signature = _signature(node.props, seen, names)
        for name in names:
            empty.setdefault(name, []).append(node.iri)
        for label in node.labels:
            _note_candidates(label, seen)
        groups.setdefault(signature, []).append(node)
    return NodeScan(groups, frozenset(seen), empty, count)


def free_delimiter(seen: Iterable[str]) -> str:
    """The first candidate array delimiter not in ``seen`` (the union of several scans' ``seen``).

    >>> free_delimiter({"\\x1f"})
    '\\x1e'
    """
    return _first_free(set(seen))


def write_csv(image: GraphImage, directory: Path, scan: NodeScan | None = None,
              delimiter: str | None = None) -> ImportPlan:
    """Write ``image`` as the importer's CSV files into ``directory`` (created; files overwritten).

    :param image: the graph to write (its relationships; its nodes unless ``scan`` is given).
    :param directory: where the files go.
    :param scan: the nodes to write, from :func:`scan_nodes`; default: every node of ``image``.
    :param delimiter: the array delimiter (one several images' files share, :func:`free_delimiter`);
        default: the first candidate that occurs in none of the values.
    :returns: the plan that names the files and the importer options they need.
    :raises ProvstreamError: a property name or value the importer cannot carry, or a ``delimiter``
        that occurs in a value.
    """
    directory.mkdir(parents=True, exist_ok=True)
    if scan is None:
        scan = scan_nodes(image)
    if delimiter is None:
        delimiter = _first_free(set(scan.seen))
    elif delimiter in scan.seen:
        raise ProvstreamError(f"cannot import: the array delimiter U+{ord(delimiter):04X} occurs in a value")
    groups, count = scan.groups, scan.count
    longest, multiline = 0, False
    node_files: list[Path] = []
    for i, (signature, members) in enumerate(sorted(groups.items())):
        for name, _ in signature:
            if not _NAME.match(name):
                raise ProvstreamError(f"cannot import property name {name!r}")
        path = directory / f"nodes-{i}.csv"
        header = ["iri:ID", ":LABEL", *(f"{n}:{t}" for n, t in signature)]
        found = _write_file(path, header, members, _NODE_LINES, signature, delimiter)
        longest, multiline = max(longest, found[0]), multiline or found[1]
        node_files.append(path)
    rel_groups: dict[tuple[str, Signature], list[ImageRelationship]] = {}
    rel_count = 0
    for rel in image.relationships():
        rel_count += 1
        rel_groups.setdefault((rel.type, _signature(rel.props)), []).append(rel)
    rel_files: list[Path] = []
    for i, ((rel_type, signature), rel_members) in enumerate(sorted(rel_groups.items())):
        path = directory / f"relationships-{i}.csv"
        header = [":START_ID", ":END_ID", ":TYPE", *(f"{n}:{t}" for n, t in signature)]
        found = _write_file(path, header, rel_members, _RELATIONSHIP_LINES, rel_type, signature, delimiter)
        longest, multiline = max(longest, found[0]), multiline or found[1]
        rel_files.append(path)
    return ImportPlan(
        node_files=tuple(node_files), relationship_files=tuple(rel_files), array_delimiter=delimiter,
        multiline=multiline, read_buffer=max(MIN_READ_BUFFER, 2 * longest + 1024), nodes=count,
        relationships=rel_count, empty_lists={k: tuple(v) for k, v in scan.empty.items()},
    )


def merge_plans(plans: Sequence[ImportPlan]) -> ImportPlan:
    """One import of several plans' files (written with one array delimiter, no node in two of them).

    :param plans: at least one plan, all with the same ``array_delimiter``.
    :returns: their files, counts and empty lists together, the widest read buffer.
    :raises ProvstreamError: the plans use different delimiters.

    Example: ``merge_plans([write_csv(a, d / "0", delimiter=c), write_csv(b, d / "1", delimiter=c)])``.
    """
    delimiters = {p.array_delimiter for p in plans}
    if len(delimiters) != 1:
        raise ProvstreamError(f"cannot import files written with {len(delimiters)} array delimiters in one run")
    empty: dict[str, list[str]] = {}
    for plan in plans:
        for name, iris in plan.empty_lists.items():
            empty.setdefault(name, []).extend(iris)
    return ImportPlan(
        node_files=tuple(f for p in plans for f in p.node_files),
        relationship_files=tuple(f for p in plans for f in p.relationship_files),
        array_delimiter=plans[0].array_delimiter, multiline=any(p.multiline for p in plans),
        read_buffer=max(p.read_buffer for p in plans), nodes=sum(p.nodes for p in plans),
        relationships=sum(p.relationships for p in plans), empty_lists={k: tuple(v) for k, v in empty.items()},
    )


def _getter(signature: Signature) -> Callable[[Mapping[str, Any]], Sequence[Any]]:
    """The values of a signature's columns from a property map, in column order."""
    names = [name for name, _ in signature]
    if not names:
        return lambda props: ()
    if len(names) == 1:
        return lambda props: (props[names[0]],)
    return itemgetter(*names)  # type: ignore[return-value]


def _texts(lead: int, signature: Signature) -> Callable[[Sequence[Any]], Sequence[str]]:
    """The text cells of a row: its ``lead`` leading cells (IRIs, labels, type) and every column but
    ``long`` and ``double`` (lists, datetimes and booleans are text once converted)."""
    return itemgetter(*range(lead), *(lead + i for i, (_, kind) in enumerate(signature)
                                      if kind not in ("long", "double")))  # type: ignore[return-value]


def _scan(texts: Sequence[str], longest: int, multiline: bool) -> tuple[int, bool]:
    """The longest text in UTF-8 bytes so far, and whether any holds a line break."""
    if max(map(len, texts)) * 4 > longest:  # UTF-8: at most 4 bytes a character
        longest = max(longest, *(len(t.encode("utf-8")) for t in texts if len(t) * 4 > longest))
    if not multiline:
        joined = "".join(texts)
        multiline = "\n" in joined or "\r" in joined
    return longest, multiline


def _write_file(path: Path, header: Sequence[str], members: Sequence[Any], lines: Callable[..., Lines],
                *args: Any) -> tuple[int, bool]:
    """Write the header, then ``lines(chunk, *args)`` of ``members`` :data:`CHUNK` at a time.

    :returns: the longest text cell in UTF-8 bytes, and whether one holds a line break.
    """
    longest, multiline = 0, False
    with path.open("wb") as f:
        f.write(_header_line(header))
        for at in range(0, len(members), CHUNK):
            data, chunk_longest, chunk_multiline = lines(members[at:at + CHUNK], *args)
            f.write(data)
            longest, multiline = max(longest, chunk_longest), multiline or chunk_multiline
    return longest, multiline


def _header_line(cells: Sequence[str]) -> bytes:
    """A header row as ``csv.writer(quoting=csv.QUOTE_NONNUMERIC)`` writes it (every cell a string)."""
    return ("".join(('"', '","'.join(c.replace('"', '""') for c in cells), '"\n'))).encode("utf-8")


Lines = tuple[bytes, int, bool]  # UTF-8 CSV lines, the longest text cell in bytes, a line break in one


def _lines_py(items: Sequence[Any], lead: Callable[[Any], list[Any]], width: int, signature: Signature,
              delimiter: str) -> Lines:
    """The CSV lines of ``items`` (their ``width`` lead cells, then the signature's columns of their
    ``props``) as the csv module writes them."""
    buffer = io.StringIO()
    out = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    values, convert, texts = _getter(signature), _converters(signature, delimiter), _texts(width, signature)
    longest, multiline = 0, False
    for item in items:
        cells = values(item.props)
        if convert is not None:
            cells = convert(cells)
        row = [*lead(item), *cells]
        longest, multiline = _scan(texts(row), longest, multiline)
        out.writerow(row)
    return buffer.getvalue().encode("utf-8"), longest, multiline


def _node_lines_py(nodes: Sequence[ImageNode], signature: Signature, delimiter: str) -> Lines:
    """The CSV lines of ``nodes`` (IRI, labels, the signature's columns) written by the csv module."""
    return _lines_py(nodes, lambda node: [node.iri, delimiter.join(sorted(node.labels))], 2, signature, delimiter)


def _relationship_lines_py(rels: Sequence[ImageRelationship], rel_type: str, signature: Signature,
                           delimiter: str) -> Lines:
    """The CSV lines of ``rels`` (start, end, type, the signature's columns) written by the csv module."""
    return _lines_py(rels, lambda rel: [rel.start, rel.end, rel_type], 3, signature, delimiter)


# The C lines' code of each column type they write (any other type: the csv module writes the file).
_KIND_CODES = {"string": "s", "long": "l", "double": "d", "boolean": "b", "datetime": "m",
               "string[]": "S", "long[]": "L", "double[]": "D"}


@lru_cache(maxsize=1024)
def _columns(signature: Signature) -> tuple[tuple[str, ...], bytes] | None:
    """The names and C kind codes of a signature's columns; ``None`` when a type has no code."""
    if any(kind not in _KIND_CODES for _, kind in signature):
        return None
    return tuple(n for n, _ in signature), "".join(_KIND_CODES[k] for _, k in signature).encode("ascii")


def _sample() -> tuple[list[ImageNode], list[ImageRelationship], Signature, Signature]:
    """Nodes and relationships with a value of every column type, quotes, line breaks and non-ASCII text."""
    node_signature: Signature = (("a", "string"), ("b", "long"), ("c", "double"), ("d", "boolean"),
                                 ("e", "datetime"), ("f", "string[]"), ("g", "long[]"), ("h", "double[]"))
    nodes = [ImageNode(iri, labels, {"a": a, "b": b, "c": c, "d": d, "e": Moment(e), "f": f, "g": g, "h": h})
             for iri, labels, a, b, c, d, e, f, g, h in (
                 ('urn:x:"1"', {"Resource", "Question"}, 'say "hi"\nthere', -7, 0.1, True,
                  "2025-03-01T09:00:00.000000Z", ["x", 'y"', "é€😀"], [1, 2**70], [1e16, -0.0]),
                 ("urn:x:2", {"Resource"}, "", 2**63 - 1, float("inf"), False, "", ["\r"], [0], [2.5]),
             )]
    rel_signature: Signature = (("graph", "string"), ("predicate", "string"))
    rels = [ImageRelationship("urn:x:1", "LINK", 'urn:x:"2"', {"graph": "urn:g", "predicate": "p\n€"})]
    return nodes, rels, node_signature, rel_signature


NodeLines = Callable[[Sequence[ImageNode], Signature, str], Lines]
RelationshipLines = Callable[[Sequence[ImageRelationship], str, Signature, str], Lines]


def _choose_lines() -> tuple[NodeLines, RelationshipLines]:
    """What :func:`write_csv` writes lines with: the C lines when built, else the csv module's.

    ``provstream.connectors.neo4j._csv_c`` (``connectors/neo4j/_csv_c.c``, built by
    ``pip install`` when a C compiler is there) returns the bytes the csv module
    writes for the exact classes the image holds; any other value (a subclass, a
    type with no code) it leaves to the csv module. It is not used with
    ``PROVSTREAM_NO_C_EXTENSIONS=1``, when it was not built, or when it does not
    give the lines of :func:`_sample` exactly as the csv module does.

    :returns: the node and relationship line writers.

    Example::

        >>> nodes, _, signature, _ = _sample()
        >>> _choose_lines()[0](nodes, signature, "\x1f") == _node_lines_py(nodes, signature, "\x1f")
        True
    """
    python = (_node_lines_py, _relationship_lines_py)
    if c_extensions_off():
        return python
    try:
        from provstream.connectors.neo4j import _csv_c
    except ImportError:
        return python
    nodes, rels, node_signature, rel_signature = _sample()
    try:
        exact = all(
            _csv_c.node_lines(nodes, *_columns(node_signature) or ((), b""), d) == _node_lines_py(
                nodes, node_signature, d)
            and _csv_c.relationship_lines(rels, "LINK", *_columns(rel_signature) or ((), b""), d)
            == _relationship_lines_py(rels, "LINK", rel_signature, d)
            for d in ("\x1f", "\ue000"))
    except Exception:  # noqa: BLE001 - C lines that cannot write the sample are not used
        exact = False
    if not exact:
        return python
    fast_nodes, fast_relationships, unsupported = _csv_c.node_lines, _csv_c.relationship_lines, _csv_c.Unsupported

    def node_lines_c(nodes: Sequence[ImageNode], signature: Signature, delimiter: str) -> Lines:
        columns = _columns(signature)
        if columns is not None:
            try:
                return fast_nodes(nodes, *columns, delimiter)
            except unsupported:
                pass
        return _node_lines_py(nodes, signature, delimiter)

    def relationship_lines_c(rels: Sequence[ImageRelationship], rel_type: str, signature: Signature,
                             delimiter: str) -> Lines:
        columns = _columns(signature)
        if columns is not None:
            try:
                return fast_relationships(rels, rel_type, *columns, delimiter)
            except unsupported:
                pass
        return _relationship_lines_py(rels, rel_type, signature, delimiter)

    return node_lines_c, relationship_lines_c


_NODE_LINES, _RELATIONSHIP_LINES = _choose_lines()
CHUNK = 8192  # rows formatted per call (the bytes of one chunk are held at once)
