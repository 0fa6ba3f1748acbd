package io.pricestream.flink;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;

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
    static FieldRule compile(SpecNode node) {
        FieldRule rule = new FieldRule();
        rule.name = node.text("name");
        rule.kind = node.text("kind");
        rule.required = node.flagOr("required", false);
        rule.nullable = node.flagOr("nullable", false);
        if (node.has("values")) {
            for (SpecNode value : node.items("values")) {
                if (value.isText()) {
                    rule.textValues.add(value.asText());
                } else {
                    rule.numberValues.add(value.asDecimal());
                }
            }
        }
        rule.minimum = node.decimalOrNull("minimum");
        rule.maximum = node.decimalOrNull("maximum");
        rule.exclusiveMinimum = node.decimalOrNull("exclusiveMinimum");
        rule.exclusiveMaximum = node.decimalOrNull("exclusiveMaximum");
        rule.minLength = node.int32Or("minLength", -1);
        rule.maxLength = node.int32Or("maxLength", -1);
        rule.pattern = node.has("pattern") ? Pattern.compile(node.text("pattern")) : null;
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
