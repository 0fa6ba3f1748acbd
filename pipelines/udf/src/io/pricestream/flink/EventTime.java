package io.pricestream.flink;

import java.io.IOException;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * The top-level {@code event_time} of a raw event, in epoch ms (integer or offset ISO-8601 text),
 * or null when there is none: the source's rowtime, read by a streaming scan that stops at the
 * field. Validity is {@link ParseEvent}'s job; a record without a time is refused there.
 */
public class EventTime extends ScalarFunction {

    private static final JsonFactory FACTORY = new JsonFactory();

    public Long eval(byte[] payload) {
        if (payload == null) {
            return null;
        }
        try (JsonParser parser = FACTORY.createParser(payload)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return null;
            }
            JsonToken token;
            while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
                boolean wanted = "event_time".equals(parser.getCurrentName());
                token = parser.nextToken();
                if (wanted) {
                    if (token == JsonToken.VALUE_NUMBER_INT) {
                        return parser.getLongValue();
                    }
                    return token == JsonToken.VALUE_STRING ? iso(parser.getText()) : null;
                }
                parser.skipChildren();
            }
            return null;
        } catch (IOException e) {
            return null;
        }
    }

    private static Long iso(String text) {
        try {
            return OffsetDateTime.parse(text).toInstant().toEpochMilli();
        } catch (DateTimeParseException e) {
            return null;
        }
    }
}
