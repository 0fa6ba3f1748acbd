package io.pricestream.flink;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Base64;
import java.util.List;

import org.apache.flink.types.Row;

/**
 * Test harness of {@code tests/integration/test_parse_paths.py}: each payload (base64, one per line)
 * through {@link ParseEvent} with its fast path and with the tree path only; prints the payloads
 * whose rows differ, then {@code payloads N valid V mismatches M}.
 */
public final class ParseCheck {

    private ParseCheck() {}

    public static void main(String[] args) throws Exception {
        String spec = new String(Files.readAllBytes(Paths.get(args[0]))).trim();
        List<String> lines = Files.readAllLines(Paths.get(args[1]));
        ParseEvent fast = new ParseEvent();
        fast.configure(spec);
        ParseEvent tree = new ParseEvent();
        tree.configure(spec);
        tree.fastPath = false;
        int mismatches = 0;
        int valid = 0;
        for (String line : lines) {
            byte[] payload = Base64.getDecoder().decode(line);
            Row a = fast.parseRow(payload, ParseEvent.ARITY);
            Row b = tree.parseRow(payload, ParseEvent.ARITY);
            valid += b.getField(0) == null ? 1 : 0;
            if (!a.equals(b)) {
                mismatches++;
                System.out.println("DIFF " + line + " fast " + a + " tree " + b);
            }
        }
        System.out.println("payloads " + lines.size() + " valid " + valid + " mismatches " + mismatches);
    }
}
