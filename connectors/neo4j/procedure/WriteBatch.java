/*
 * provstream.writeBatch: the sink's batch write as a Neo4j procedure.
 *
 * It applies the rows of provstream's connectors/neo4j/rows.py write_rows exactly as the Cypher
 * statement connectors/neo4j/cypher.py WRITE_BATCH does, through Neo4j's kernel API instead of the
 * Cypher runtime, and so gives the same graph for less of the server's CPU (BENCHMARKS.md). The
 * sink uses it when the server has it (PROVSTREAM_NEO4J_PROCEDURE=auto) and the statement
 * otherwise; tests/integration/test_procedure.py holds the two to the same graph.
 *
 * deploy/neo4j.sh compiles this file against the server's own jars and installs the jar in the
 * server's plugins directory. On another server: javac --release 17 -cp '<neo4j>/lib/*' -d out
 * WriteBatch.java && jar cf provstream-procedure.jar -C out . , then copy the jar to its plugins/.
 *
 * The rows (one per IRI, every key optional but iri):
 *   iri, graph (an IRI only ever an object), props {name: value}, labels [..], types, chunks, extra
 *   [..] (unioned into types, selectedChunk, extraLiterals), startedAtTime (ISO text, a DATETIME),
 *   status, steps, expectedSteps, lateSteps, missingSteps (written when steps is not below the
 *   node's), lineage {eventPartition, eventOffset, triplesPartition, triplesOffset} (each kept once
 *   set), and per relationship type a list of {o, graph[, predicate]} (merged after every node).
 * The contract number in the description changes whenever they do (cypher.py PROCEDURE_CONTRACT).
 */
package org.provstream.neo4j;

import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import org.eclipse.collections.api.map.primitive.MutableIntObjectMap;
import org.eclipse.collections.api.set.primitive.MutableIntSet;
import org.eclipse.collections.impl.factory.primitive.IntSets;
import org.eclipse.collections.impl.map.mutable.primitive.IntObjectHashMap;
import org.eclipse.collections.impl.set.mutable.primitive.IntHashSet;
import org.neo4j.exceptions.KernelException;
import org.neo4j.graphdb.Direction;
import org.neo4j.graphdb.Transaction;
import org.neo4j.internal.kernel.api.NodeCursor;
import org.neo4j.internal.kernel.api.NodeValueIndexCursor;
import org.neo4j.internal.kernel.api.PropertyCursor;
import org.neo4j.internal.kernel.api.PropertyIndexQuery;
import org.neo4j.internal.kernel.api.Read;
import org.neo4j.internal.kernel.api.RelationshipTraversalCursor;
import org.neo4j.internal.kernel.api.TokenSet;
import org.neo4j.internal.kernel.api.TokenWrite;
import org.neo4j.internal.kernel.api.Write;
import org.neo4j.internal.schema.IndexDescriptor;
import org.neo4j.io.pagecache.context.CursorContext;
import org.neo4j.kernel.api.KernelTransaction;
import org.neo4j.kernel.api.StatementConstants;
import org.neo4j.kernel.impl.coreapi.InternalTransaction;
import org.neo4j.memory.MemoryTracker;
import org.neo4j.procedure.Context;
import org.neo4j.procedure.Description;
import org.neo4j.procedure.Mode;
import org.neo4j.procedure.Name;
import org.neo4j.procedure.Procedure;
import org.neo4j.storageengine.api.PropertySelection;
import org.neo4j.storageengine.api.RelationshipSelection;
import org.neo4j.values.AnyValue;
import org.neo4j.values.storable.ArrayValue;
import org.neo4j.values.storable.DateTimeValue;
import org.neo4j.values.storable.NoValue;
import org.neo4j.values.storable.NumberValue;
import org.neo4j.values.storable.TextValue;
import org.neo4j.values.storable.Value;
import org.neo4j.values.virtual.ListValue;
import org.neo4j.values.virtual.MapValue;
import org.neo4j.values.virtual.VirtualValues;

public class WriteBatch {
    @Context
    public Transaction tx;

    /** The unique index of the iri constraint (cypher.py SCHEMA). */
    static final String IRI_INDEX = "resource_iri";
    static final String[] REL_TYPES = {"wasDerivedFrom", "wasGeneratedBy", "selectedEdge", "LINK"};
    static final int LINK = 3;
    static final String[] STATUS = {"status", "steps", "expectedSteps", "lateSteps", "missingSteps"};
    static final int STEPS = 1;
    static final String[] LINEAGE = {"eventPartition", "eventOffset", "triplesPartition", "triplesOffset"};
    /** Cypher's datetime() of a text without a zone uses db.temporal.timezone, UTC unless configured. */
    static final Supplier<ZoneId> UTC = () -> ZoneOffset.UTC;

    /**
     * Write one batch in the caller's transaction.
     *
     * @param batch {rows: [...]}, the map the sink sends as $batch (rows.py batch_rows).
     * Example: CALL provstream.writeBatch({rows: [{iri: 'urn:x', props: {}, labels: []}]})
     */
    @Procedure(name = "provstream.writeBatch", mode = Mode.WRITE)
    @Description("provstream.writeBatch({rows: [...]}): provstream's batch write, contract 1")
    public void writeBatch(@Name("batch") AnyValue batch) throws KernelException {
        if (!(batch instanceof MapValue map) || !(map.get("rows") instanceof ListValue rows)) {
            throw new IllegalArgumentException("provstream.writeBatch takes {rows: [...]}");
        }
        if (rows.isEmpty()) {
            return;
        }
        try (Writer writer = new Writer(((InternalTransaction) tx).kernelTransaction())) {
            writer.write(rows);
        }
    }

    /** One batch's write: its tokens, cursors and the properties of the node being written. */
    private static final class Writer implements AutoCloseable {
        private final KernelTransaction ktx;
        private final Read read;
        private final Write write;
        private final TokenWrite tokens;
        private final IndexDescriptor iriIndex;
        private final NodeValueIndexCursor seek;
        private final NodeCursor node;
        private final PropertyCursor props;
        private final RelationshipTraversalCursor rels;
        private final Map<String, Integer> keyIds = new HashMap<>();
        private final Map<String, Integer> labelIds = new HashMap<>();
        private final Map<Integer, Value> before = new HashMap<>();
        private final Map<AnyValue, Long> batchIds = new HashMap<>();
        private final MutableIntObjectMap<Value> changes = new IntObjectHashMap<>();
        private final MutableIntSet added = new IntHashSet();
        private TokenSet labels = TokenSet.NONE;
        private final int resource, iri, graph, types, chunks, extra, started, predicate;
        private final int[] status = new int[STATUS.length];
        private final int[] lineage = new int[LINEAGE.length];
        private final int[] relTypes = new int[REL_TYPES.length];

        Writer(KernelTransaction ktx) throws KernelException {
            this.ktx = ktx;
            read = ktx.dataRead();
            write = ktx.dataWrite();
            tokens = ktx.tokenWrite();
            iriIndex = ktx.schemaRead().indexGetForName(IRI_INDEX);
            if (iriIndex == IndexDescriptor.NO_INDEX) {
                throw new IllegalStateException("no index " + IRI_INDEX + ": the store's setup() creates it");
            }
            CursorContext context = ktx.cursorContext();
            MemoryTracker memory = ktx.memoryTracker();
            seek = ktx.cursors().allocateNodeValueIndexCursor(context, memory);
            node = ktx.cursors().allocateNodeCursor(context, memory);
            props = ktx.cursors().allocatePropertyCursor(context, memory);
            rels = ktx.cursors().allocateRelationshipTraversalCursor(context, memory);
            resource = tokens.labelGetOrCreateForName("Resource");
            iri = key("iri");
            graph = key("graph");
            types = key("types");
            chunks = key("selectedChunk");
            extra = key("extraLiterals");
            started = key("startedAtTime");
            predicate = key("predicate");
            for (int i = 0; i < STATUS.length; i++) {
                status[i] = key(STATUS[i]);
            }
            for (int i = 0; i < LINEAGE.length; i++) {
                lineage[i] = key(LINEAGE[i]);
            }
            Arrays.fill(relTypes, -1);
        }

        /** Every node first, then every relationship (an end node may be a later row's). */
        void write(ListValue rows) throws KernelException {
            int size = rows.intSize();
            long[] ids = new long[size];
            MapValue[] written = new MapValue[size];
            int i = 0;
            for (AnyValue row : rows) {
                written[i] = (MapValue) row;
                ids[i] = node(written[i]);
                batchIds.put(written[i].get("iri"), ids[i]);
                i++;
            }
            for (i = 0; i < size; i++) {
                relationships(ids[i], written[i]);
            }
        }

        private int key(String name) throws KernelException {
            Integer id = keyIds.get(name);
            if (id == null) {
                id = tokens.propertyKeyGetOrCreateForName(name);
                keyIds.put(name, id);
            }
            return id;
        }

        private int label(String name) throws KernelException {
            Integer id = labelIds.get(name);
            if (id == null) {
                id = tokens.labelGetOrCreateForName(name);
                labelIds.put(name, id);
            }
            return id;
        }

        /** MERGE (n:Resource {iri}): the unique index's locking seek, as Cypher's MERGE takes. */
        private long seekIri(Value value) throws KernelException {
            return read.lockingNodeUniqueIndexSeek(iriIndex, seek, PropertyIndexQuery.exact(iri, value));
        }

        private long node(MapValue row) throws KernelException {
            Value iriValue = (Value) row.get("iri");
            long id = seekIri(iriValue);
            boolean created = id == StatementConstants.NO_SUCH_NODE;
            changes.clear();
            added.clear();
            if (created) {  // ON CREATE SET
                before.clear();
                labels = TokenSet.NONE;
                id = write.nodeCreateWithLabels(new int[] {resource});
                changes.put(iri, iriValue);
                setIfPresent(graph, row.get("graph"));
                setIfPresent(types, row.get("types"));
                setIfPresent(chunks, row.get("chunks"));
                setIfPresent(extra, row.get("extra"));
            } else {  // ON MATCH SET: the lists unioned, in their order
                load(id);
                union(types, row.get("types"));
                union(chunks, row.get("chunks"));
                union(extra, row.get("extra"));
            }
            if (row.get("props") instanceof MapValue map) {  // SET n += row.props
                map.foreach((name, value) -> set(key(name), value));
            }
            if (row.get("startedAtTime") instanceof TextValue text) {
                changes.put(started, DateTimeValue.parse(text, UTC));
            }
            if (row.get("labels") instanceof ListValue names) {
                for (AnyValue name : names) {
                    int label = label(((TextValue) name).stringValue());
                    if (label != resource && !labels.contains(label)) {
                        added.add(label);
                    }
                }
            }
            AnyValue steps = row.get(STATUS[STEPS]);
            if (steps != NoValue.NO_VALUE) {  // the status with the most steps wins
                Value old = before(status[STEPS]);
                if (old == NoValue.NO_VALUE
                        || ((NumberValue) old).doubleValue() <= ((NumberValue) steps).doubleValue()) {
                    for (int s = 0; s < STATUS.length; s++) {
                        set(status[s], row.get(STATUS[s]));
                    }
                }
            }
            if (row.get("lineage") instanceof MapValue line) {  // each offset kept once set
                for (int l = 0; l < LINEAGE.length; l++) {
                    AnyValue value = line.get(LINEAGE[l]);
                    if (value != NoValue.NO_VALUE && before(lineage[l]) == NoValue.NO_VALUE) {
                        changes.put(lineage[l], (Value) value);
                    }
                }
            }
            if (!changes.isEmpty() || !added.isEmpty()) {  // one kernel call: one lock, one read, the index updates
                write.nodeApplyChanges(id, added, IntSets.immutable.empty(), changes);
            }
            return id;
        }

        /** The node's labels and properties as the transaction sees them, read once per row. */
        private void load(long id) {
            before.clear();
            labels = TokenSet.NONE;
            read.singleNode(id, node);
            if (!node.next()) {
                return;
            }
            labels = node.labels();
            node.properties(props, PropertySelection.ALL_PROPERTIES);
            while (props.next()) {
                before.put(props.propertyKey(), props.propertyValue());
            }
        }

        private Value before(int key) {
            Value value = before.get(key);
            return value == null ? NoValue.NO_VALUE : value;
        }

        private static Value storable(AnyValue value) {
            return value instanceof ListValue list ? list.toStorableArray() : (Value) value;
        }

        /** SET n.key = value (null removes it), left out when the node holds that value already. */
        private void set(int key, AnyValue value) {
            Value old = before(key);
            if (value == NoValue.NO_VALUE) {
                if (old != NoValue.NO_VALUE || changes.containsKey(key)) {
                    changes.put(key, NoValue.NO_VALUE);
                }
                return;
            }
            Value now = storable(value);
            if (!now.equals(old) || changes.containsKey(key)) {
                changes.put(key, now);
            }
        }

        private void setIfPresent(int key, AnyValue value) {
            if (value != NoValue.NO_VALUE) {
                changes.put(key, storable(value));
            }
        }

        /** n.key = coalesce(n.key, []) + [x IN list WHERE NOT x IN coalesce(n.key, [])]. */
        private void union(int key, AnyValue value) {
            if (!(value instanceof ListValue list)) {
                return;
            }
            Value old = before(key);
            if (old == NoValue.NO_VALUE) {
                changes.put(key, list.toStorableArray());
                return;
            }
            ArrayValue array = (ArrayValue) old;
            List<AnyValue> merged = null;
            for (AnyValue item : list) {
                boolean known = false;
                for (int j = 0; j < array.intSize() && !known; j++) {
                    known = array.value(j).equals(item);
                }
                if (!known) {
                    if (merged == null) {
                        merged = new ArrayList<>();
                        for (int j = 0; j < array.intSize(); j++) {
                            merged.add(array.value(j));
                        }
                    }
                    merged.add(item);
                }
            }
            if (merged != null) {
                changes.put(key, VirtualValues.fromList(merged).toStorableArray());
            }
        }

        /** MATCH (o:Resource {iri: rel.o}) MERGE (n)-[r:TYPE {predicate}]->(o) SET r.graph = rel.graph. */
        private void relationships(long id, MapValue row) throws KernelException {
            for (int t = 0; t < REL_TYPES.length; t++) {
                if (!(row.get(REL_TYPES[t]) instanceof ListValue list)) {
                    continue;
                }
                if (relTypes[t] < 0) {
                    relTypes[t] = tokens.relationshipTypeGetOrCreateForName(REL_TYPES[t]);
                }
                for (AnyValue item : list) {
                    MapValue rel = (MapValue) item;
                    AnyValue end = rel.get("o");
                    Long known = batchIds.get(end);  // a node of this batch: seeked (and locked) already
                    long other = known != null ? known : seekIri((Value) end);
                    if (other == StatementConstants.NO_SUCH_NODE) {
                        continue;  // MATCH found no end node: nothing to merge
                    }
                    AnyValue pred = t == LINK ? rel.get("predicate") : NoValue.NO_VALUE;
                    long found = find(id, relTypes[t], other, pred);
                    if (found == StatementConstants.NO_SUCH_RELATIONSHIP) {
                        ktx.locks().acquireExclusiveNodeLock(id, other);  // then look again, as MERGE does
                        found = find(id, relTypes[t], other, pred);
                        if (found == StatementConstants.NO_SUCH_RELATIONSHIP) {
                            found = write.relationshipCreate(id, relTypes[t], other);
                            if (pred != NoValue.NO_VALUE) {
                                write.relationshipSetProperty(found, predicate, (Value) pred);
                            }
                        }
                    }
                    AnyValue g = rel.get("graph");
                    if (g == NoValue.NO_VALUE) {
                        write.relationshipRemoveProperty(found, graph);
                    } else {
                        write.relationshipSetProperty(found, graph, (Value) g);
                    }
                }
            }
        }

        private long find(long id, int type, long other, AnyValue pred) {
            read.singleNode(id, node);
            if (!node.next()) {
                return StatementConstants.NO_SUCH_RELATIONSHIP;
            }
            node.relationships(rels, RelationshipSelection.selection(type, Direction.OUTGOING));
            while (rels.next()) {
                if (rels.otherNodeReference() != other) {
                    continue;
                }
                if (pred == NoValue.NO_VALUE) {
                    return rels.relationshipReference();
                }
                rels.properties(props, PropertySelection.selection(predicate));
                if (props.next() && props.propertyValue().equals(pred)) {
                    return rels.relationshipReference();
                }
            }
            return StatementConstants.NO_SUCH_RELATIONSHIP;
        }

        @Override
        public void close() {
            seek.close();
            node.close();
            props.close();
            rels.close();
        }
    }
}
