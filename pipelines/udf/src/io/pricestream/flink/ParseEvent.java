package io.pricestream.flink;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.ZoneId;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonProcessingException;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.StreamReadFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.json.JsonReadFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.DeserializationFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.json.JsonMapper;
import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.FunctionHint;
import org.apache.flink.table.functions.FunctionContext;
import org.apache.flink.table.functions.TableFunction;
import org.apache.flink.types.Row;

/**
 * Parses and validates one behaviour event, once, against the contract spec that
 * {@code events.contract.job_spec} derives from the pydantic models (job parameter
 * {@code pricestream.contract}, URL-safe base64 JSON). Emits exactly one row per input:
 * {@code reason} and {@code error_field} are null for a valid event, and the typed fields are
 * filled only then. The rules are the spec's; this class only knows how to apply each kind.
 */
@FunctionHint(output = @DataTypeHint(
    "ROW<reason STRING, error_field STRING, error_class STRING, flags STRING, event_type STRING,"
        + " hotel_id STRING, room_type STRING, stay_date DATE, event_time_ms BIGINT, price_shown DOUBLE,"
        + " price_paid DOUBLE, rate DOUBLE, rooms_left INT, capacity INT, rooms INT, nights INT,"
        + " payload_bytes INT, dlq_payload BYTES, competitor_id STRING>"))
public class ParseEvent extends TableFunction<Row> {

    public static final String SPEC_PARAMETER = "pricestream.contract";
    static final int ARITY = 19;

    private transient JsonMapper mapper;
    private transient Map<String, List<FieldRule>> types;
    /** Each event type's field names: a field outside them is refused. */
    private transient Map<String, Set<String>> fieldNames;
    /** Every field name of the contract and its slot in the fast path's value array. */
    private transient Map<String, Integer> fieldSlots;
    /** Slots of the fields the row takes (-1: not in the contract). */
    private transient int[] rowSlots;
    /** Per event type, per slot: whether the type has that field. */
    private transient Map<String, boolean[]> allowedSlots;
    private transient JsonFactory factory;
    /** Off only to compare the two paths ({@code pipelines/udf/ParseCheck}): the fast path never refuses. */
    transient boolean fastPath = true;
    /** Valid date texts seen lately and their dates (stay dates repeat): the regex and the parse run once per text. */
    private transient Map<String, LocalDate> dates;
    private transient List<JsonNode> flagRules;
    private transient int maxBytes;
    private transient int dlqBytes;
    private transient long minMs;
    private transient long maxMs;
    private transient Pattern uuidText;
    private transient Pattern dateText;
    private transient Pattern instantText;
    private transient ZoneId defaultZone;
    private transient double[] defaultRange;
    private transient Map<String, ZoneId> zones;
    private transient Map<String, double[]> ranges;

    /** Thrown by a rule; carries the field named in the DLQ headers. */
    private static final class Invalid extends Exception {
        final String field;
        final String errorClass;

        Invalid(String field, String message, String errorClass) {
            super(message, null, false, false);
            this.field = field;
            this.errorClass = errorClass;
        }
    }

    /** One field rule of the spec, compiled. */
    private static final class FieldRule {
        String name;
        String kind;
        boolean required;
        boolean nullable;
        List<String> textValues = new ArrayList<>();
        List<BigDecimal> numberValues = new ArrayList<>();
        BigDecimal minimum;
        BigDecimal maximum;
        BigDecimal exclusiveMinimum;
        BigDecimal exclusiveMaximum;
        int minLength = -1;
        int maxLength = -1;
        Pattern pattern;
        /** The field's slot in the fast path's value array. */
        int slot;
        /** Strings this rule accepted lately (ids repeat: hotels, room types): checked once per text. */
        final Set<String> accepted = new HashSet<>();
    }

    @Override
    public void open(FunctionContext context) throws Exception {
        String encoded = context.getJobParameter(SPEC_PARAMETER, null);
        if (encoded == null) {
            throw new IllegalStateException("job parameter " + SPEC_PARAMETER + " (the contract spec) is not set");
        }
        configure(encoded);
    }

    /** Compile the contract spec ({@code events.contract.encoded_job_spec}); {@link #open} and {@link SourceJob} call it. */
    public void configure(String encoded) throws java.io.IOException {
        mapper = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)  // NaN is a number the rules refuse, as pydantic does
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)  // a key twice: refused naming it, as pydantic's path
            .build();
        JsonNode spec = mapper.readTree(Base64.getUrlDecoder().decode(encoded));
        maxBytes = spec.get("max_record_bytes").asInt();
        dlqBytes = spec.get("dlq_payload_bytes").asInt();
        minMs = spec.get("event_time_ms").get(0).asLong();
        maxMs = spec.get("event_time_ms").get(1).asLong();
        uuidText = Pattern.compile(spec.get("text_forms").get("uuid").asText());
        dateText = Pattern.compile(spec.get("text_forms").get("date").asText());
        instantText = Pattern.compile(spec.get("text_forms").get("instant").asText());
        defaultZone = ZoneId.of(spec.get("default_zone").asText());
        defaultRange = range(spec.get("default_price_range"));
        zones = new HashMap<>();
        ranges = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.get("hotels").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> hotel = it.next();
            zones.put(hotel.getKey(), ZoneId.of(hotel.getValue().get("zone").asText()));
            ranges.put(hotel.getKey(), range(hotel.getValue().get("price_range")));
        }
        types = new HashMap<>();
        fieldNames = new HashMap<>();
        dates = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.get("types").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> type = it.next();
            List<FieldRule> rules = new ArrayList<>();
            Set<String> names = new HashSet<>();
            for (JsonNode node : type.getValue()) {
                FieldRule rule = compile(node);
                rules.add(rule);
                names.add(rule.name);
            }
            types.put(type.getKey(), rules);
            fieldNames.put(type.getKey(), names);
        }
        flagRules = new ArrayList<>();
        spec.get("flags").forEach(flagRules::add);
        fieldSlots = new HashMap<>();
        for (Set<String> names : fieldNames.values()) {
            for (String name : names) {
                fieldSlots.putIfAbsent(name, fieldSlots.size());
            }
        }
        allowedSlots = new HashMap<>();
        for (Map.Entry<String, Set<String>> type : fieldNames.entrySet()) {
            boolean[] allowed = new boolean[fieldSlots.size()];
            for (String name : type.getValue()) {
                allowed[fieldSlots.get(name)] = true;
            }
            allowedSlots.put(type.getKey(), allowed);
        }
        for (List<FieldRule> rules : types.values()) {
            for (FieldRule rule : rules) {
                rule.slot = fieldSlots.get(rule.name);
            }
        }
        rowSlots = new int[ROW_FIELDS.length];
        for (int i = 0; i < ROW_FIELDS.length; i++) {
            rowSlots[i] = fieldSlots.getOrDefault(ROW_FIELDS[i], -1);
        }
        factory = mapper.getFactory();
        fastPath = true;
    }

    private static double[] range(JsonNode node) {
        return new double[] {node.get(0).asDouble(), node.get(1).asDouble()};
    }

    private static FieldRule compile(JsonNode node) {
        FieldRule rule = new FieldRule();
        rule.name = node.get("name").asText();
        rule.kind = node.get("kind").asText();
        rule.required = node.path("required").asBoolean(false);
        rule.nullable = node.path("nullable").asBoolean(false);
        if (node.has("values")) {
            for (JsonNode value : node.get("values")) {
                if (value.isTextual()) {
                    rule.textValues.add(value.asText());
                } else {
                    rule.numberValues.add(value.decimalValue());
                }
            }
        }
        rule.minimum = node.has("minimum") ? node.get("minimum").decimalValue() : null;
        rule.maximum = node.has("maximum") ? node.get("maximum").decimalValue() : null;
        rule.exclusiveMinimum = node.has("exclusiveMinimum") ? node.get("exclusiveMinimum").decimalValue() : null;
        rule.exclusiveMaximum = node.has("exclusiveMaximum") ? node.get("exclusiveMaximum").decimalValue() : null;
        rule.minLength = node.path("minLength").asInt(-1);
        rule.maxLength = node.path("maxLength").asInt(-1);
        rule.pattern = node.has("pattern") ? Pattern.compile(node.get("pattern").asText()) : null;
        return rule;
    }

    public void eval(byte[] payload) {
        collect(parseRow(payload, ARITY));
    }

    /**
     * The row {@link #eval} emits, in a row of {@code arity} fields (at least {@link #ARITY}: the caller's own
     * columns follow the parser's).
     */
    Row parseRow(byte[] payload, int arity) {
        if (fastPath && payload != null && payload.length <= maxBytes && plain(payload)) {
            Row row = new Row(arity);
            if (fast(payload, row)) {
                row.setField(16, payload.length);
                return row;
            }
        }
        Row row = new Row(arity);
        try {
            JsonNode event = parse(payload);
            check(event, row);
        } catch (Invalid invalid) {
            row = new Row(arity);
            row.setField(0, invalid.getMessage());
            row.setField(1, invalid.field);
            row.setField(2, invalid.errorClass);
            if (payload != null && payload.length > dlqBytes) {
                row.setField(17, java.util.Arrays.copyOf(payload, dlqBytes));  // what the DLQ keeps of it
            }
        }
        row.setField(16, payload == null ? 0 : payload.length);
        return row;
    }

    /** Jackson's message for a key met twice in one object (STRICT_DUPLICATE_DETECTION). */
    private static final Pattern DUPLICATE = Pattern.compile("^Duplicate field '(.*)'$");

    private JsonNode parse(byte[] payload) throws Invalid {
        if (payload == null) {
            throw new Invalid("<record>", "record: empty (a tombstone), expected one JSON object", "MalformedRecord");
        }
        if (payload.length > maxBytes) {
            throw new Invalid("<record>", "record: " + payload.length + " bytes, expected a record of at most "
                + maxBytes + " bytes", "MalformedRecord");
        }
        // Plain ASCII with no escapes (nearly every event) is valid UTF-8 and cannot hold a lone
        // surrogate: Jackson reads the bytes as they are. Anything else is decoded strictly first.
        boolean plain = plain(payload);
        JsonNode node;
        try {
            if (plain) {
                node = mapper.readTree(payload);
            } else {
                node = mapper.readTree(strictUtf8(payload));
            }
        } catch (JsonProcessingException e) {
            String why = e.getOriginalMessage();
            java.util.regex.Matcher twice = DUPLICATE.matcher(why == null ? "" : why);
            if (twice.find()) {
                throw new Invalid(twice.group(1), "field " + twice.group(1) + ": appears twice, expected a key that "
                    + "appears once in its object (JSON readers disagree on which value wins)", "ValidationError");
            }
            throw new Invalid("<record>", "record: not JSON (" + clip(why, 120) + "), expected one JSON object",
                "MalformedRecord");
        } catch (java.io.IOException e) {
            throw new Invalid("<record>", "record: not readable (" + clip(e.getMessage(), 120)
                + "), expected one JSON object", "MalformedRecord");
        }
        if (node == null || !node.isObject()) {
            throw new Invalid("<record>", "record: not a JSON object, expected one JSON object", "MalformedRecord");
        }
        if (!plain && hasLoneSurrogate(node)) {
            throw new Invalid("<record>", "record: a string holds a lone surrogate, expected valid Unicode text",
                "MalformedRecord");
        }
        return node;
    }

    /** ASCII with no escape: valid UTF-8 that cannot hold a lone surrogate. */
    private static boolean plain(byte[] payload) {
        for (byte b : payload) {
            if (b < 0 || b == '\\') {
                return false;
            }
        }
        return true;
    }

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

    /**
     * The fast path: a plain payload read by the streaming parser into one array of top-level scalars
     * (no tree), then the same rules as {@link #check}. It only ever accepts: anything it does not
     * take as plainly valid (a nested value, a duplicate or unknown field, a big or non-finite number,
     * any rule that fails) returns false, and the tree path decides and words the error. So the
     * two cannot disagree on what is refused, and the fields it fills are the tree path's.
     */
    private boolean fast(byte[] payload, Row row) {
        Object[] values = new Object[fieldSlots.size()];
        try (JsonParser p = factory.createParser(payload)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                return false;
            }
            JsonToken token;
            while ((token = p.nextToken()) == JsonToken.FIELD_NAME) {
                Integer slot = fieldSlots.get(p.currentName());
                if (slot == null || values[slot] != null) {
                    return false;
                }
                Object value;
                switch (p.nextToken()) {
                    case VALUE_STRING:
                        value = p.getText();
                        break;
                    case VALUE_NUMBER_INT:
                        if (p.getNumberType() != JsonParser.NumberType.INT && p.getNumberType() != JsonParser.NumberType.LONG) {
                            return false;
                        }
                        value = p.getLongValue();
                        break;
                    case VALUE_NUMBER_FLOAT: {
                        double d = p.getDoubleValue();
                        if (Double.isNaN(d) || Double.isInfinite(d)) {
                            return false;
                        }
                        value = d;
                        break;
                    }
                    case VALUE_NULL:
                        value = NULL;
                        break;
                    default:
                        return false;  // nested, boolean: the tree path
                }
                values[slot] = value;
            }
            if (token != JsonToken.END_OBJECT || p.nextToken() != null) {
                return false;
            }
        } catch (java.io.IOException e) {
            return false;
        }
        Object kind = at(values, F_EVENT_TYPE);
        List<FieldRule> rules = kind instanceof String ? types.get(kind) : null;
        if (rules == null) {
            return false;
        }
        boolean[] allowed = allowedSlots.get(kind);
        for (int i = 0; i < values.length; i++) {
            if (values[i] != null && !allowed[i]) {
                return false;
            }
        }
        for (FieldRule rule : rules) {
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
        LocalDate stay = date((String) stayText);
        LocalDate local = java.time.Instant.ofEpochMilli(eventMs).atZone(zones.getOrDefault(hotel, defaultZone))
            .toLocalDate();
        if (stay == null || stay.isBefore(local)) {
            return false;
        }
        row.setField(3, flags((String) kind, (String) hotel, name -> at(values, name)));
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
        Integer slot = fieldSlots.get(name);
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
            case "string": {
                if (!(value instanceof String)) {
                    return false;
                }
                String s = (String) value;
                if (rule.accepted.contains(s)) {
                    return true;
                }
                int length = s.codePointCount(0, s.length());
                if ((rule.minLength >= 0 && length < rule.minLength) || (rule.maxLength >= 0 && length > rule.maxLength)
                    || (rule.pattern != null && !rule.pattern.matcher(s).matches())) {
                    return false;
                }
                if (rule.accepted.size() >= 4096) {
                    rule.accepted.clear();
                }
                rule.accepted.add(s);
                return true;
            }
            case "integer":
                return value instanceof Long && inBounds(rule, BigDecimal.valueOf((Long) value));
            case "number":
                if (value instanceof Long) {
                    return inBounds(rule, BigDecimal.valueOf((Long) value));
                }
                return value instanceof Double && inBounds(rule, BigDecimal.valueOf((Double) value));
            case "uuid":
                return value instanceof String && uuidText.matcher((String) value).matches();
            case "date":
                return value instanceof String && date((String) value) != null;
            case "instant":
                return fastMillis(value) != null;
            default:
                return false;
        }
    }

    private static boolean inBounds(FieldRule rule, BigDecimal v) {
        return (rule.minimum == null || v.compareTo(rule.minimum) >= 0)
            && (rule.exclusiveMinimum == null || v.compareTo(rule.exclusiveMinimum) > 0)
            && (rule.maximum == null || v.compareTo(rule.maximum) <= 0)
            && (rule.exclusiveMaximum == null || v.compareTo(rule.exclusiveMaximum) < 0);
    }

    /** {@link #eventMillis} of a fast-path value, or null where it would refuse it. */
    private Long fastMillis(Object value) {
        long ms;
        if (value instanceof Long) {
            ms = (Long) value;
        } else if (value instanceof String && instantText.matcher((String) value).matches()) {
            try {
                ms = OffsetDateTime.parse((String) value).toInstant().toEpochMilli();
            } catch (DateTimeParseException e) {
                return null;
            }
        } else {
            return null;
        }
        return ms < minMs || ms >= maxMs ? null : ms;
    }

    /** The spec's flags that an event's values raise, comma separated, or null; {@code field} gives a value by name. */
    private String flags(String kind, String hotel, java.util.function.Function<String, Object> field) {
        StringBuilder out = null;
        for (JsonNode rule : flagRules) {
            boolean hit = false;
            if (rule.has("equals")) {
                Object v = field.apply(rule.get("field").asText());
                hit = kind.equals(rule.get("event_type").asText()) && (v instanceof Long || v instanceof Double)
                    && decimal(v).compareTo(rule.get("equals").decimalValue()) == 0;
            } else {
                double[] r = ranges.getOrDefault(hotel, defaultRange);
                boolean skipZero = rule.path("skip_zero").asBoolean(false);
                for (JsonNode name : rule.get("fields")) {
                    Object v = field.apply(name.asText());
                    if (v instanceof Long || v instanceof Double) {
                        double x = ((Number) v).doubleValue();
                        if (!(skipZero && x == 0) && (x < r[0] || x > r[1])) {
                            hit = true;
                        }
                    }
                }
            }
            if (hit) {
                out = out == null ? new StringBuilder() : out.append(',');
                out.append(rule.get("flag").asText());
            }
        }
        return out == null ? null : out.toString();
    }

    private static BigDecimal decimal(Object v) {
        return v instanceof Long ? BigDecimal.valueOf((Long) v) : BigDecimal.valueOf((Double) v);
    }

    private static Double fastDouble(Object v) {
        return v == null || v == NULL ? null : ((Number) v).doubleValue();
    }

    private static Integer fastInt(Object v) {
        return v == null || v == NULL ? null : ((Number) v).intValue();
    }

    private static String strictUtf8(byte[] payload) throws Invalid {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(payload)).toString();
        } catch (CharacterCodingException e) {
            throw new Invalid("<record>", "record: not valid UTF-8, expected one JSON object in UTF-8", "MalformedRecord");
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

    private void check(JsonNode event, Row row) throws Invalid {
        JsonNode kindNode = event.get("event_type");
        String kind = kindNode != null && kindNode.isTextual() ? kindNode.asText() : null;
        List<FieldRule> rules = kind == null ? null : types.get(kind);
        if (rules == null) {
            throw invalid("event_type", kindNode, "one of " + types.keySet());
        }
        for (FieldRule rule : rules) {
            checkField(rule, event.get(rule.name));
        }
        Set<String> known = fieldNames.get(kind);
        for (Iterator<String> it = event.fieldNames(); it.hasNext(); ) {
            String name = it.next();
            if (!known.contains(name)) {
                throw invalid(name, event.get(name), "no such field (the contract has no field of this name)");
            }
        }
        String hotel = event.get("hotel_id").asText();
        long eventMs = eventMillis(event.get("event_time"));
        LocalDate stay = date(event.get("stay_date").asText());
        LocalDate local = java.time.Instant.ofEpochMilli(eventMs).atZone(zones.getOrDefault(hotel, defaultZone))
            .toLocalDate();
        if (stay.isBefore(local)) {
            throw invalid("stay_date", event.get("stay_date"), "a stay_date on or after the event's local date " + local);
        }
        row.setField(3, flags(kind, hotel, event));
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

    private void checkField(FieldRule rule, JsonNode value) throws Invalid {
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
                if (!value.isNumber()) {
                    throw invalid(rule.name, value, "a valid number");
                }
                double d = value.doubleValue();
                if (Double.isNaN(d) || Double.isInfinite(d)) {
                    throw invalid(rule.name, value, "a finite number");
                }
                checkBounds(rule, value.isIntegralNumber() ? value.decimalValue() : BigDecimal.valueOf(d), value);
                break;
            case "uuid":
                if (!value.isTextual() || !uuidText.matcher(value.asText()).matches()) {
                    throw invalid(rule.name, value, "a UUID in its 8-4-4-4-12 hexadecimal form");
                }
                break;
            case "date":
                if (!value.isTextual() || date(value.asText()) == null) {
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

    private void checkEnum(FieldRule rule, JsonNode value) throws Invalid {
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

    private void checkString(FieldRule rule, JsonNode value) throws Invalid {
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
        if (rule.accepted.size() >= 4096) {
            rule.accepted.clear();  // a bound on memory (free text fields would fill it)
        }
        rule.accepted.add(s);
    }

    private void checkBounds(FieldRule rule, BigDecimal v, JsonNode value) throws Invalid {
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
    private long eventMillis(JsonNode value) throws Invalid {
        String expected = "integer epoch milliseconds, or ISO-8601 text with an offset (2026-11-30T09:15:00Z)";
        if (value == null) {
            throw invalid("event_time", null, "a value (the feature job needs the event's time)");
        }
        long ms;
        if (value.isIntegralNumber() && value.canConvertToLong()) {
            ms = value.asLong();
        } else if (value.isTextual() && instantText.matcher(value.asText()).matches()) {
            try {
                ms = OffsetDateTime.parse(value.asText()).toInstant().toEpochMilli();
            } catch (DateTimeParseException e) {
                throw invalid("event_time", value, expected);
            }
        } else {
            throw invalid("event_time", value, expected);
        }
        if (ms < minMs || ms >= maxMs) {
            throw invalid("event_time", value, "epoch milliseconds in [" + minMs + ", " + maxMs + ")");
        }
        return ms;
    }

    /** The calendar date of {@code text} (YYYY-MM-DD, year 1 or later, as Python's date), or null. */
    private LocalDate date(String text) {
        LocalDate known = dates.get(text);
        if (known != null) {
            return known;
        }
        if (!dateText.matcher(text).matches()) {
            return null;
        }
        LocalDate date;
        try {
            date = LocalDate.parse(text);
        } catch (DateTimeParseException e) {
            return null;
        }
        if (date.getYear() < 1) {
            return null;
        }
        if (dates.size() >= 65_536) {
            dates.clear();  // a bound on memory: the dates in use come back at once
        }
        dates.put(text, date);
        return date;
    }

    private String flags(String kind, String hotel, JsonNode event) {
        return flags(kind, hotel, name -> number(event.get(name)));
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

    private static Invalid invalid(String field, JsonNode value, String expected) {
        String shown = value == null ? "nothing" : clip(value.toString(), 200);
        return new Invalid(field, "field " + field + ": got " + shown + ", expected " + expected, "ValidationError");
    }

    private static String clip(String s, int n) {
        return s == null ? "" : s.length() <= n ? s : s.substring(0, n) + "...";
    }
}
