package io.pricestream.flink;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonProcessingException;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.json.JsonMapper;
import org.apache.flink.types.Row;

/**
 * {@link ParseEvent}'s tree path: the payload read into a Jackson tree, every rule of the contract
 * applied, and the first refusal worded as the SDK's pydantic path words it ({@link InvalidEvent}:
 * the field, the value got, what was expected). Every event the fast path does not accept comes here.
 */
final class TreeCheck {

    /** Jackson's message for a key met twice in one object (STRICT_DUPLICATE_DETECTION). */
    private static final Pattern DUPLICATE = Pattern.compile("^Duplicate field '(.*)'$");

    private final ContractRules rules;
    private final JsonMapper mapper;

    TreeCheck(ContractRules rules, JsonMapper mapper) {
        this.rules = rules;
        this.mapper = mapper;
    }

    /** The payload as one JSON object, or the record-level refusal. */
    JsonNode parse(byte[] payload) throws InvalidEvent {
        if (payload == null) {
            throw new InvalidEvent("<record>", "record: empty (a tombstone), expected one JSON object",
                "MalformedRecord");
        }
        if (payload.length > rules.maxBytes) {
            throw new InvalidEvent("<record>", "record: " + payload.length + " bytes, expected a record of at most "
                + rules.maxBytes + " bytes", "MalformedRecord");
        }
        // Plain ASCII with no escapes (nearly every event) is valid UTF-8 and cannot hold a lone
        // surrogate: Jackson reads the bytes as they are. Anything else is decoded strictly first.
        boolean plain = FastScan.plain(payload);
        JsonNode node = read(payload, plain);
        if (node == null || !node.isObject()) {
            throw new InvalidEvent("<record>", "record: not a JSON object, expected one JSON object",
                "MalformedRecord");
        }
        if (!plain && hasLoneSurrogate(node)) {
            throw new InvalidEvent("<record>", "record: a string holds a lone surrogate, expected valid Unicode text",
                "MalformedRecord");
        }
        return node;
    }

    private JsonNode read(byte[] payload, boolean plain) throws InvalidEvent {
        try {
            if (plain) {
                return mapper.readTree(payload);
            }
            return mapper.readTree(strictUtf8(payload));
        } catch (JsonProcessingException e) {
            String why = e.getOriginalMessage();
            java.util.regex.Matcher twice = DUPLICATE.matcher(why == null ? "" : why);
            if (twice.find()) {
                throw new InvalidEvent(twice.group(1), "field " + twice.group(1) + ": appears twice, expected a key "
                    + "that appears once in its object (JSON readers disagree on which value wins)", "ValidationError");
            }
            throw new InvalidEvent("<record>", "record: not JSON (" + clip(why, 120) + "), expected one JSON object",
                "MalformedRecord");
        } catch (java.io.IOException e) {
            throw new InvalidEvent("<record>", "record: not readable (" + clip(e.getMessage(), 120)
                + "), expected one JSON object", "MalformedRecord");
        }
    }

    private static String strictUtf8(byte[] payload) throws InvalidEvent {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(payload)).toString();
        } catch (CharacterCodingException e) {
            throw new InvalidEvent("<record>", "record: not valid UTF-8, expected one JSON object in UTF-8",
                "MalformedRecord");
        }
    }

    private static boolean hasLoneSurrogate(JsonNode node) {
        if (node.isTextual()) {
            return loneSurrogate(node.asText());
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> entry = it.next();
            if (loneSurrogate(entry.getKey()) || hasLoneSurrogate(entry.getValue())) {
                return true;
            }
        }
        for (JsonNode item : node.isArray() ? node : List.<JsonNode>of()) {
            if (hasLoneSurrogate(item)) {
                return true;
            }
        }
        return false;
    }

    private static boolean loneSurrogate(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    i++;
                    continue;
                }
                return true;
            }
            if (Character.isLowSurrogate(c)) {
                return true;
            }
        }
        return false;
    }

    /** Applies the rules of the event's type and fills the typed fields of {@code row}; the first refusal throws. */
    void check(JsonNode event, Row row) throws InvalidEvent {
        JsonNode kindNode = event.get("event_type");
        String kind = kindNode != null && kindNode.isTextual() ? kindNode.asText() : null;
        List<FieldRule> typeRules = kind == null ? null : rules.types.get(kind);
        if (typeRules == null) {
            throw invalid("event_type", kindNode, "one of " + rules.types.keySet());
        }
        for (FieldRule rule : typeRules) {
            checkField(rule, event.get(rule.name));
        }
        Set<String> known = rules.fieldNames.get(kind);
        for (Iterator<String> it = event.fieldNames(); it.hasNext(); ) {
            String name = it.next();
            if (!known.contains(name)) {
                throw invalid(name, event.get(name), "no such field (the contract has no field of this name)");
            }
        }
        String hotel = event.get("hotel_id").asText();
        long eventMs = eventMillis(event.get("event_time"));
        LocalDate stay = rules.date(event.get("stay_date").asText());
        LocalDate local = rules.localDate(hotel, eventMs);
        if (stay.isBefore(local)) {
            throw invalid("stay_date", event.get("stay_date"), "a stay_date on or after the event's local date " + local);
        }
        setFields(row, event, kind, hotel, stay, eventMs);
    }

    private void setFields(Row row, JsonNode event, String kind, String hotel, LocalDate stay, long eventMs) {
        row.setField(3, rules.flags(kind, hotel, name -> number(event.get(name))));
        row.setField(4, kind);
        row.setField(5, hotel);
        row.setField(6, event.get("room_type").asText());
        row.setField(7, stay);
        row.setField(8, eventMs);
        row.setField(9, doubleOrNull(event.get("price_shown")));
        row.setField(10, doubleOrNull(event.get("price_paid")));
        row.setField(11, doubleOrNull(event.get("rate")));
        row.setField(12, intOrNull(event.get("rooms_left")));
        row.setField(13, intOrNull(event.get("capacity")));
        JsonNode rooms = event.get("rooms");
        row.setField(14, rooms == null || rooms.isNull() ? 1 : rooms.asInt());
        JsonNode nights = event.get("nights");
        row.setField(15, nights == null || nights.isNull() ? 1 : nights.asInt());
        JsonNode competitor = event.get("competitor_id");
        row.setField(18, competitor == null || competitor.isNull() ? null : competitor.asText());
    }

    private void checkField(FieldRule rule, JsonNode value) throws InvalidEvent {
        if (value == null) {
            if (rule.required) {
                throw invalid(rule.name, null, "a value (the field is required)");
            }
            return;
        }
        if (value.isNull()) {
            if (!rule.nullable) {
                throw invalid(rule.name, value, "a value that is not null");
            }
            return;
        }
        switch (rule.kind) {
            case "enum":
                checkEnum(rule, value);
                break;
            case "string":
                checkString(rule, value);
                break;
            case "integer":
                if (!value.isIntegralNumber()) {
                    throw invalid(rule.name, value, "a valid integer");
                }
                checkBounds(rule, value.decimalValue(), value);
                break;
            case "number":
                checkNumber(rule, value);
                break;
            case "uuid":
                if (!value.isTextual() || !rules.uuidText.matcher(value.asText()).matches()) {
                    throw invalid(rule.name, value, "a UUID in its 8-4-4-4-12 hexadecimal form");
                }
                break;
            case "date":
                if (!value.isTextual() || rules.date(value.asText()) == null) {
                    throw invalid(rule.name, value, "a calendar date YYYY-MM-DD");
                }
                break;
            case "instant":
                eventMillis(value);
                break;
            default:
                throw new IllegalStateException("contract spec: unknown rule kind " + rule.kind);
        }
    }

    private void checkNumber(FieldRule rule, JsonNode value) throws InvalidEvent {
        if (!value.isNumber()) {
            throw invalid(rule.name, value, "a valid number");
        }
        double d = value.doubleValue();
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            throw invalid(rule.name, value, "a finite number");
        }
        checkBounds(rule, value.isIntegralNumber() ? value.decimalValue() : BigDecimal.valueOf(d), value);
    }

    private void checkEnum(FieldRule rule, JsonNode value) throws InvalidEvent {
        boolean ok;
        if (!rule.textValues.isEmpty()) {
            ok = value.isTextual() && rule.textValues.contains(value.asText());
        } else {
            ok = value.isIntegralNumber() && rule.numberValues.stream()
                .anyMatch(v -> v.compareTo(value.decimalValue()) == 0);
        }
        if (!ok) {
            List<Object> allowed = new ArrayList<>(rule.textValues);
            allowed.addAll(rule.numberValues);
            throw invalid(rule.name, value, "one of " + allowed);
        }
    }

    private void checkString(FieldRule rule, JsonNode value) throws InvalidEvent {
        if (!value.isTextual()) {
            throw invalid(rule.name, value, "a valid string");
        }
        String s = value.asText();
        if (rule.accepted.contains(s)) {
            return;
        }
        int length = s.codePointCount(0, s.length());  // pydantic counts code points, not UTF-16 units
        if (rule.minLength >= 0 && length < rule.minLength) {
            throw invalid(rule.name, value, "at least " + rule.minLength + " characters");
        }
        if (rule.maxLength >= 0 && length > rule.maxLength) {
            throw invalid(rule.name, value, "at most " + rule.maxLength + " characters");
        }
        if (rule.pattern != null && !rule.pattern.matcher(s).matches()) {
            throw invalid(rule.name, value, "a string matching " + rule.pattern.pattern());
        }
        rule.remember(s);
    }

    private void checkBounds(FieldRule rule, BigDecimal v, JsonNode value) throws InvalidEvent {
        if (rule.minimum != null && v.compareTo(rule.minimum) < 0) {
            throw invalid(rule.name, value, "greater than or equal to " + rule.minimum.toPlainString());
        }
        if (rule.exclusiveMinimum != null && v.compareTo(rule.exclusiveMinimum) <= 0) {
            throw invalid(rule.name, value, "greater than " + rule.exclusiveMinimum.toPlainString());
        }
        if (rule.maximum != null && v.compareTo(rule.maximum) > 0) {
            throw invalid(rule.name, value, "less than or equal to " + rule.maximum.toPlainString());
        }
        if (rule.exclusiveMaximum != null && v.compareTo(rule.exclusiveMaximum) >= 0) {
            throw invalid(rule.name, value, "less than " + rule.exclusiveMaximum.toPlainString());
        }
    }

    /** Epoch ms of an event_time: an integer, or offset ISO-8601 text; null (absent) means "now" upstream. */
    private long eventMillis(JsonNode value) throws InvalidEvent {
        String expected = "integer epoch milliseconds, or ISO-8601 text with an offset (2026-11-30T09:15:00Z)";
        if (value == null) {
            throw invalid("event_time", null, "a value (the feature job needs the event's time)");
        }
        long ms;
        if (value.isIntegralNumber() && value.canConvertToLong()) {
            ms = value.asLong();
        } else if (value.isTextual() && rules.instantText.matcher(value.asText()).matches()) {
            try {
                ms = OffsetDateTime.parse(value.asText()).toInstant().toEpochMilli();
            } catch (DateTimeParseException e) {
                throw invalid("event_time", value, expected);
            }
        } else {
            throw invalid("event_time", value, expected);
        }
        if (ms < rules.minMs || ms >= rules.maxMs) {
            throw invalid("event_time", value, "epoch milliseconds in [" + rules.minMs + ", " + rules.maxMs + ")");
        }
        return ms;
    }

    /** A number node as the fast path holds it (Long or Double), anything else null. */
    private static Object number(JsonNode v) {
        if (v == null || !v.isNumber()) {
            return null;
        }
        return v.isIntegralNumber() && v.canConvertToLong() ? (Object) v.asLong() : (Object) v.doubleValue();
    }

    private static Double doubleOrNull(JsonNode v) {
        return v == null || v.isNull() ? null : v.doubleValue();
    }

    private static Integer intOrNull(JsonNode v) {
        return v == null || v.isNull() ? null : v.asInt();
    }

    private static InvalidEvent invalid(String field, JsonNode value, String expected) {
        String shown = value == null ? "nothing" : clip(value.toString(), 200);
        return new InvalidEvent(field, "field " + field + ": got " + shown + ", expected " + expected,
            "ValidationError");
    }

    private static String clip(String s, int n) {
        return s == null ? "" : s.length() <= n ? s : s.substring(0, n) + "...";
    }
}
