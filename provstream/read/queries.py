"""The read side's Cypher, as constants (values are always parameters).

A session's Question node is the node that carries its status (the sink sets
``status``, ``steps``, ... and the scope on it, even before the question step
itself arrived). A GraphRAG/DocRAG session is a *sub-trace* when an agent
Analysis in the same scope ``wasDerivedFrom`` its Synthesis; the listing nests
it under that agent session instead of showing it at the top level.
"""

from __future__ import annotations

from typing import Final, LiteralString

LIST_TRACES: Final[LiteralString] = """
MATCH (q:Resource)
WHERE q.user = $user AND q.collection = $collection AND q.graph = $graph AND q.status IS NOT NULL
  AND NOT EXISTS {
    MATCH (s:Resource {session: q.session})<-[:wasDerivedFrom]-(caller:Analysis)
    WHERE s:Synthesis AND s.mechanism = q.mechanism AND s.user = q.user AND s.collection = q.collection
      AND caller.user = q.user AND caller.collection = q.collection
  }
WITH q
ORDER BY q.startedAtTime IS NULL, q.startedAtTime DESC, q.iri
LIMIT $limit
RETURN q.iri AS iri, q.session AS session, labels(q) AS labels, q.mechanism AS mechanism,
       q.query AS query, q.startedAtTime AS time, q.steps AS steps, q.status AS status,
       COLLECT {
         MATCH (a:Resource {session: q.session})-[:wasDerivedFrom]->(s:Synthesis)
         WHERE a:Analysis AND a.mechanism = q.mechanism AND a.user = q.user AND a.collection = q.collection
           AND s.user = q.user AND s.collection = q.collection
         MATCH (sq:Resource {session: s.session})
         WHERE sq.mechanism = s.mechanism AND sq.user = q.user AND sq.collection = q.collection
           AND sq.graph = q.graph AND sq.status IS NOT NULL
         RETURN DISTINCT sq {.iri, .session, labels: labels(sq), .mechanism, .query,
                             time: sq.startedAtTime, .steps, .status}
       } AS subtraces
"""

QUESTION_STATUS: Final[LiteralString] = """
MATCH (q:Resource {iri: $iri})
WHERE q.user = $user AND q.collection = $collection AND q.graph = $graph
RETURN q.status AS status, q.steps AS steps, q.expectedSteps AS expected,
       q.lateSteps AS late, q.missingSteps AS missing
"""

# The Question of the session a Synthesis belongs to (same scope only).
SUBTRACE_QUESTION: Final[LiteralString] = """
MATCH (s:Resource {iri: $iri})
WHERE s.user = $user AND s.collection = $collection AND s.graph = $graph
MATCH (q:Resource {session: s.session})
WHERE q.mechanism = s.mechanism AND q.user = s.user AND q.collection = s.collection
  AND q.graph = s.graph AND q.status IS NOT NULL
RETURN q.iri AS iri
ORDER BY q.iri
LIMIT 1
"""
