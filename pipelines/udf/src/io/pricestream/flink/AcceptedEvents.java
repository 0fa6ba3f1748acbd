package io.pricestream.flink;

import java.io.ByteArrayOutputStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.flink.types.Row;

/**
 * The accepted events as the offline store keeps them: one record per event the job accepted (valid
 * by the contract and not late), keyed by hotel, on {@code behaviour.events.accepted}.
 *
 * <p>The value is a JSON object {@code {"topic", "partition", "valid": {...}, "event": {...}}}: where
 * the event was read, the job's own columns of it (the tile operator's inputs, named, the source
 * offset among them), and the event's bytes as the producer sent them (the contract's field names).
 * The offline store computes its point-in-time history from {@code valid}, so the history and the
 * served values read the same columns, computed once, here on the JVM; analysts read {@code event}.
 * The payload is appended unparsed: the parser already proved it one JSON object.
 */
public final class AcceptedEvents implements Serializable {

    private static final long serialVersionUID = 1L;
    private final String[] members;
    private final int hotelIdx;

    AcceptedEvents(List<String> columns) {
        members = new String[columns.size()];
        for (int i = 0; i < members.length; i++) {
            StringBuilder member = new StringBuilder(i == 0 ? "{" : ",");
            SinkJob.ValueRows.string(member, columns.get(i));
            members[i] = member.append(':').toString();
        }
        hotelIdx = columns.indexOf("hotel_id");
    }

    /** Type of an accepted record: {@code key BYTES, value BYTES}. */
    public static TypeInformation<Row> type() {
        return Types.ROW_NAMED(new String[] {"key", "value"}, PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO,
            PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO);
    }

    /** The record of one accepted event: its valid row (the job's columns), where it was read, its bytes. */
    Row record(Row valid, String topic, int partition, byte[] payload) {
        StringBuilder head = new StringBuilder(256).append("{\"topic\":");
        SinkJob.ValueRows.string(head, topic);
        head.append(",\"partition\":").append(partition).append(",\"valid\":");
        for (int i = 0; i < members.length; i++) {
            head.append(members[i]);
            Object value = valid.getField(i);
            if (value == null) {
                head.append("null");
            } else if (value instanceof Number) {
                double x = ((Number) value).doubleValue();
                head.append(value instanceof Double && (Double.isNaN(x) || Double.isInfinite(x)) ? "null" : value);
            } else {
                SinkJob.ValueRows.string(head, value);
            }
        }
        head.append(members.length == 0 ? "{}" : "}").append(",\"event\":");
        ByteArrayOutputStream value = new ByteArrayOutputStream(head.length() + payload.length + 1);
        value.writeBytes(head.toString().getBytes(StandardCharsets.UTF_8));
        value.writeBytes(payload);
        value.write('}');
        Object hotel = hotelIdx >= 0 ? valid.getField(hotelIdx) : null;
        byte[] key = hotel == null ? null : ((String) hotel).getBytes(StandardCharsets.UTF_8);
        return Row.of(key, value.toByteArray());
    }

    /** An accepted record as its Kafka record on {@code topic}. */
    static final class Records implements KafkaRecordSerializationSchema<Row> {
        private static final long serialVersionUID = 1L;
        private final String topic;

        Records(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Row row, KafkaSinkContext context, Long timestamp) {
            return new ProducerRecord<>(topic, null, null, (byte[]) row.getField(0), (byte[]) row.getField(1));
        }
    }
}
