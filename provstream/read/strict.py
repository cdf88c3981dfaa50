"""The ``--strict-prov`` mapping: the stored graph rewritten so that it passes the PROV constraints.

The reference model types a Question as ``prov:Activity`` and derives the first
Analysis (or, with no iteration, the Conclusion) from it with
``prov:wasDerivedFrom``. A PROV derivation relates two entities, and entities
and activities are disjoint (PROV-CONSTRAINTS, typing constraint 50 and
disjointness constraint 55), so that statement makes the document invalid. In
strict mode every ``prov:wasDerivedFrom`` whose end is an activity is replaced
by the PROV relation that says the same thing between the right kinds:

==================  ==================  ==========================================
subject             object              strict statement
==================  ==================  ==========================================
entity              activity            ``prov:wasGeneratedBy(subject, object)``
activity            entity              ``prov:used(subject, object)``
activity            activity            ``prov:wasInformedBy(subject, object)``
==================  ==================  ==========================================

A node is an activity when the graph types it ``prov:Activity``; a node that is
only referenced (its own triples are not in the export) counts as an activity
when it is a question IRI of the vocabulary. Every other triple is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

from provstream.core import vocab as v
from provstream.core.triples import Iri, Triple

PROV_USED = v.PROV + "used"
PROV_WAS_INFORMED_BY = v.PROV + "wasInformedBy"


def activities(triples: Iterable[Triple]) -> set[str]:
    """Nodes typed ``prov:Activity``, plus referenced-only question IRIs."""
    triples = list(triples)
    subjects = {t.s.value for t in triples}
    typed = {t.s.value for t in triples if t.p.value == v.RDF_TYPE and t.o == Iri(v.PROV_ACTIVITY)}
    referenced = {t.o.value for t in triples if isinstance(t.o, Iri)} - subjects
    return typed | {iri for iri in referenced if v.parse_question_iri(iri) is not None}


def strict_triples(triples: Iterable[Triple]) -> set[Triple]:
    """The graph with every derivation touching an activity mapped as in the module table."""
    triples = set(triples)
    acts = activities(triples)
    return {_strict(t, acts) for t in triples}


def _strict(t: Triple, acts: set[str]) -> Triple:
    if t.p.value != v.PROV_WAS_DERIVED_FROM or not isinstance(t.o, Iri):
        return t
    s_act, o_act = t.s.value in acts, t.o.value in acts
    if s_act and o_act:
        return Triple(t.s, Iri(PROV_WAS_INFORMED_BY), t.o)
    if s_act:
        return Triple(t.s, Iri(PROV_USED), t.o)
    if o_act:
        return Triple(t.s, Iri(v.PROV_WAS_GENERATED_BY), t.o)
    return t
