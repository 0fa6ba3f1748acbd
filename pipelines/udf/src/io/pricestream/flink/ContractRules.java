package io.pricestream.flink;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Pattern;

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
    private final List<FlagRule> flagRules = new ArrayList<>();
    /** Valid date texts seen lately and their dates (stay dates repeat): the regex and the parse run once per text. */
    private final Map<String, LocalDate> dates = new HashMap<>();

    /** Compiles {@code spec}, the contract spec read through {@link SpecNode} (named "contract spec" in errors). */
    ContractRules(SpecNode spec) {
        maxBytes = spec.int32("max_record_bytes");
        dlqBytes = spec.int32("dlq_payload_bytes");
        long[] eventTimeMs = spec.integers("event_time_ms");
        if (eventTimeMs.length != 2) {
            throw new IllegalArgumentException("contract spec: field event_time_ms: got " + eventTimeMs.length
                + " items, expected [min, max) epoch milliseconds");
        }
        minMs = eventTimeMs[0];
        maxMs = eventTimeMs[1];
        SpecNode forms = spec.object("text_forms");
        uuidText = Pattern.compile(forms.text("uuid"));
        dateText = Pattern.compile(forms.text("date"));
        instantText = Pattern.compile(forms.text("instant"));
        defaultZone = ZoneId.of(spec.text("default_zone"));
        defaultRange = spec.numbers("default_price_range");
        for (Map.Entry<String, SpecNode> hotel : spec.members("hotels").entrySet()) {
            zones.put(hotel.getKey(), ZoneId.of(hotel.getValue().text("zone")));
            ranges.put(hotel.getKey(), hotel.getValue().numbers("price_range"));
        }
        for (Map.Entry<String, SpecNode> type : spec.members("types").entrySet()) {
            List<FieldRule> rules = new ArrayList<>();
            Set<String> names = new HashSet<>();
            for (SpecNode node : type.getValue().elements()) {
                FieldRule rule = FieldRule.compile(node);
                rules.add(rule);
                names.add(rule.name);
            }
            types.put(type.getKey(), rules);
            fieldNames.put(type.getKey(), names);
        }
        for (SpecNode flag : spec.items("flags")) {
            flagRules.add(new FlagRule(flag));
        }
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

    /**
     * One flag of the spec, compiled: an equality flag ({@code event_type}, {@code field}, {@code equals})
     * or a range flag ({@code fields} outside the hotel's price range, zero skipped if {@code skip_zero}).
     */
    private static final class FlagRule {
        final String flag;
        /** The equality flag's value; null for a range flag. */
        final BigDecimal equals;
        final String eventType;
        final String field;
        final List<String> fields;
        final boolean skipZero;

        FlagRule(SpecNode rule) {
            flag = rule.text("flag");
            equals = rule.decimalOrNull("equals");
            eventType = equals == null ? null : rule.text("event_type");
            field = equals == null ? null : rule.text("field");
            fields = equals == null ? rule.texts("fields") : List.of();
            skipZero = rule.flagOr("skip_zero", false);
        }
    }

    /** The spec's flags that an event's values raise, comma separated, or null; {@code field} gives a value by name. */
    String flags(String kind, String hotel, Function<String, Object> field) {
        StringBuilder out = null;
        for (FlagRule rule : flagRules) {
            boolean hit = false;
            if (rule.equals != null) {
                Object v = field.apply(rule.field);
                hit = kind.equals(rule.eventType) && (v instanceof Long || v instanceof Double)
                    && decimal(v).compareTo(rule.equals) == 0;
            } else {
                double[] r = ranges.getOrDefault(hotel, defaultRange);
                for (String name : rule.fields) {
                    Object v = field.apply(name);
                    if (v instanceof Long || v instanceof Double) {
                        double x = ((Number) v).doubleValue();
                        if (!(rule.skipZero && x == 0) && (x < r[0] || x > r[1])) {
                            hit = true;
                        }
                    }
                }
            }
            if (hit) {
                out = out == null ? new StringBuilder() : out.append(',');
                out.append(rule.flag);
            }
        }
        return out == null ? null : out.toString();
    }

    private static BigDecimal decimal(Object v) {
        return v instanceof Long ? BigDecimal.valueOf((Long) v) : BigDecimal.valueOf((Double) v);
    }
}
