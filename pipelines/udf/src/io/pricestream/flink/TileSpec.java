package io.pricestream.flink;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.json.JsonMapper;

/**
 * The tiled views as the job runs them, read from the JSON that {@code pipelines.job_specs.tile_spec}
 * generates from {@code events.catalog.VIEW_SPECS}: the input columns (by position), the groups of
 * views that share an entity key, and per view its tile, window, partials and features. This class
 * only reads; the declaration lives in {@code events/}.
 */
public final class TileSpec implements Serializable {

    private static final long serialVersionUID = 1L;

    /** How a partial aggregates its column. */
    public enum Kind { EVENTS, SUM, COUNT, SQUARES }

    /** One mergeable partial of a tile; {@code column} is the input position, -1 for the event count. */
    public static final class Partial implements Serializable {
        private static final long serialVersionUID = 1L;
        final Kind kind;
        final int column;

        Partial(Kind kind, int column) {
            this.kind = kind;
            this.column = column;
        }
    }

    /** One feature: its name, aggregation and the positions of its partials (-1 when unused). */
    public static final class Feature implements Serializable {
        private static final long serialVersionUID = 1L;
        final String name;
        final String op;
        final int sum;
        final int count;
        final int squares;

        Feature(String name, String op, int sum, int count, int squares) {
            this.name = name;
            this.op = op;
            this.sum = sum;
            this.count = count;
            this.squares = squares;
        }
    }

    /** A windowed view. */
    public static final class View implements Serializable {
        private static final long serialVersionUID = 1L;
        final String name;
        final long tileMs;
        final long windowMs;
        final boolean rates;
        final List<Partial> partials = new ArrayList<>();
        final List<Feature> features = new ArrayList<>();

        View(String name, long tileMs, long windowMs, boolean rates) {
            this.name = name;
            this.tileMs = tileMs;
            this.windowMs = windowMs;
            this.rates = rates;
        }
    }

    /** Views keyed by the same entity columns. */
    public static final class Group implements Serializable {
        private static final long serialVersionUID = 1L;
        final String name;
        final int[] keyIdx;
        final List<View> views = new ArrayList<>();
        /** Features of all its views: the length of a group row's {@code features}. */
        int featureCount;

        Group(String name, int[] keyIdx) {
            this.name = name;
            this.keyIdx = keyIdx;
        }
    }

    final List<String> columns = new ArrayList<>();
    final List<Group> groups = new ArrayList<>();
    final long flushMs;
    /** The flush interval while the input is behind by more than {@link #backlogLagMs} (catching up). */
    final long backlogFlushMs;
    final long backlogLagMs;
    final long horizonMs;
    final int timeIdx;
    final int offsetIdx;
    final int publishIdx;
    final int competitorIdx;
    final int rateIdx;

    private TileSpec(JsonNode root) {
        for (JsonNode c : root.get("columns")) {
            columns.add(c.asText());
        }
        flushMs = root.get("flush_ms").asLong();
        backlogFlushMs = root.get("backlog_flush_ms").asLong();
        backlogLagMs = root.get("backlog_lag_ms").asLong();
        horizonMs = root.get("horizon_ms").asLong();
        timeIdx = column("event_time_ms");
        offsetIdx = column("src_offset");
        publishIdx = column("publish_ms");
        competitorIdx = column("competitor_id");
        rateIdx = column("rate");
        for (JsonNode g : root.get("groups")) {
            JsonNode keys = g.get("keys");
            int[] keyIdx = new int[keys.size()];
            for (int k = 0; k < keyIdx.length; k++) {
                keyIdx[k] = column(keys.get(k).asText());
            }
            Group group = new Group(g.get("name").asText(), keyIdx);
            for (JsonNode v : g.get("views")) {
                View view = new View(v.get("name").asText(), v.get("tile_ms").asLong(), v.get("window_ms").asLong(),
                                     v.get("rates").asBoolean());
                List<String> names = new ArrayList<>();
                for (JsonNode p : v.get("partials")) {
                    String partial = p.asText();
                    names.add(partial);
                    view.partials.add(partial(partial));
                }
                for (JsonNode f : v.get("features")) {
                    String column = f.get("column").asText();
                    view.features.add(new Feature(f.get("name").asText(), f.get("agg").asText(),
                        names.indexOf("sum:" + column), names.indexOf("n:" + column), names.indexOf("sq:" + column)));
                }
                group.views.add(view);
                group.featureCount += view.features.size();
            }
            groups.add(group);
        }
    }

    /** Parse the spec; every name it uses must be one of its columns. */
    public static TileSpec parse(String json) throws IOException {
        return new TileSpec(JsonMapper.builder().build().readTree(json));
    }

    private Partial partial(String name) {
        if ("n".equals(name)) {
            return new Partial(Kind.EVENTS, -1);
        }
        String[] parts = name.split(":", 2);
        Kind kind;
        switch (parts[0]) {
            case "sum": kind = Kind.SUM; break;
            case "n": kind = Kind.COUNT; break;
            case "sq": kind = Kind.SQUARES; break;
            default: throw new IllegalArgumentException("tile spec: partial '" + name
                + "' is not n, sum:<column>, n:<column> or sq:<column>");
        }
        return new Partial(kind, column(parts[1]));
    }

    private int column(String name) {
        int i = columns.indexOf(name);
        if (i < 0) {
            throw new IllegalArgumentException("tile spec: column '" + name + "' is not among the input columns "
                + columns);
        }
        return i;
    }
}
