package io.pricestream.flink;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The sink side of the feature job, as DataStream sinks on the rows the tile operator and the source
 * emit: the value rows to {@code features.v1} and to the online store, the dead letters to the DLQ.
 *
 * <p>No Table conversion stands between the operators and the sinks, and a value row's JSON is
 * written by {@link ValueRows} straight from the row's fields into bytes: the SQL sink it replaces
 * converted each row to the planner's binary format, built a Jackson tree of it and serialized the
 * tree, which cost the sink task about 40% of its time (a JFR profile of 600,000 events). The
 * Kafka sink and the Redis sink are separate tasks, so they run beside each other.
 *
 * <p>The wire form is the one the SQL JSON format wrote, which {@code features/rows.py} parses: a
 * key {@code {"hotel_id","room_type","stay_date","view"}} (null for the keys a hotel view lacks) and
 * a value with the columns of {@link TileJob#OUTPUT_NAMES}, {@code features} as an object of the
 * view's feature names (from the spec); a feature without a value (NaN in the row) is {@code null}.
 */
public final class SinkJob {

    private SinkJob() {}

    /**
     * Adds the job's sinks: {@code values} to {@code features.v1} (and to Redis when
     * {@code redisSpecJson} is not null), {@code deadLetters} to the DLQ, {@code accepted} to the
     * accepted-events topic when the spec names one. {@code specJson} is {@code pipelines.job_specs.sink_spec}.
     */
    public static void attach(DataStream<Row> values, DataStream<Row> deadLetters, DataStream<Row> accepted,
                              String specJson, String redisSpecJson) throws IOException {
        SinkSpec spec = SinkSpec.parse(specJson);
        Properties producer = new Properties();
        producer.putAll(spec.properties);
        Map<String, String[]> names = spec.views;  // each view's features, in order
        values.flatMap(new PerView(spec.groups, names)).returns(TileJob.outputType())
            .name("value rows per view").uid("pricestream-rows-per-view")
            .sinkTo(kafka(spec.bootstrap, producer, spec.features, new ValueRows(spec.features.topic, names)))
            .name("features.v1: value rows").uid("pricestream-sink-features");
        deadLetters.sinkTo(kafka(spec.bootstrap, producer, spec.dlq, new DeadLetters(spec.dlq.topic)))
            .name("DLQ: dead letters").uid("pricestream-sink-dlq");
        if (spec.accepted != null) {
            accepted.sinkTo(kafka(spec.bootstrap, producer, spec.accepted,
                                  new AcceptedEvents.Records(spec.accepted.topic)))
                .name("accepted events").uid("pricestream-sink-accepted");
        }
        if (redisSpecJson != null) {
            values.sinkTo(new RedisFeatureSink(redisSpecJson)).name("online store: redis").uid("pricestream-sink-redis");
        }
    }

    private static KafkaSink<Row> kafka(String bootstrap, Properties common, SinkSpec.Target target,
                                        KafkaRecordSerializationSchema<Row> records) {
        Properties producer = new Properties();
        producer.putAll(common);
        producer.putAll(target.properties);
        String delivery = target.delivery;
        DeliveryGuarantee guarantee;
        switch (delivery) {
            case "exactly-once": guarantee = DeliveryGuarantee.EXACTLY_ONCE; break;
            case "at-least-once": guarantee = DeliveryGuarantee.AT_LEAST_ONCE; break;
            case "none": guarantee = DeliveryGuarantee.NONE; break;
            default:
                throw new IllegalArgumentException("sink spec: delivery '" + delivery
                    + "', expected exactly-once, at-least-once or none");
        }
        return KafkaSink.<Row>builder()
            .setBootstrapServers(bootstrap)
            .setKafkaProducerConfig(producer)
            .setDeliveryGuarantee(guarantee)
            .setTransactionalIdPrefix(target.transactionalIdPrefix)
            .setRecordSerializer(records)
            .build();
    }

    /**
     * A group's row (one per entity and flush, its views' features one after another) as one row per
     * view, in the group's order; a view's row passes as it is. Chained to the {@code features.v1}
     * sink: the split costs no serialization.
     */
    static final class PerView implements FlatMapFunction<Row, Row> {
        private static final long serialVersionUID = 1L;
        private final Map<String, String[]> groups;
        private final Map<String, String[]> names;

        PerView(Map<String, String[]> groups, Map<String, String[]> names) {
            this.groups = groups;
            this.names = names;
        }

        @Override
        public void flatMap(Row row, Collector<Row> out) {
            String[] views = groups.get((String) row.getField(3));
            if (views == null) {
                out.collect(row);
                return;
            }
            double[] all = (double[]) row.getField(7);
            int at = 0;
            for (String view : views) {
                int n = names.get(view).length;
                out.collect(Row.of(row.getField(0), row.getField(1), row.getField(2), view, row.getField(4),
                    row.getField(5), row.getField(6), Arrays.copyOfRange(all, at, at + n)));
                at += n;
            }
        }
    }

    /** A value row as its {@code features.v1} record: JSON key and value, written field by field. */
    static final class ValueRows implements KafkaRecordSerializationSchema<Row> {
        private static final long serialVersionUID = 1L;
        private final String topic;
        /** Each view's feature names, in the order of a row's {@code features}. */
        private final Map<String, String[]> names;
        private transient Map<String, String[]> quoted;
        private transient StringBuilder text;

        ValueRows(String topic, Map<String, String[]> names) {
            this.topic = topic;
            this.names = names;
        }

        /** The JSON member names ({@code "name":}) of a view's features, escaped once. */
        private String[] members(String view) {
            if (quoted == null) {
                quoted = new HashMap<>();
            }
            String[] held = quoted.get(view);
            if (held == null) {
                String[] features = names.get(view);
                if (features == null) {
                    throw new IllegalArgumentException("features.v1 sink: view '" + view
                        + "' has no feature names in the sink spec, expected one of " + names.keySet());
                }
                held = new String[features.length];
                for (int i = 0; i < features.length; i++) {
                    StringBuilder member = new StringBuilder();
                    string(member, features[i]);
                    held[i] = member.append(':').toString();
                }
                quoted.put(view, held);
            }
            return held;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Row row, KafkaSinkContext context, Long timestamp) {
            if (text == null) {
                text = new StringBuilder(512);
            }
            // the columns of TileJob.OUTPUT_NAMES: hotel_id, room_type, stay_date, view, feature_time,
            // version, publish_time, features
            StringBuilder out = text;
            out.setLength(0);
            out.append("{\"hotel_id\":");
            string(out, row.getField(0));
            out.append(",\"room_type\":");
            string(out, row.getField(1));
            out.append(",\"stay_date\":");
            string(out, row.getField(2));
            out.append(",\"view\":");
            string(out, row.getField(3));
            out.append('}');
            byte[] key = out.toString().getBytes(StandardCharsets.UTF_8);
            out.setLength(out.length() - 1);  // the value starts with the key's fields
            out.append(",\"feature_time\":");
            number(out, row.getField(4));
            out.append(",\"version\":");
            number(out, row.getField(5));
            out.append(",\"publish_time\":");
            number(out, row.getField(6));
            out.append(",\"features\":");
            String[] members = members((String) row.getField(3));
            double[] xs = (double[]) row.getField(7);
            out.append('{');
            for (int i = 0; i < members.length; i++) {
                if (i > 0) {
                    out.append(',');
                }
                out.append(members[i]);
                double v = i < xs.length ? xs[i] : Double.NaN;
                if (Double.isNaN(v) || Double.isInfinite(v)) {
                    out.append("null");
                } else {
                    out.append(v);
                }
            }
            out.append('}');
            out.append('}');
            return new ProducerRecord<>(topic, null, null, key, out.toString().getBytes(StandardCharsets.UTF_8));
        }

        private static void number(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else {
                out.append(((Number) value).longValue());
            }
        }

        /** A JSON string (or null): quotes, backslashes and control characters escaped. */
        static void string(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
                return;
            }
            String s = value.toString();
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') {
                    out.append('\\').append(c);
                } else if (c < 0x20) {
                    out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                } else {
                    out.append(c);
                }
            }
            out.append('"');
        }
    }

    /** A dead letter as its DLQ record: the (possibly truncated) payload as the value, the reasons as headers. */
    static final class DeadLetters implements KafkaRecordSerializationSchema<Row> {
        private static final long serialVersionUID = 1L;
        private final String topic;

        DeadLetters(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Row row, KafkaSinkContext context, Long timestamp) {
            RecordHeaders headers = new RecordHeaders();
            Object held = row.getField(1);
            if (held != null) {
                for (Map.Entry<?, ?> e : ((Map<?, ?>) held).entrySet()) {
                    headers.add(new RecordHeader((String) e.getKey(), (byte[]) e.getValue()));
                }
            }
            return new ProducerRecord<>(topic, null, null, null, (byte[]) row.getField(0), headers);
        }
    }
}
