package io.pricestream.flink;

import java.util.Base64;

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
 * filled only then. The rules are the spec's ({@link ContractRules}); a plain record goes through
 * the streaming scan ({@link FastScan}), which only ever accepts, and everything else through the
 * Jackson tree ({@link TreeCheck}), which decides and words the refusal.
 */
@FunctionHint(output = @DataTypeHint(
    "ROW<reason STRING, error_field STRING, error_class STRING, flags STRING, event_type STRING,"
        + " hotel_id STRING, room_type STRING, stay_date DATE, event_time_ms BIGINT, price_shown DOUBLE,"
        + " price_paid DOUBLE, rate DOUBLE, rooms_left INT, capacity INT, rooms INT, nights INT,"
        + " payload_bytes INT, dlq_payload BYTES, competitor_id STRING>"))
public class ParseEvent extends TableFunction<Row> {

    public static final String SPEC_PARAMETER = "pricestream.contract";
    static final int ARITY = 19;

    private transient ContractRules rules;
    private transient FastScan scan;
    private transient TreeCheck tree;
    /** Off only to compare the two paths ({@code pipelines/udf/ParseCheck}): the fast path never refuses. */
    transient boolean fastPath = true;

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
        JsonMapper mapper = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)  // NaN is a number the rules refuse, as pydantic does
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)  // a key twice: refused naming it, as pydantic's path
            .build();
        JsonNode spec = mapper.readTree(Base64.getUrlDecoder().decode(encoded));
        rules = new ContractRules(SpecNode.of("contract spec", spec));
        scan = new FastScan(rules, mapper.getFactory());
        tree = new TreeCheck(rules, mapper);
        fastPath = true;
    }

    public void eval(byte[] payload) {
        collect(parseRow(payload, ARITY));
    }

    /**
     * The row {@link #eval} emits, in a row of {@code arity} fields (at least {@link #ARITY}: the caller's own
     * columns follow the parser's).
     */
    Row parseRow(byte[] payload, int arity) {
        if (fastPath && payload != null && payload.length <= rules.maxBytes && FastScan.plain(payload)) {
            Row row = new Row(arity);
            if (scan.fill(payload, row)) {
                row.setField(16, payload.length);
                return row;
            }
        }
        Row row = new Row(arity);
        try {
            JsonNode event = tree.parse(payload);
            tree.check(event, row);
        } catch (InvalidEvent invalid) {
            row = new Row(arity);
            row.setField(0, invalid.getMessage());
            row.setField(1, invalid.field);
            row.setField(2, invalid.errorClass);
            if (payload != null && payload.length > rules.dlqBytes) {
                row.setField(17, java.util.Arrays.copyOf(payload, rules.dlqBytes));  // what the DLQ keeps of it
            }
        }
        row.setField(16, payload == null ? 0 : payload.length);
        return row;
    }
}
