package io.pricestream.flink;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.List;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.types.Row;

/**
 * {@link ParseEvent}'s fast path: a plain payload read by the streaming parser into one array of
 * top-level scalars (no tree), then the same rules as {@link TreeCheck#check}. It only ever accepts:
 * anything it does not take as plainly valid (a nested value, a duplicate or unknown field, a big or
 * non-finite number, any rule that fails) returns false, and the tree path decides and words the
 * error. So the two cannot disagree on what is refused, and the fields it fills are the tree path's.
 */
final class FastScan {

    /** The fields the fast path reads by name, in the order of {@link #rowSlots}. */
    private static final String[] ROW_FIELDS = {"event_type", "hotel_id", "stay_date", "event_time", "room_type",
        "price_shown", "price_paid", "rate", "rooms_left", "capacity", "rooms", "nights", "competitor_id"};
    private static final int F_EVENT_TYPE = 0;
    private static final int F_HOTEL_ID = 1;
    private static final int F_STAY_DATE = 2;
    private static final int F_EVENT_TIME = 3;
    private static final int F_ROOM_TYPE = 4;
    private static final int F_PRICE_SHOWN = 5;
    private static final int F_PRICE_PAID = 6;
    private static final int F_RATE = 7;
    private static final int F_ROOMS_LEFT = 8;
    private static final int F_CAPACITY = 9;
    private static final int F_ROOMS = 10;
    private static final int F_NIGHTS = 11;
    private static final int F_COMPETITOR_ID = 12;

    /** A JSON null in the fast path's value array (absent is Java null). */
    private static final Object NULL = new Object();

    private final ContractRules rules;
    private final JsonFactory factory;
    /** Slots of the fields the row takes (-1: not in the contract). */
    private final int[] rowSlots;

    FastScan(ContractRules rules, JsonFactory factory) {
        this.rules = rules;
        this.factory = factory;
        rowSlots = new int[ROW_FIELDS.length];
        for (int i = 0; i < ROW_FIELDS.length; i++) {
            rowSlots[i] = rules.fieldSlots.getOrDefault(ROW_FIELDS[i], -1);
        }
    }

    /** ASCII with no escape: valid UTF-8 that cannot hold a lone surrogate. */
    static boolean plain(byte[] payload) {
        for (byte b : payload) {
            if (b < 0 || b == '\\') {
                return false;
            }
        }
        return true;
    }

    /** Fills {@code row} from a plainly valid {@code payload} and returns true; false leaves the event to the tree path. */
    boolean fill(byte[] payload, Row row) {
        Object[] values = scan(payload);
        if (values == null) {
            return false;
        }
        Object kind = at(values, F_EVENT_TYPE);
        List<FieldRule> typeRules = kind instanceof String ? rules.types.get(kind) : null;
        if (typeRules == null) {
            return false;
        }
        boolean[] allowed = rules.allowedSlots.get(kind);
        for (int i = 0; i < values.length; i++) {
            if (values[i] != null && !allowed[i]) {
                return false;
            }
        }
        for (FieldRule rule : typeRules) {
            if (!fastField(rule, values[rule.slot])) {
                return false;
            }
        }
        Object hotel = at(values, F_HOTEL_ID);
        Object stayText = at(values, F_STAY_DATE);
        Long eventMs = fastMillis(at(values, F_EVENT_TIME));
        if (!(hotel instanceof String) || !(stayText instanceof String) || eventMs == null
            || !(at(values, F_ROOM_TYPE) instanceof String)) {
            return false;
        }
        LocalDate stay = rules.date((String) stayText);
        LocalDate local = rules.localDate(hotel, eventMs);
        if (stay == null || stay.isBefore(local)) {
            return false;
        }
        return setFields(row, values, (String) kind, (String) hotel, stay, eventMs);
    }

    /** The payload's top-level scalars by slot, or null where the payload is not a flat object of known fields. */
    private Object[] scan(byte[] payload) {
        Object[] values = new Object[rules.fieldSlots.size()];
        try (JsonParser p = factory.createParser(payload)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                return null;
            }
            JsonToken token;
            while ((token = p.nextToken()) == JsonToken.FIELD_NAME) {
                Integer slot = rules.fieldSlots.get(p.currentName());
                if (slot == null || values[slot] != null) {
                    return null;
                }
                Object value = scalar(p);
                if (value == null) {
                    return null;
                }
                values[slot] = value;
            }
            if (token != JsonToken.END_OBJECT || p.nextToken() != null) {
                return null;
            }
        } catch (java.io.IOException e) {
            return null;
        }
        return values;
    }

    /** The next value as the fast path holds it (String, Long, Double or {@link #NULL}), or null to give up. */
    private static Object scalar(JsonParser p) throws java.io.IOException {
        switch (p.nextToken()) {
            case VALUE_STRING:
                return p.getText();
            case VALUE_NUMBER_INT:
                if (p.getNumberType() != JsonParser.NumberType.INT && p.getNumberType() != JsonParser.NumberType.LONG) {
                    return null;
                }
                return p.getLongValue();
            case VALUE_NUMBER_FLOAT: {
                double d = p.getDoubleValue();
                if (Double.isNaN(d) || Double.isInfinite(d)) {
                    return null;
                }
                return d;
            }
            case VALUE_NULL:
                return NULL;
            default:
                return null;  // nested, boolean: the tree path
        }
    }

    /** The typed fields of the row, as {@link TreeCheck#check} sets them; false where the competitor is not text. */
    private boolean setFields(Row row, Object[] values, String kind, String hotel, LocalDate stay, long eventMs) {
        row.setField(3, rules.flags(kind, hotel, name -> at(values, name)));
        row.setField(4, kind);
        row.setField(5, hotel);
        row.setField(6, at(values, F_ROOM_TYPE));
        row.setField(7, stay);
        row.setField(8, eventMs);
        row.setField(9, fastDouble(at(values, F_PRICE_SHOWN)));
        row.setField(10, fastDouble(at(values, F_PRICE_PAID)));
        row.setField(11, fastDouble(at(values, F_RATE)));
        row.setField(12, fastInt(at(values, F_ROOMS_LEFT)));
        row.setField(13, fastInt(at(values, F_CAPACITY)));
        Integer rooms = fastInt(at(values, F_ROOMS));
        row.setField(14, rooms == null ? 1 : rooms);
        Integer nights = fastInt(at(values, F_NIGHTS));
        row.setField(15, nights == null ? 1 : nights);
        Object competitor = at(values, F_COMPETITOR_ID);
        if (competitor != null && competitor != NULL && !(competitor instanceof String)) {
            return false;
        }
        row.setField(18, competitor == NULL ? null : competitor);
        return true;
    }

    /** The value of row field {@code f} (null when absent or not in the contract). */
    private Object at(Object[] values, int f) {
        int slot = rowSlots[f];
        return slot < 0 ? null : values[slot];
    }

    /** The value of field {@code name} (null when absent or not in the contract). */
    private Object at(Object[] values, String name) {
        Integer slot = rules.fieldSlots.get(name);
        return slot == null ? null : values[slot];
    }

    /** Whether {@code value} plainly passes {@code rule}; false sends the event to the tree path. */
    private boolean fastField(FieldRule rule, Object value) {
        if (value == null) {
            return !rule.required;
        }
        if (value == NULL) {
            return rule.nullable;
        }
        switch (rule.kind) {
            case "enum":
                if (!rule.textValues.isEmpty()) {
                    return value instanceof String && rule.textValues.contains(value);
                }
                return value instanceof Long && rule.numberValues.stream()
                    .anyMatch(v -> v.compareTo(BigDecimal.valueOf((Long) value)) == 0);
            case "string":
                return value instanceof String && fastString(rule, (String) value);
            case "integer":
                return value instanceof Long && rule.inBounds(BigDecimal.valueOf((Long) value));
            case "number":
                if (value instanceof Long) {
                    return rule.inBounds(BigDecimal.valueOf((Long) value));
                }
                return value instanceof Double && rule.inBounds(BigDecimal.valueOf((Double) value));
            case "uuid":
                return value instanceof String && rules.uuidText.matcher((String) value).matches();
            case "date":
                return value instanceof String && rules.date((String) value) != null;
            case "instant":
                return fastMillis(value) != null;
            default:
                return false;
        }
    }

    private static boolean fastString(FieldRule rule, String s) {
        if (rule.accepted.contains(s)) {
            return true;
        }
        int length = s.codePointCount(0, s.length());
        if ((rule.minLength >= 0 && length < rule.minLength) || (rule.maxLength >= 0 && length > rule.maxLength)
            || (rule.pattern != null && !rule.pattern.matcher(s).matches())) {
            return false;
        }
        rule.remember(s);
        return true;
    }

    /** {@link TreeCheck#eventMillis} of a fast-path value, or null where it would refuse it. */
    private Long fastMillis(Object value) {
        long ms;
        if (value instanceof Long) {
            ms = (Long) value;
        } else if (value instanceof String && rules.instantText.matcher((String) value).matches()) {
            try {
                ms = OffsetDateTime.parse((String) value).toInstant().toEpochMilli();
            } catch (DateTimeParseException e) {
                return null;
            }
        } else {
            return null;
        }
        return ms < rules.minMs || ms >= rules.maxMs ? null : ms;
    }

    private static Double fastDouble(Object v) {
        return v == null || v == NULL ? null : ((Number) v).doubleValue();
    }

    private static Integer fastInt(Object v) {
        return v == null || v == NULL ? null : ((Number) v).intValue();
    }
}
