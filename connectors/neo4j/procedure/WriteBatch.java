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
 * The batch (contract 2, rows.py procedure_batch): {keys: [property key names], labels: [label
 * names], strings: [texts many rows share], rows: [row, ...]}, one row per IRI, a list by position
 * (trailing nulls left off; "s" marks a string-table index, "k" a key index, "l" a label index):
 *   0 iri, 1 graph (s; an IRI only ever an object), 2 props [k, value, ...], 3 scope props [k, s, ...],
 *   4 labels [l, ...], 5 types [s, ...], 6 chunks [..], 7 extra [..] (5-7 unioned into types,
 *   selectedChunk, extraLiterals), 8 startedAtTime (ISO text, a DATETIME), 9 status [status, steps,
 *   expectedSteps, lateSteps, missingSteps] (written when steps is not below the node's),
 *   10 lineage [eventPartition, eventOffset, triplesPartition, triplesOffset] (each kept once set),
 *   11 relationships [type (0-3 of REL_TYPES), end, graph (s), predicate, ...], end the index of a
 *   row of this batch or an IRI (merged after every node).
 * Each name and shared text is sent once per batch, and a relationship's end node in the batch is
 * not looked up again. Where a position takes an index, a text is taken too.
 * Contract 1, {rows: [{iri, graph, props {..}, labels [..], types, chunks, extra, startedAtTime,
 * status, steps, ..., lineage {..}, wasDerivedFrom [{o, graph[, predicate]}], ...}]} (write_rows's
 * maps, as the Cypher statement takes them), is turned into contract 2 first.
 * The contract number in the description changes whenever the batch does (cypher.py PROCEDURE_CONTRACT).
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
import org.neo4j.values.storable.Values;
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
    /** A row's positions (contract 2). */
    static final int IRI = 0, GRAPH = 1, PROPS = 2, SCOPE = 3, LABELS = 4, TYPES = 5, CHUNKS = 6, EXTRA = 7,
            STARTED = 8, STATUS_AT = 9, LINEAGE_AT = 10, RELS = 11, POSITIONS = 12;
    /** Cypher's datetime() of a text without a zone uses db.temporal.timezone, UTC unless configured. */
    static final Supplier<ZoneId> UTC = () -> ZoneOffset.UTC;

    /**
     * Write one batch in the caller's transaction.
     *
     * @param batch {keys, labels, strings, rows} (contract 2, rows.py procedure_batch), or {rows}
     *     of write_rows's maps (contract 1).
     * Example: CALL provstream.writeBatch({keys: [], labels: [], strings: [], rows: [['urn:x']]})
     */
    @Procedure(name = "provstream.writeBatch", mode = Mode.WRITE)
    @Description("provstream.writeBatch({keys, labels, strings, rows}): provstream's batch write, contract 2")
    public void writeBatch(@Name("batch") AnyValue batch) throws KernelException {
        if (!(batch instanceof MapValue map) || !(map.get("rows") instanceof ListValue rows)) {
            throw new IllegalArgumentException("provstream.writeBatch takes {keys, labels, strings, rows}");
        }
        if (rows.isEmpty()) {
            return;
        }
        if (map.get("keys") == NoValue.NO_VALUE) {
            map = Maps.batch(rows);
            rows = (ListValue) map.get("rows");
        }
        if (!(map.get("keys") instanceof ListValue keys) || !(map.get("labels") instanceof ListValue labels)
                || !(map.get("strings") instanceof ListValue strings)) {
            throw new IllegalArgumentException("provstream.writeBatch takes {keys, labels, strings, rows}");
        }
        try (Writer writer = new Writer(((InternalTransaction) tx).kernelTransaction())) {
            writer.write(keys, labels, strings, rows);
        }
    }

    private static int index(AnyValue value) {
        return (int) ((NumberValue) value).longValue();
    }

    private static AnyValue at(ListValue row, int i) {
        return i < row.intSize() ? row.value(i) : NoValue.NO_VALUE;
    }

    /** Contract 1's rows (maps) as a contract 2 batch, with texts in place of string indexes. */
    static final class Maps {
        private final Map<String, Integer> keys = new HashMap<>();
        private final Map<String, Integer> labels = new HashMap<>();
        private final List<AnyValue> keyNames = new ArrayList<>();
        private final List<AnyValue> labelNames = new ArrayList<>();

        static MapValue batch(ListValue rows) {
            Maps maps = new Maps();
            Map<AnyValue, Integer> rowOf = new HashMap<>();
            int i = 0;
            for (AnyValue row : rows) {
                rowOf.putIfAbsent(((MapValue) row).get("iri"), i++);
            }
            List<AnyValue> out = new ArrayList<>();
            for (AnyValue row : rows) {
                out.add(maps.row((MapValue) row, rowOf));
            }
            return VirtualValues.map(new String[] {"keys", "labels", "strings", "rows"}, new AnyValue[] {
                VirtualValues.fromList(maps.keyNames), VirtualValues.fromList(maps.labelNames),
                VirtualValues.EMPTY_LIST, VirtualValues.fromList(out)});
        }

        private static AnyValue number(Map<String, Integer> table, List<AnyValue> names, String name) {
            return Values.intValue(table.computeIfAbsent(name, n -> {
                names.add(Values.stringValue(n));
                return names.size() - 1;
            }));
        }

        private ListValue row(MapValue row, Map<AnyValue, Integer> rowOf) {
            AnyValue[] out = new AnyValue[POSITIONS];
            Arrays.fill(out, NoValue.NO_VALUE);
            out[IRI] = row.get("iri");
            out[GRAPH] = row.get("graph");
            if (row.get("props") instanceof MapValue props) {
                List<AnyValue> flat = new ArrayList<>();
                props.foreach((name, value) -> {
                    flat.add(number(keys, keyNames, name));
                    flat.add(value);
                });
                out[PROPS] = VirtualValues.fromList(flat);
            }
            if (row.get("labels") instanceof ListValue names) {
                List<AnyValue> flat = new ArrayList<>();
                for (AnyValue name : names) {
                    flat.add(number(labels, labelNames, ((TextValue) name).stringValue()));
                }
                out[LABELS] = VirtualValues.fromList(flat);
            }
            out[TYPES] = row.get("types");
            out[CHUNKS] = row.get("chunks");
            out[EXTRA] = row.get("extra");
            out[STARTED] = row.get("startedAtTime");
            if (row.get(STATUS[STEPS]) != NoValue.NO_VALUE) {
                AnyValue[] status = new AnyValue[STATUS.length];
                for (int s = 0; s < STATUS.length; s++) {
                    status[s] = row.get(STATUS[s]);
                }
                out[STATUS_AT] = VirtualValues.list(status);
            }
            if (row.get("lineage") instanceof MapValue line) {
                AnyValue[] lineage = new AnyValue[LINEAGE.length];
                for (int l = 0; l < LINEAGE.length; l++) {
                    lineage[l] = line.get(LINEAGE[l]);
                }
                out[LINEAGE_AT] = VirtualValues.list(lineage);
            }
            List<AnyValue> rels = new ArrayList<>();
            for (int t = 0; t < REL_TYPES.length; t++) {
                if (row.get(REL_TYPES[t]) instanceof ListValue list) {
                    for (AnyValue item : list) {
                        MapValue rel = (MapValue) item;
                        Integer end = rowOf.get(rel.get("o"));
                        rels.add(Values.intValue(t));
                        rels.add(end != null ? Values.intValue(end) : rel.get("o"));
                        rels.add(rel.get("graph"));
                        rels.add(t == LINK ? rel.get("predicate") : NoValue.NO_VALUE);
                    }
                }
            }
            if (!rels.isEmpty()) {
                out[RELS] = VirtualValues.fromList(rels);
            }
            return VirtualValues.list(out);
        }
    }

    /** One batch's write: its tokens, tables, cursors and the properties of the node being written. */
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
        private final MutableIntObjectMap<Value> before = new IntObjectHashMap<>();
        private final MutableIntObjectMap<Value> changes = new IntObjectHashMap<>();
        private final MutableIntSet added = new IntHashSet();
        private TokenSet labels = TokenSet.NONE;
        private final int resource, iri, graph, types, chunks, extra, started, predicate;
        private final int[] status = new int[STATUS.length];
        private final int[] lineage = new int[LINEAGE.length];
        private final int[] relTypes = new int[REL_TYPES.length];
        private int[] keyTable;
        private int[] labelTable;
        private Value[] strings;
        private long[] ids;

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
            iri = tokens.propertyKeyGetOrCreateForName("iri");
            graph = tokens.propertyKeyGetOrCreateForName("graph");
            types = tokens.propertyKeyGetOrCreateForName("types");
            chunks = tokens.propertyKeyGetOrCreateForName("selectedChunk");
            extra = tokens.propertyKeyGetOrCreateForName("extraLiterals");
            started = tokens.propertyKeyGetOrCreateForName("startedAtTime");
            predicate = tokens.propertyKeyGetOrCreateForName("predicate");
            for (int i = 0; i < STATUS.length; i++) {
                status[i] = tokens.propertyKeyGetOrCreateForName(STATUS[i]);
            }
            for (int i = 0; i < LINEAGE.length; i++) {
                lineage[i] = tokens.propertyKeyGetOrCreateForName(LINEAGE[i]);
            }
            Arrays.fill(relTypes, -1);
        }

        /** The tables' tokens first, then every node, then every relationship (an end node may be a later row's). */
        void write(ListValue keys, ListValue labelNames, ListValue shared, ListValue rows) throws KernelException {
            keyTable = new int[keys.intSize()];
            for (int k = 0; k < keyTable.length; k++) {
                keyTable[k] = tokens.propertyKeyGetOrCreateForName(((TextValue) keys.value(k)).stringValue());
            }
            labelTable = new int[labelNames.intSize()];
            for (int k = 0; k < labelTable.length; k++) {
                labelTable[k] = tokens.labelGetOrCreateForName(((TextValue) labelNames.value(k)).stringValue());
            }
            strings = new Value[shared.intSize()];
            for (int k = 0; k < strings.length; k++) {
                strings[k] = (Value) shared.value(k);
            }
            int size = rows.intSize();
            ids = new long[size];
            ListValue[] written = new ListValue[size];
            int i = 0;
            for (AnyValue row : rows) {
                written[i] = (ListValue) row;
                ids[i] = node(written[i]);
                i++;
            }
            for (i = 0; i < size; i++) {
                relationships(ids[i], written[i]);
            }
        }

        /** A string-table index's text, or the text itself. */
        private AnyValue text(AnyValue value) {
            return value instanceof NumberValue n ? strings[(int) n.longValue()] : value;
        }

        /** A list of string-table indexes (or texts) as the list of their texts. */
        private AnyValue texts(AnyValue value) {
            if (!(value instanceof ListValue list)) {
                return value;
            }
            AnyValue[] out = new AnyValue[list.intSize()];
            for (int j = 0; j < out.length; j++) {
                out[j] = text(list.value(j));
            }
            return VirtualValues.list(out);
        }

        /** MERGE (n:Resource {iri}): the unique index's locking seek, as Cypher's MERGE takes. */
        private long seekIri(Value value) throws KernelException {
            return read.lockingNodeUniqueIndexSeek(iriIndex, seek, PropertyIndexQuery.exact(iri, value));
        }

        private long node(ListValue row) throws KernelException {
            Value iriValue = (Value) row.value(IRI);
            long id = seekIri(iriValue);
            boolean created = id == StatementConstants.NO_SUCH_NODE;
            changes.clear();
            added.clear();
            if (created) {  // ON CREATE SET
                before.clear();
                labels = TokenSet.NONE;
                id = write.nodeCreateWithLabels(new int[] {resource});
                changes.put(iri, iriValue);
                setIfPresent(graph, text(at(row, GRAPH)));
                setIfPresent(types, texts(at(row, TYPES)));
                setIfPresent(chunks, at(row, CHUNKS));
                setIfPresent(extra, at(row, EXTRA));
            } else {  // ON MATCH SET: the lists unioned, in their order
                load(id);
                union(types, texts(at(row, TYPES)));
                union(chunks, at(row, CHUNKS));
                union(extra, at(row, EXTRA));
            }
            if (at(row, PROPS) instanceof ListValue flat) {  // SET n += row.props
                for (int p = 0; p + 1 < flat.intSize(); p += 2) {
                    set(keyTable[index(flat.value(p))], flat.value(p + 1));
                }
            }
            if (at(row, SCOPE) instanceof ListValue flat) {  // the props whose texts are in the table
                for (int p = 0; p + 1 < flat.intSize(); p += 2) {
                    set(keyTable[index(flat.value(p))], text(flat.value(p + 1)));
                }
            }
            if (at(row, STARTED) instanceof TextValue text) {
                changes.put(started, DateTimeValue.parse(text, UTC));
            }
            if (at(row, LABELS) instanceof ListValue names) {
                for (AnyValue name : names) {
                    int label = labelTable[index(name)];
                    if (label != resource && !labels.contains(label)) {
                        added.add(label);
                    }
                }
            }
            if (at(row, STATUS_AT) instanceof ListValue st) {  // the status with the most steps wins
                Value old = before(status[STEPS]);
                if (old == NoValue.NO_VALUE
                        || ((NumberValue) old).doubleValue() <= ((NumberValue) st.value(STEPS)).doubleValue()) {
                    for (int s = 0; s < STATUS.length; s++) {
                        set(status[s], st.value(s));
                    }
                }
            }
            if (at(row, LINEAGE_AT) instanceof ListValue line) {  // each offset kept once set
                for (int l = 0; l < LINEAGE.length; l++) {
                    AnyValue value = line.value(l);
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
        private void relationships(long id, ListValue row) throws KernelException {
            if (!(at(row, RELS) instanceof ListValue flat)) {
                return;
            }
            for (int r = 0; r + 3 < flat.intSize(); r += 4) {
                int t = index(flat.value(r));
                if (relTypes[t] < 0) {
                    relTypes[t] = tokens.relationshipTypeGetOrCreateForName(REL_TYPES[t]);
                }
                AnyValue end = flat.value(r + 1);  // a row of this batch was seeked (and locked) already
                long other = end instanceof NumberValue n ? ids[(int) n.longValue()] : seekIri((Value) end);
                if (other == StatementConstants.NO_SUCH_NODE) {
                    continue;  // MATCH found no end node: nothing to merge
                }
                AnyValue pred = t == LINK ? flat.value(r + 3) : NoValue.NO_VALUE;
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
                AnyValue g = text(flat.value(r + 2));
                if (g == NoValue.NO_VALUE) {
                    write.relationshipRemoveProperty(found, graph);
                } else {
                    write.relationshipSetProperty(found, graph, (Value) g);
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
