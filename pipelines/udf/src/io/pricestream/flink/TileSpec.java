package io.pricestream.flink;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

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

    private TileSpec(SpecNode root) {
        columns.addAll(root.texts("columns"));
        flushMs = root.integer("flush_ms");
        backlogFlushMs = root.integer("backlog_flush_ms");
        backlogLagMs = root.integer("backlog_lag_ms");
        horizonMs = root.integer("horizon_ms");
        timeIdx = column("event_time_ms");
        offsetIdx = column("src_offset");
        publishIdx = column("publish_ms");
        competitorIdx = column("competitor_id");
        rateIdx = column("rate");
        for (SpecNode g : root.items("groups")) {
            List<String> keys = g.texts("keys");
            int[] keyIdx = new int[keys.size()];
            for (int k = 0; k < keyIdx.length; k++) {
                keyIdx[k] = column(keys.get(k));
            }
            Group group = new Group(g.text("name"), keyIdx);
            for (SpecNode v : g.items("views")) {
                View view = view(v);
                group.views.add(view);
                group.featureCount += view.features.size();
            }
            groups.add(group);
        }
    }

    /** One view of a group: its tile, window, partials (by input column) and features (by partial). */
    private View view(SpecNode v) {
        View view = new View(v.text("name"), v.integer("tile_ms"), v.integer("window_ms"), v.flag("rates"));
        List<String> names = v.texts("partials");
        for (String partial : names) {
            view.partials.add(partial(partial));
        }
        for (SpecNode f : v.items("features")) {
            String column = f.nullableText("column");  // null: a feature of no column ("sum:null" is no partial)
            view.features.add(new Feature(f.text("name"), f.text("agg"),
                names.indexOf("sum:" + column), names.indexOf("n:" + column), names.indexOf("sq:" + column)));
        }
        return view;
    }

    /** Parse the spec; every name it uses must be one of its columns. */
    public static TileSpec parse(String json) throws IOException {
        return new TileSpec(SpecNode.parse("tile spec", json));
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
