package io.pricestream.flink;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * The contract spec ({@code events.contract.job_spec}) compiled once for {@link ParseEvent}: the
 * record bounds, the text forms, each hotel's zone and price range, each event type's field rules,
 * the flag rules, and the slot of every field in the fast path's value array. It also holds what
 * both paths share while they run: the date cache and the flags an event raises.
 */
final class ContractRules {
    /** Bound of {@link #dates}: the dates in use come back at once after it is emptied. */
    private static final int DATES_MAX = 65_536;

    final int maxBytes;
    final int dlqBytes;
    final long minMs;
    final long maxMs;
    final Pattern uuidText;
    final Pattern dateText;
    final Pattern instantText;
    final ZoneId defaultZone;
    final double[] defaultRange;
    final Map<String, ZoneId> zones = new HashMap<>();
    final Map<String, double[]> ranges = new HashMap<>();
    final Map<String, List<FieldRule>> types = new HashMap<>();
    /** Each event type's field names: a field outside them is refused. */
    final Map<String, Set<String>> fieldNames = new HashMap<>();
    /** Every field name of the contract and its slot in the fast path's value array. */
    final Map<String, Integer> fieldSlots = new HashMap<>();
    /** Per event type, per slot: whether the type has that field. */
    final Map<String, boolean[]> allowedSlots = new HashMap<>();
    private final List<JsonNode> flagRules = new ArrayList<>();
    /** Valid date texts seen lately and their dates (stay dates repeat): the regex and the parse run once per text. */
    private final Map<String, LocalDate> dates = new HashMap<>();

    ContractRules(JsonNode spec) {
        maxBytes = spec.get("max_record_bytes").asInt();
        dlqBytes = spec.get("dlq_payload_bytes").asInt();
        minMs = spec.get("event_time_ms").get(0).asLong();
        maxMs = spec.get("event_time_ms").get(1).asLong();
        uuidText = Pattern.compile(spec.get("text_forms").get("uuid").asText());
        dateText = Pattern.compile(spec.get("text_forms").get("date").asText());
        instantText = Pattern.compile(spec.get("text_forms").get("instant").asText());
        defaultZone = ZoneId.of(spec.get("default_zone").asText());
        defaultRange = range(spec.get("default_price_range"));
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.get("hotels").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> hotel = it.next();
            zones.put(hotel.getKey(), ZoneId.of(hotel.getValue().get("zone").asText()));
            ranges.put(hotel.getKey(), range(hotel.getValue().get("price_range")));
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.get("types").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> type = it.next();
            List<FieldRule> rules = new ArrayList<>();
            Set<String> names = new HashSet<>();
            for (JsonNode node : type.getValue()) {
                FieldRule rule = FieldRule.compile(node);
                rules.add(rule);
                names.add(rule.name);
            }
            types.put(type.getKey(), rules);
            fieldNames.put(type.getKey(), names);
        }
        spec.get("flags").forEach(flagRules::add);
        assignSlots();
    }

    /** Numbers every field name of the contract, and marks which slots each event type allows. */
    private void assignSlots() {
        for (Set<String> names : fieldNames.values()) {
            for (String name : names) {
                fieldSlots.putIfAbsent(name, fieldSlots.size());
            }
        }
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
    }

    private static double[] range(JsonNode node) {
        return new double[] {node.get(0).asDouble(), node.get(1).asDouble()};
    }

    /** The local date of {@code eventMs} in {@code hotel}'s zone (the spec's default zone for an unknown hotel). */
    LocalDate localDate(Object hotel, long eventMs) {
        return java.time.Instant.ofEpochMilli(eventMs).atZone(zones.getOrDefault(hotel, defaultZone)).toLocalDate();
    }

    /** The calendar date of {@code text} (YYYY-MM-DD, year 1 or later, as Python's date), or null. */
    LocalDate date(String text) {
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
        if (dates.size() >= DATES_MAX) {
            dates.clear();  // a bound on memory: the dates in use come back at once
        }
        dates.put(text, date);
        return date;
    }

    /** The spec's flags that an event's values raise, comma separated, or null; {@code field} gives a value by name. */
    String flags(String kind, String hotel, Function<String, Object> field) {
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
}
