package io.pricestream.flink;

import java.util.HashMap;
import java.util.Map;

import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.FunctionHint;
import org.apache.flink.table.functions.AggregateFunction;

/**
 * The latest rate of each competitor in a tile: {@code latest_rates(competitor_id, rate, event_time_ms, offset)}.
 *
 * <p>A mergeable partial for "median / minimum of the competitors' current rates": a tile keeps one rate
 * per competitor (the one with the greatest event time, ties broken by the source offset), tiles merge by
 * keeping each competitor's rate from the newest tile, and the median or minimum is taken across
 * competitors at merge time. Null rates (flagged outliers) and null competitors are ignored. It has a
 * {@code merge}, so the planner may split it into local and global phases under mini-batch.
 */
@FunctionHint(output = @DataTypeHint("MAP<STRING, DOUBLE>"))
public class LatestRates extends AggregateFunction<Map<String, Double>, LatestRates.Acc> {

    /** Per competitor: rate, event time and offset of the newest rate seen. */
    public static class Acc {
        public Map<String, Double> rates = new HashMap<>();
        public Map<String, Long> times = new HashMap<>();
        public Map<String, Long> offsets = new HashMap<>();
    }

    @Override
    public Acc createAccumulator() {
        return new Acc();
    }

    public void accumulate(Acc acc, String competitor, Double rate, Long eventTimeMs, Long offset) {
        if (competitor == null || rate == null || eventTimeMs == null) {
            return;
        }
        offer(acc, competitor, rate, eventTimeMs, offset == null ? -1L : offset);
    }

    private static void offer(Acc acc, String competitor, double rate, long time, long offset) {
        Long heldTime = acc.times.get(competitor);
        if (heldTime != null) {
            long heldOffset = acc.offsets.get(competitor);
            if (heldTime > time || (heldTime == time && heldOffset >= offset)) {
                return;
            }
        }
        acc.rates.put(competitor, rate);
        acc.times.put(competitor, time);
        acc.offsets.put(competitor, offset);
    }

    public void merge(Acc acc, Iterable<Acc> others) {
        for (Acc other : others) {
            for (Map.Entry<String, Double> e : other.rates.entrySet()) {
                String c = e.getKey();
                offer(acc, c, e.getValue(), other.times.get(c), other.offsets.get(c));
            }
        }
    }

    @Override
    public Map<String, Double> getValue(Acc acc) {
        return new HashMap<>(acc.rates);
    }
}
