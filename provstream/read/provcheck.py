"""A checker for the PROV-CONSTRAINTS a provstream document can break (pure).

No PROV-CONSTRAINTS validator is published on PyPI, so this implements the
constraints that apply to documents made only of entities, activities and the
generation / usage / communication / derivation relations without ids or
times (what :mod:`provstream.read.provdoc` writes):

- typing (constraint 50): every identifier gets the kinds its declarations
  and the relations it takes part in imply (``wasDerivedFrom`` -> both
  entities, ``wasGeneratedBy`` -> entity + activity, ...);
- disjointness (constraint 55, entity-activity-disjoint): no identifier is
  both an entity and an activity;
- key constraints (22-27) on activities: one start time per activity;
- ordering (derivation-generation-generation-ordering, 45, and
  strictly-precedes being irreflexive): a derivation chain never returns to
  its own start (no derivation cycle, no self-derivation).

:func:`violations` returns one message per broken constraint; empty is valid.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from prov import constants as pc
from prov.model import ProvDocument, ProvRecord

ENTITY = "entity"
ACTIVITY = "activity"
AGENT = "agent"

_ELEMENT_KINDS = {pc.PROV_ENTITY: ENTITY, pc.PROV_ACTIVITY: ACTIVITY, pc.PROV_AGENT: AGENT}
# Typing constraint 50: the kind each formal argument of a relation must have.
_ARGUMENT_KINDS = {
    pc.PROV_ATTR_ENTITY: ENTITY, pc.PROV_ATTR_ACTIVITY: ACTIVITY, pc.PROV_ATTR_AGENT: AGENT,
    pc.PROV_ATTR_GENERATED_ENTITY: ENTITY, pc.PROV_ATTR_USED_ENTITY: ENTITY,
    pc.PROV_ATTR_INFORMED: ACTIVITY, pc.PROV_ATTR_INFORMANT: ACTIVITY,
    pc.PROV_ATTR_TRIGGER: ENTITY, pc.PROV_ATTR_STARTER: ACTIVITY, pc.PROV_ATTR_ENDER: ACTIVITY,
    pc.PROV_ATTR_DELEGATE: AGENT, pc.PROV_ATTR_RESPONSIBLE: AGENT, pc.PROV_ATTR_PLAN: ENTITY,
    pc.PROV_ATTR_SPECIFIC_ENTITY: ENTITY, pc.PROV_ATTR_GENERAL_ENTITY: ENTITY,
    pc.PROV_ATTR_ALTERNATE1: ENTITY, pc.PROV_ATTR_ALTERNATE2: ENTITY,
}


def kinds(records: Iterable[ProvRecord]) -> dict[str, set[str]]:
    """Identifier -> the kinds (entity/activity/agent) declared or implied by typing."""
    out: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        kind = _ELEMENT_KINDS.get(rec.get_type())
        if kind is not None:
            out[str(rec.identifier)].add(kind)
            continue
        for attr, value in rec.formal_attributes:
            if value is not None and attr in _ARGUMENT_KINDS:
                out[str(value)].add(_ARGUMENT_KINDS[attr])
    return out


def violations(doc: ProvDocument) -> list[str]:
    records = list(doc.get_records())
    return [*_disjointness(records), *_start_keys(records), *_derivation_cycles(records)]


def _disjointness(records: list[ProvRecord]) -> list[str]:
    return [f"entity-activity-disjoint: {name} is both an entity and an activity"
            for name, found in sorted(kinds(records).items()) if {ENTITY, ACTIVITY} <= found]


def _start_keys(records: list[ProvRecord]) -> list[str]:
    starts: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        if rec.get_type() == pc.PROV_ACTIVITY:
            start = dict(rec.formal_attributes).get(pc.PROV_ATTR_STARTTIME)
            if start is not None:
                starts[str(rec.identifier)].add(start.isoformat())
    return [f"key-activity: {name} has {len(s)} start times" for name, s in sorted(starts.items()) if len(s) > 1]


def _derivation_edges(records: list[ProvRecord]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        if rec.get_type() == pc.PROV_DERIVATION:
            attrs = dict(rec.formal_attributes)
            edges[str(attrs[pc.PROV_ATTR_GENERATED_ENTITY])].add(str(attrs[pc.PROV_ATTR_USED_ENTITY]))
    return edges


def _derivation_cycles(records: list[ProvRecord]) -> list[str]:
    """Entities that (transitively) derive from themselves: their generation would strictly precede itself."""
    edges = _derivation_edges(records)
    return [f"derivation-generation-generation-ordering: {name} is derived from itself"
            for name in sorted(edges) if name in _reachable(edges, name)]


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen
