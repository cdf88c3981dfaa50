"""Every Cypher statement provstream runs, as constants.

Typed ``LiteralString`` so that a query built from data fails type checking.
Labels and relationship types appear literally, one per allow-listed name
(docs/neo4j-model.md); values are always parameters.
"""

from __future__ import annotations

from typing import Final, LiteralString

# The indexes first: CREATE INDEX returns at once and the index populates in the background,
# CREATE CONSTRAINT returns once its own index is online; so on a populated database (a bulk
# rebuild) the four populate together instead of the constraint's first.
SCHEMA: Final[tuple[LiteralString, ...]] = (
    "CREATE INDEX resource_session IF NOT EXISTS FOR (n:Resource) ON (n.session)",
    "CREATE INDEX resource_scope IF NOT EXISTS FOR (n:Resource) ON (n.user, n.collection)",
    "CREATE INDEX question_scope IF NOT EXISTS FOR (n:Question) ON (n.user, n.collection)",
    "CREATE CONSTRAINT resource_iri IF NOT EXISTS FOR (n:Resource) REQUIRE n.iri IS UNIQUE",
)
AWAIT_INDEXES: Final[LiteralString] = "CALL db.awaitIndexes(300)"

# -- write (one statement per batch: every node, then every relationship) ------

# One row per IRI (rows.write_rows): its own properties, labels, list values,
# status, offset lineage and outgoing relationships, each present only if the batch
# has them. Labels are set with a dynamic label expression; the row's labels come
# only from model.LABELS (rows.write_rows never takes one from data). The collect
# ends the node pass before any relationship is merged, so every end node exists.
# Status never regresses to fewer steps (a redelivered or replayed older message);
# of each lineage offset the first value written is kept.
# The rows arrive as $batch.rows, not as a list parameter of their own: Neo4j keys a cached plan
# on each list parameter's size, rounded up to a power of ten, so `UNWIND $rows` was planned (and
# later recompiled) once per batch-size class, and the first small batches after a run of large
# ones each waited for a plan (BENCHMARKS.md). A map parameter has no size in the key: one plan.
WRITE_BATCH: Final[LiteralString] = """
UNWIND $batch.rows AS row
MERGE (n:Resource {iri: row.iri})
ON CREATE SET n.graph = row.graph, n.types = row.types, n.selectedChunk = row.chunks, n.extraLiterals = row.extra
ON MATCH SET
  n.types = CASE WHEN row.types IS NULL THEN n.types
                 ELSE coalesce(n.types, []) + [t IN row.types WHERE NOT t IN coalesce(n.types, [])] END,
  n.selectedChunk = CASE WHEN row.chunks IS NULL THEN n.selectedChunk
                         ELSE coalesce(n.selectedChunk, [])
                              + [c IN row.chunks WHERE NOT c IN coalesce(n.selectedChunk, [])] END,
  n.extraLiterals = CASE WHEN row.extra IS NULL THEN n.extraLiterals
                         ELSE coalesce(n.extraLiterals, [])
                              + [x IN row.extra WHERE NOT x IN coalesce(n.extraLiterals, [])] END
SET n += row.props, n.startedAtTime = coalesce(datetime(row.startedAtTime), n.startedAtTime), n:$(row.labels)
FOREACH (_ IN CASE WHEN row.steps IS NOT NULL AND (n.steps IS NULL OR n.steps <= row.steps) THEN [1] ELSE [] END |
  SET n.status = row.status, n.steps = row.steps, n.expectedSteps = row.expectedSteps,
      n.lateSteps = row.lateSteps, n.missingSteps = row.missingSteps)
FOREACH (l IN CASE WHEN row.lineage IS NULL THEN [] ELSE [row.lineage] END |
  SET n.eventPartition = coalesce(n.eventPartition, l.eventPartition),
      n.eventOffset = coalesce(n.eventOffset, l.eventOffset),
      n.triplesPartition = coalesce(n.triplesPartition, l.triplesPartition),
      n.triplesOffset = coalesce(n.triplesOffset, l.triplesOffset))
WITH collect([n, row]) AS written
UNWIND written AS pair
WITH pair[0] AS n, pair[1] AS row
CALL (n, row) {
  UNWIND row.wasDerivedFrom AS rel
  MATCH (o:Resource {iri: rel.o})
  MERGE (n)-[r:wasDerivedFrom]->(o)
  SET r.graph = rel.graph
}
CALL (n, row) {
  UNWIND row.wasGeneratedBy AS rel
  MATCH (o:Resource {iri: rel.o})
  MERGE (n)-[r:wasGeneratedBy]->(o)
  SET r.graph = rel.graph
}
CALL (n, row) {
  UNWIND row.selectedEdge AS rel
  MATCH (o:Resource {iri: rel.o})
  MERGE (n)-[r:selectedEdge]->(o)
  SET r.graph = rel.graph
}
CALL (n, row) {
  UNWIND row.LINK AS rel
  MATCH (o:Resource {iri: rel.o})
  MERGE (n)-[r:LINK {predicate: rel.predicate}]->(o)
  SET r.graph = rel.graph
}
"""

# WRITE_BATCH as the store runs it. Its plan is seeks on the unique `iri` index whatever the
# statistics, so a replan (Neo4j's plan cache discards a plan once the store's counts have drifted
# far enough from those it was planned with) would only cost time, under load on every lane at once.
WRITE_BATCH_QUERY: Final[LiteralString] = "CYPHER replan=skip\n" + WRITE_BATCH

# WRITE_BATCH as a procedure (connectors/neo4j/procedure/WriteBatch.java, which deploy/neo4j.sh
# installs): the same graph through Neo4j's kernel API, from rows.procedure_batch of the same rows,
# for less of the server's CPU (BENCHMARKS.md). The store calls it when the server has it with this
# contract number in its description (PROVSTREAM_NEO4J_PROCEDURE); the number changes whenever the
# batch it takes does.
PROCEDURE_NAME: Final = "provstream.writeBatch"
PROCEDURE_CONTRACT: Final = "contract 2"
WRITE_BATCH_PROCEDURE: Final[LiteralString] = "CALL provstream.writeBatch($batch)"
FIND_PROCEDURE: Final[LiteralString] = (
    "SHOW PROCEDURES YIELD name, description WHERE name = $name RETURN description"
)

# The relationship types WRITE_BATCH merges (one CALL each; a row's key of that name lists them).
RELATIONSHIP_TYPES: Final = ("wasDerivedFrom", "wasGeneratedBy", "selectedEdge", "LINK")

# -- bulk rebuild (connectors/bulk.py) ----------------------------------------

COUNT_NODES: Final[LiteralString] = "MATCH (n) RETURN count(n) AS nodes"

# CSV cannot carry an empty list (an empty field is no property): set after the import. A node
# holds steps exactly when a status was written to it, and then a missingSteps list (rows.write_rows
# sets the five status fields together); the importer leaves the empty ones absent. So the nodes with
# steps and no missingSteps are the ones that held []: found by one label scan, in transactions of
# 10,000, not by a seek per IRI. Those already set count too (a retry after a lost connection), and
# the caller checks the count against the IRIs it knows of.
SET_EMPTY_MISSING_STEPS: Final[LiteralString] = """
MATCH (n:Resource) WHERE n.steps IS NOT NULL AND (n.missingSteps IS NULL OR n.missingSteps = [])
CALL (n) { SET n.missingSteps = [] } IN TRANSACTIONS OF 10000 ROWS
RETURN count(n) AS set
"""

# -- read ---------------------------------------------------------------------

FIND_QUESTION: Final[LiteralString] = """
MATCH (q:Resource {iri: $iri})
WHERE q.user = $user AND q.collection = $collection AND q.graph = $graph
RETURN q.session AS session, q.mechanism AS mechanism
"""

_NODE_TRIPLES_TAIL: Final[LiteralString] = """
OPTIONAL MATCH (n)-[r]->(o:Resource)
WHERE r.graph = $graph
WITH n, collect(CASE WHEN r IS NULL THEN null ELSE {type: type(r), predicate: r.predicate, o: o.iri} END) AS rels
RETURN properties(n) AS props, rels
"""

SESSION_NODES: Final[LiteralString] = """
MATCH (n:Resource {session: $session})
WHERE n.user = $user AND n.collection = $collection AND n.graph = $graph AND n.mechanism = $mechanism
""" + _NODE_TRIPLES_TAIL

SCOPE_NODES: Final[LiteralString] = """
MATCH (n:Resource {user: $user, collection: $collection})
WHERE n.graph = $graph
""" + _NODE_TRIPLES_TAIL

# -- delete (in batches, one transaction per batch) ---------------------------

DELETE_ALL_BATCH: Final[LiteralString] = """
MATCH (n:Resource)
WHERE n.graph = $graph
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
"""

DELETE_SCOPE_BATCH: Final[LiteralString] = """
MATCH (n:Resource)
WHERE n.graph = $graph AND ($user IS NULL OR n.user = $user)
  AND ($collection IS NULL OR n.collection = $collection) AND n.user IS NOT NULL
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
"""

# provstream erase: the sessions of a user [collection] [session], then their nodes, in batches.
ERASE_SESSIONS: Final[LiteralString] = """
MATCH (n:Resource)
WHERE n.graph = $graph AND n.user = $user AND ($collection IS NULL OR n.collection = $collection)
  AND ($session IS NULL OR n.session = $session) AND n.session IS NOT NULL
RETURN DISTINCT n.user AS user, n.collection AS collection, n.session AS session
"""

ERASE_BATCH: Final[LiteralString] = """
MATCH (n:Resource)
WHERE n.graph = $graph AND n.user = $user AND ($collection IS NULL OR n.collection = $collection)
  AND ($session IS NULL OR n.session = $session)
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
"""

# Nodes only ever referenced as objects lose their last relationship with their scope.
DELETE_ORPHANS_BATCH: Final[LiteralString] = """
MATCH (n:Resource)
WHERE n.graph = $graph AND n.user IS NULL AND NOT (n)--()
WITH n LIMIT $limit
DELETE n
RETURN count(*) AS deleted
"""


# -- the read side ----------------------------------------------------------
# The read side's Cypher, as constants (values are always parameters).
#
# A session's Question node is the node that carries its status (the sink sets
# ``status``, ``steps``, ... and the scope on it, even before the question step
# itself arrived). A GraphRAG/DocRAG session is a *sub-trace* when an agent
# Analysis in the same scope ``wasDerivedFrom`` its Synthesis; the listing nests
# it under that agent session instead of showing it at the top level.

# Filters ($status, $mechanism, $since) are null when not asked for; with a type, that type's
# sub-traces are listed on their own too.
LIST_TRACES: Final[LiteralString] = """
MATCH (q:Resource)
WHERE q.user = $user AND q.collection = $collection AND q.graph = $graph AND q.status IS NOT NULL
  AND ($status IS NULL OR q.status = $status)
  AND ($mechanism IS NULL OR q.mechanism = $mechanism)
  AND ($since IS NULL OR q.startedAtTime >= datetime($since))
  AND ($mechanism IS NOT NULL OR NOT EXISTS {
    MATCH (s:Resource {session: q.session})<-[:wasDerivedFrom]-(caller:Analysis)
    WHERE (s:Synthesis OR s:Conclusion) AND s.mechanism = q.mechanism AND s.user = q.user
      AND s.collection = q.collection AND caller.user = q.user AND caller.collection = q.collection
      AND NOT (caller.session = q.session AND caller.mechanism = q.mechanism)
  })
WITH q
ORDER BY q.startedAtTime IS NULL, q.startedAtTime DESC, q.iri
LIMIT $limit
RETURN q.iri AS iri, q.session AS session, labels(q) AS labels, q.mechanism AS mechanism,
       q.query AS query, q.startedAtTime AS time, q.steps AS steps, q.status AS status,
       COLLECT {
         MATCH (a:Resource {session: q.session})-[:wasDerivedFrom]->(s:Resource)
         WHERE a:Analysis AND a.mechanism = q.mechanism AND a.user = q.user AND a.collection = q.collection
           AND (s:Synthesis OR s:Conclusion) AND s.user = q.user AND s.collection = q.collection
           AND NOT (s.session = q.session AND s.mechanism = q.mechanism)
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

# provstream check: the scope's sessions that are still open or concluded with missing steps.
CHECK_SESSIONS: Final[LiteralString] = """
MATCH (q:Resource)
WHERE q.user = $user AND q.collection = $collection AND q.graph = $graph AND q.status IN $statuses
RETURN q.iri AS iri, q.session AS session, q.mechanism AS mechanism, q.query AS query,
       q.startedAtTime AS time, q.status AS status, q.steps AS steps, q.expectedSteps AS expected,
       q.lateSteps AS late, q.missingSteps AS missing
ORDER BY q.iri
"""

SESSION_LINEAGE: Final[LiteralString] = """
MATCH (n:Resource {session: $session})
WHERE n.user = $user AND n.collection = $collection AND n.graph = $graph AND n.mechanism = $mechanism
  AND (n.eventOffset IS NOT NULL OR n.triplesOffset IS NOT NULL)
RETURN n.iri AS iri, n.eventPartition AS eventPartition, n.eventOffset AS eventOffset,
       n.triplesPartition AS triplesPartition, n.triplesOffset AS triplesOffset
ORDER BY n.iri
"""
