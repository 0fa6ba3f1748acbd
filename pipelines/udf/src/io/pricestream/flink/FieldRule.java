package io.pricestream.flink;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * One field rule of the contract spec, compiled: the kind, whether the field is required or
 * nullable, and its allowed values, bounds, lengths and pattern. Both of {@link ParseEvent}'s paths
 * apply it ({@link FastScan} to accept, {@link TreeCheck} to accept or word the refusal).
 */
final class FieldRule {
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

    /** A bound on {@link #accepted} (free text fields would fill it). */
    static final int ACCEPTED_MAX = 4096;

    /** The rule of one entry of a type's field list in the spec. */
    static FieldRule compile(JsonNode node) {
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

    /** Whether {@code v} is within every bound of the rule. */
    boolean inBounds(BigDecimal v) {
        return (minimum == null || v.compareTo(minimum) >= 0)
            && (exclusiveMinimum == null || v.compareTo(exclusiveMinimum) > 0)
            && (maximum == null || v.compareTo(maximum) <= 0)
            && (exclusiveMaximum == null || v.compareTo(exclusiveMaximum) < 0);
    }

    /** Remembers an accepted string, emptying the memory first when it is full. */
    void remember(String s) {
        if (accepted.size() >= ACCEPTED_MAX) {
            accepted.clear();  // a bound on memory (free text fields would fill it)
        }
        accepted.add(s);
    }
}
