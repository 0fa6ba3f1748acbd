package io.pricestream.flink;

import java.io.IOException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.json.JsonMapper;

/**
 * One object or array of a job spec's JSON ({@code pipelines.job_specs}, {@code events.contract.job_spec}),
 * read with types. The typed specs ({@link SinkSpec}, {@link SourceSpec}, {@link TileSpec},
 * {@link RedisSinkSpec}, and the contract's {@link ContractRules}) read their JSON only through it, so a
 * field that is missing or of the wrong type fails at submission with a message naming the spec, the
 * field's path and what was expected, never as a null or a zero later on.
 */
final class SpecNode {
    private final String spec;
    private final String path;
    private final JsonNode node;

    private SpecNode(String spec, String path, JsonNode node) {
        this.spec = spec;
        this.path = path;
        this.node = node;
    }

    /** The root object {@code root} (already parsed), the spec named {@code spec} in messages. */
    static SpecNode of(String spec, JsonNode root) {
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException(spec + ": got " + clip(root) + ", expected a JSON object");
        }
        return new SpecNode(spec, "", root);
    }

    /** The root object of {@code json}, the spec named {@code spec} in messages ("sink spec"). */
    static SpecNode parse(String spec, String json) throws IOException {
        return of(spec, JsonMapper.builder().build().readTree(json));
    }

    private String at(String field) {
        return path.isEmpty() ? field : path + "." + field;
    }

    private String at(int index) {
        return path + "[" + index + "]";
    }

    private IllegalArgumentException wrong(String where, JsonNode value, String expected) {
        String got = value == null || value.isMissingNode() ? "nothing (the field is missing)" : clip(value);
        return new IllegalArgumentException(spec + ": field " + where + ": got " + got + ", expected " + expected);
    }

    private static String clip(JsonNode value) {
        String s = String.valueOf(value);
        return s.length() <= 120 ? s : s.substring(0, 120) + "...";
    }

    private JsonNode field(String field) {
        if (!node.isObject()) {
            throw wrong(path, node, "a JSON object with field " + field);
        }
        return node.get(field);
    }

    private JsonNode item(int index) {
        if (!node.isArray() || index >= node.size()) {
            throw wrong(path, node, "a JSON array of at least " + (index + 1) + " items");
        }
        return node.get(index);
    }

    /** Whether the object has {@code field} with a value other than null (an optional field). */
    boolean has(String field) {
        JsonNode value = field(field);
        return value != null && !value.isNull();
    }

    String text(String field) {
        return text(at(field), field(field));
    }

    /** Whether this node (an item of a mixed array) is text. */
    boolean isText() {
        return node.isTextual();
    }

    /** This node's text. */
    String asText() {
        return text(path, node);
    }

    /** This node's number, exactly. */
    BigDecimal asDecimal() {
        if (!node.isNumber()) {
            throw wrong(path, node, "a number");
        }
        return node.decimalValue();
    }

    /** The number of the optional {@code field}, exactly, or null where it is absent. */
    BigDecimal decimalOrNull(String field) {
        if (!has(field)) {
            return null;
        }
        JsonNode value = field(field);
        if (!value.isNumber()) {
            throw wrong(at(field), value, "a number");
        }
        return value.decimalValue();
    }

    /** The optional boolean {@code field}, {@code otherwise} where it is absent. */
    boolean flagOr(String field, boolean otherwise) {
        return has(field) ? flag(field) : otherwise;
    }

    /** The optional 32-bit integer {@code field}, {@code otherwise} where it is absent. */
    int int32Or(String field, int otherwise) {
        return has(field) ? int32(field) : otherwise;
    }

    /** The items of this node, an array, each read with types in turn. */
    List<SpecNode> elements() {
        if (!node.isArray()) {
            throw wrong(path, node, "a JSON array");
        }
        List<SpecNode> out = new ArrayList<>(node.size());
        for (int i = 0; i < node.size(); i++) {
            out.add(new SpecNode(spec, at(i), node.get(i)));
        }
        return out;
    }

    /** The array {@code field} of numbers, as doubles. */
    double[] numbers(String field) {
        List<SpecNode> items = items(field);
        double[] out = new double[items.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = items.get(i).asDecimal().doubleValue();
        }
        return out;
    }

    /** The text of {@code field}, or null where its value is null (the field itself must be there). */
    String nullableText(String field) {
        JsonNode value = field(field);
        return value != null && value.isNull() ? null : text(at(field), value);
    }

    String text(int index) {
        return text(at(index), item(index));
    }

    private String text(String where, JsonNode value) {
        if (value == null || !value.isTextual()) {
            throw wrong(where, value, "text");
        }
        return value.asText();
    }

    long integer(String field) {
        return integer(at(field), field(field));
    }

    long integer(int index) {
        return integer(at(index), item(index));
    }

    private long integer(String where, JsonNode value) {
        if (value == null || !value.isIntegralNumber() || !value.canConvertToLong()) {
            throw wrong(where, value, "an integer");
        }
        return value.asLong();
    }

    int int32(String field) {
        return int32(at(field), field(field));
    }

    int int32(int index) {
        return int32(at(index), item(index));
    }

    private int int32(String where, JsonNode value) {
        if (value == null || !value.isIntegralNumber() || !value.canConvertToInt()) {
            throw wrong(where, value, "a 32-bit integer");
        }
        return value.asInt();
    }

    boolean flag(String field) {
        JsonNode value = field(field);
        if (value == null || !value.isBoolean()) {
            throw wrong(at(field), value, "true or false");
        }
        return value.asBoolean();
    }

    /** The object of {@code field}. */
    SpecNode object(String field) {
        JsonNode value = field(field);
        if (value == null || !value.isObject()) {
            throw wrong(at(field), value, "a JSON object");
        }
        return new SpecNode(spec, at(field), value);
    }

    /** The object of {@code field}, or null where its value is null (the field itself must be there). */
    SpecNode nullableObject(String field) {
        JsonNode value = field(field);
        return value != null && value.isNull() ? null : object(field);
    }

    /** The items of the array {@code field} (objects or arrays), each read with types in turn. */
    List<SpecNode> items(String field) {
        JsonNode value = array(field);
        List<SpecNode> out = new ArrayList<>(value.size());
        for (int i = 0; i < value.size(); i++) {
            out.add(new SpecNode(spec, at(field) + "[" + i + "]", value.get(i)));
        }
        return out;
    }

    /** The array {@code field} of texts. */
    List<String> texts(String field) {
        JsonNode value = array(field);
        List<String> out = new ArrayList<>(value.size());
        for (int i = 0; i < value.size(); i++) {
            out.add(text(at(field) + "[" + i + "]", value.get(i)));
        }
        return out;
    }

    /** The array {@code field} of integers. */
    long[] integers(String field) {
        JsonNode value = array(field);
        long[] out = new long[value.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = integer(at(field) + "[" + i + "]", value.get(i));
        }
        return out;
    }

    private JsonNode array(String field) {
        JsonNode value = field(field);
        if (value == null || !value.isArray()) {
            throw wrong(at(field), value, "a JSON array");
        }
        return value;
    }

    /** The members of the object {@code field}, in their order, each read with types. */
    Map<String, SpecNode> members(String field) {
        SpecNode object = object(field);
        Map<String, SpecNode> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = object.node.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> member = it.next();
            out.put(member.getKey(), new SpecNode(spec, object.at(member.getKey()), member.getValue()));
        }
        return out;
    }

    /** The object {@code field} of texts, in its order. */
    Map<String, String> textMembers(String field) {
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, SpecNode> member : members(field).entrySet()) {
            out.put(member.getKey(), text(member.getValue().path, member.getValue().node));
        }
        return out;
    }

    /** The object {@code field} of arrays of texts, in its order. */
    Map<String, String[]> textArrayMembers(String field) {
        Map<String, String[]> out = new LinkedHashMap<>();
        for (Map.Entry<String, SpecNode> member : members(field).entrySet()) {
            SpecNode value = member.getValue();
            if (!value.node.isArray()) {
                throw wrong(value.path, value.node, "a JSON array of texts");
            }
            String[] texts = new String[value.node.size()];
            for (int i = 0; i < texts.length; i++) {
                texts[i] = value.text(i);
            }
            out.put(member.getKey(), texts);
        }
        return out;
    }
}
