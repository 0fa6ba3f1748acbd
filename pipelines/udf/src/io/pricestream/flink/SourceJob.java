package io.pricestream.flink;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * The source side of the feature job, on the JVM in one chained task: Kafka records read as bytes,
 * parsed and validated once ({@link ParseEvent}'s rules) in the deserializer, stamped with their
 * event time and bounded-out-of-orderness watermarks, then split by one function into the valid
 * events (the tile operator's input columns), the inventory state rows and the dead letters with
 * their headers. The SQL it replaces (a raw Kafka table, a lateral parse, two Table/DataStream
 * conversions and three Calcs) cost about three times the CPU per event of this path.
 *
 * <p>The spec is JSON from {@code pipelines.job_specs.source_spec}: where to read, the
 * consumer's properties, the watermark and lateness settings, the contract and the columns.
 */
public final class SourceJob {

    /** Fields the deserializer appends to {@link ParseEvent}'s row. */
    static final int TOPIC = ParseEvent.ARITY;
    static final int PARTITION = TOPIC + 1;
    static final int OFFSET = TOPIC + 2;
    static final int PUBLISH_MS = TOPIC + 3;
    static final int PAYLOAD = TOPIC + 4;
    static final int TS = TOPIC + 5;
    static final int ARITY = TOPIC + 6;

    private static final OutputTag<Row> DLQ = new OutputTag<>("dlq", dlqType());
    private static final OutputTag<Row> INVENTORY = new OutputTag<>("inventory", TileJob.outputType());
    private static final OutputTag<Row> ACCEPTED = new OutputTag<>("accepted", AcceptedEvents.type());

    private final DataStream<Row> valid;
    private final DataStream<Row> inventory;
    private final DataStream<Row> dlq;
    private final DataStream<Row> accepted;

    private SourceJob(DataStream<Row> valid, DataStream<Row> inventory, DataStream<Row> dlq,
                      DataStream<Row> accepted) {
        this.valid = valid;
        this.inventory = inventory;
        this.dlq = dlq;
        this.accepted = accepted;
    }

    /** The valid events, as the tile operator reads them ({@code columns} of the spec, in order). */
    public DataStream<Row> valid() {
        return valid;
    }

    /** One value row of the {@code stay_inventory} view per valid inventory event. */
    public DataStream<Row> inventory() {
        return inventory;
    }

    /** Refused and late records: {@code payload BYTES, headers MAP<STRING, BYTES>}. */
    public DataStream<Row> dlq() {
        return dlq;
    }

    /** Every accepted event as its {@link AcceptedEvents} record ({@code key BYTES, value BYTES}); empty when off. */
    public DataStream<Row> accepted() {
        return accepted;
    }

    /** Type of a dead-letter row. */
    public static TypeInformation<Row> dlqType() {
        return Types.ROW_NAMED(new String[] {"payload", "headers"}, PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO,
            Types.MAP(Types.STRING, PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
    }

    /** Source, parse, watermarks and the split of {@code specJson}, added to {@code env}. */
    public static SourceJob build(StreamExecutionEnvironment env, String specJson) throws IOException {
        SourceSpec spec = SourceSpec.parse(specJson);
        List<String> columns = new ArrayList<>(spec.columns);
        Split split = new Split(spec.allowedLatenessMs, spec.lateReason,
            columns, spec.accepted);  // checks the column names before anything runs

        KafkaSourceBuilder<Row> builder = KafkaSource.<Row>builder()
            .setBootstrapServers(spec.bootstrap)
            .setTopics(spec.topic)
            .setGroupId(spec.groupId)
            .setDeserializer(new Records(spec.contract));
        Properties properties = new Properties();
        properties.putAll(spec.properties);
        builder.setProperties(properties);
        String startup = spec.startup;
        switch (startup) {
            case "earliest-offset": builder.setStartingOffsets(OffsetsInitializer.earliest()); break;
            case "latest-offset": builder.setStartingOffsets(OffsetsInitializer.latest()); break;
            case "group-offsets":
                builder.setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST));
                break;
            default:
                throw new IllegalArgumentException("source spec: startup '" + startup
                    + "', expected earliest-offset, latest-offset or group-offsets");
        }
        if (spec.bounded) {
            builder.setBounded(OffsetsInitializer.latest());
        }

        long lag = spec.outOfOrdernessMs;
        boolean onEvent = "on-event".equals(spec.watermarkEmit);
        WatermarkStrategy<Row> watermarks = WatermarkStrategy.<Row>forGenerator(ctx -> new Lagging(lag, onEvent))
            .withTimestampAssigner((row, previous) -> (Long) row.getField(TS));
        long idle = spec.idleTimeoutMs;
        if (idle > 0) {
            watermarks = watermarks.withIdleness(Duration.ofMillis(idle));
        }
        SingleOutputStreamOperator<Row> valid = env
            .fromSource(builder.build(), watermarks, "events: Kafka source, parse")
            .uid("pricestream-source")
            .process(split, validType(columns))
            .name("events: valid / inventory / dead letters")
            .uid("pricestream-split");
        return new SourceJob(valid, valid.getSideOutput(INVENTORY), valid.getSideOutput(DLQ),
            valid.getSideOutput(ACCEPTED));
    }

    /** Type of a valid row: the SQL types of the columns the job used to select from its {@code valid} view. */
    static TypeInformation<Row> validType(List<String> columns) {
        TypeInformation<?>[] types = new TypeInformation<?>[columns.size()];
        for (int i = 0; i < types.length; i++) {
            types[i] = Column.of(columns.get(i)).type;
        }
        return Types.ROW_NAMED(columns.toArray(new String[0]), types);
    }

    /** The columns a valid row can carry, each computed from the parsed row as the contract's SQL did. */
    enum Column {
        HOTEL_ID(Types.STRING), ROOM_TYPE(Types.STRING), STAY_DATE(Types.STRING), EVENT_TYPE(Types.STRING),
        EVENT_TIME_MS(Types.LONG), SRC_OFFSET(Types.LONG), PUBLISH_MS(Types.LONG), COMPETITOR_ID(Types.STRING),
        RATE(Types.DOUBLE), PRICE_SHOWN(Types.DOUBLE), PRICE_PAID(Types.DOUBLE), ROOMS_LEFT(Types.INT),
        CAPACITY(Types.INT), ROOMS(Types.INT), IS_SEARCH(Types.INT), IS_VIEW(Types.INT), N_BOOKED(Types.INT),
        N_CANCELLED(Types.INT), LEAD_DAYS(Types.DOUBLE);

        final TypeInformation<?> type;

        Column(TypeInformation<?> type) {
            this.type = type;
        }

        static Column of(String name) {
            for (Column c : values()) {
                if (c.name().equalsIgnoreCase(name)) {
                    return c;
                }
            }
            throw new IllegalArgumentException("source spec: column '" + name + "' is not one the source computes, "
                + "expected one of " + java.util.Arrays.toString(values()).toLowerCase(java.util.Locale.ROOT));
        }
    }

    /** Kafka record → {@link ParseEvent}'s row plus topic, partition, offset, publish time, payload, rowtime. */
    static final class Records implements KafkaRecordDeserializationSchema<Row> {
        private static final long serialVersionUID = 1L;
        private final String contract;
        private transient ParseEvent parser;
        private transient EventTime eventTime;

        Records(String contract) {
            this.contract = contract;
        }

        @Override
        public void open(DeserializationSchema.InitializationContext context) throws Exception {
            parser = new ParseEvent();
            parser.configure(contract);
            eventTime = new EventTime();
        }

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
            byte[] payload = record.value();
            Row row = parser.parseRow(payload, ARITY);
            row.setField(TOPIC, record.topic());
            row.setField(PARTITION, record.partition());
            row.setField(OFFSET, record.offset());
            row.setField(PUBLISH_MS, record.timestamp());
            row.setField(PAYLOAD, payload);
            Long ts = (Long) row.getField(8);
            if (ts == null) {  // a refused record: its time as a scan finds it, else the epoch (as the SQL source did)
                ts = eventTime.eval(payload);
            }
            row.setField(TS, ts == null ? 0L : ts);
            out.collect(row);
        }

        @Override
        public TypeInformation<Row> getProducedType() {
            TypeInformation<?>[] types = new TypeInformation<?>[ARITY];
            java.util.Arrays.fill(types, Types.STRING);
            types[7] = Types.LOCAL_DATE;
            types[8] = Types.LONG;
            types[9] = Types.DOUBLE;
            types[10] = Types.DOUBLE;
            types[11] = Types.DOUBLE;
            for (int i = 12; i <= 16; i++) {
                types[i] = Types.INT;
            }
            types[17] = PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO;
            types[PARTITION] = Types.INT;
            types[OFFSET] = Types.LONG;
            types[PUBLISH_MS] = Types.LONG;
            types[PAYLOAD] = PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO;
            types[TS] = Types.LONG;
            return Types.ROW(types);
        }
    }

    /** The greatest event time seen minus the out-of-orderness, as the SQL {@code WATERMARK FOR ts AS ts - X}. */
    static final class Lagging implements WatermarkGenerator<Row> {
        private final long lag;
        private final boolean onEvent;
        private long max = Long.MIN_VALUE;

        Lagging(long lag, boolean onEvent) {
            this.lag = lag;
            this.onEvent = onEvent;
        }

        @Override
        public void onEvent(Row row, long timestamp, WatermarkOutput output) {
            if (timestamp > max) {
                max = timestamp;
                if (onEvent) {
                    output.emitWatermark(new Watermark(max - lag));
                }
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            if (max != Long.MIN_VALUE) {
                output.emitWatermark(new Watermark(max - lag));
            }
        }
    }

    /**
     * Valid events to the main output (and inventory rows to their side output); refused ones and
     * those more than the allowed lateness behind the watermark (whole seconds, as the SQL's
     * {@code TIMESTAMPDIFF(SECOND, ts, CURRENT_WATERMARK(ts))}) to the dead letters.
     */
    static final class Split extends ProcessFunction<Row, Row> {
        private static final long serialVersionUID = 1L;
        private static final long DAY_MS = 86_400_000L;
        private final long latenessS;
        private final String lateReason;
        private final Column[] columns;
        private final AcceptedEvents accepted;

        Split(long latenessMs, String lateReason, List<String> columns, boolean keepAccepted) {
            this.latenessS = latenessMs / 1000;
            this.lateReason = lateReason;
            this.columns = columns.stream().map(Column::of).toArray(Column[]::new);
            this.accepted = keepAccepted ? new AcceptedEvents(columns) : null;
        }

        @Override
        public void processElement(Row row, Context ctx, Collector<Row> out) {
            String reason = (String) row.getField(0);
            long ts = (Long) row.getField(TS);
            long watermark = ctx.timerService().currentWatermark();
            if (reason == null && watermark != Long.MIN_VALUE && (watermark - ts) / 1000 > latenessS) {
                ctx.output(DLQ, deadLetter(row, lateReason, "LateEvent"));
                return;
            }
            if (reason != null) {
                ctx.output(DLQ, deadLetter(row, reason, (String) row.getField(2)));
                return;
            }
            String flags = (String) row.getField(3);
            boolean plausible = flags == null || !flags.contains("price_outlier");
            boolean complimentary = flags != null && flags.contains("complimentary");
            String kind = (String) row.getField(4);
            int rooms = (Integer) row.getField(14);
            Row valid = new Row(columns.length);
            for (int i = 0; i < columns.length; i++) {
                valid.setField(i, value(columns[i], row, kind, rooms, plausible, complimentary));
            }
            out.collect(valid);
            if (accepted != null) {
                ctx.output(ACCEPTED, accepted.record(valid, (String) row.getField(TOPIC), (Integer) row.getField(PARTITION),
                    (byte[]) row.getField(PAYLOAD)));
            }
            if ("inventory".equals(kind)) {
                ctx.output(INVENTORY, inventoryRow(row));
            }
        }

        private static Object value(Column column, Row row, String kind, int rooms, boolean plausible,
                                    boolean complimentary) {
            switch (column) {
                case HOTEL_ID: return row.getField(5);
                case ROOM_TYPE: return row.getField(6);
                case STAY_DATE: return row.getField(7).toString();
                case EVENT_TYPE: return kind;
                case EVENT_TIME_MS: return row.getField(8);
                case SRC_OFFSET: return row.getField(OFFSET);
                case PUBLISH_MS: return row.getField(PUBLISH_MS);
                case COMPETITOR_ID: return row.getField(18);
                case RATE: return plausible ? row.getField(11) : null;
                case PRICE_SHOWN: return plausible ? row.getField(9) : null;
                case PRICE_PAID: return plausible && !complimentary ? row.getField(10) : null;
                case ROOMS_LEFT: return row.getField(12);
                case CAPACITY: return row.getField(13);
                case ROOMS: return rooms;
                case IS_SEARCH: return "search".equals(kind) ? 1 : 0;
                case IS_VIEW: return "view".equals(kind) ? 1 : 0;
                case N_BOOKED: return "booking".equals(kind) ? rooms : 0;
                case N_CANCELLED: return "cancellation".equals(kind) ? rooms : 0;
                case LEAD_DAYS:
                    if (!"search".equals(kind)) {
                        return null;
                    }
                    long stayMs = ((LocalDate) row.getField(7)).atStartOfDay(ZoneOffset.UTC).toInstant().toEpochMilli();
                    return (double) ((stayMs - (Long) row.getField(8)) / DAY_MS);  // whole days, as TIMESTAMPDIFF
                default: throw new IllegalStateException("column " + column);
            }
        }

        /** Inventory is a state: rooms left, capacity and occupancy as of the event, versioned like the tiles. */
        private static Row inventoryRow(Row row) {
            long eventMs = (Long) row.getField(8);
            long offset = (Long) row.getField(OFFSET);
            double left = ((Integer) row.getField(12)).doubleValue();
            double capacity = ((Integer) row.getField(13)).doubleValue();
            double[] features = {left, capacity, 1.0 - left / capacity};  // the view's order: rooms_left, capacity, occupancy
            return Row.of(row.getField(5), row.getField(6), row.getField(7).toString(), "stay_inventory", eventMs,
                eventMs * 1_000_000L + offset % 1_000_000L, row.getField(PUBLISH_MS), features);
        }

        private static Row deadLetter(Row row, String reason, String errorClass) {
            byte[] cut = (byte[]) row.getField(17);
            Map<String, byte[]> headers = new HashMap<>(10);
            headers.put("payload_bytes", utf8(String.valueOf(row.getField(16))));
            headers.put("source_topic", utf8((String) row.getField(TOPIC)));
            headers.put("source_partition", utf8(String.valueOf(row.getField(PARTITION))));
            headers.put("source_offset", utf8(String.valueOf(row.getField(OFFSET))));
            headers.put("error_class", utf8(errorClass));
            Object field = row.getField(1);
            headers.put("error_field", utf8(field == null ? "" : (String) field));
            headers.put("error_message", utf8(reason));
            return Row.of(cut != null ? cut : row.getField(PAYLOAD), headers);
        }

        private static byte[] utf8(String text) {
            return text.getBytes(StandardCharsets.UTF_8);
        }
    }
}
