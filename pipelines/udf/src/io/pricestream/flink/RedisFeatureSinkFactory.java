package io.pricestream.flink;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Collections;
import java.util.Set;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkV2Provider;
import org.apache.flink.table.factories.DynamicTableSinkFactory;
import org.apache.flink.table.factories.FactoryUtil;

/**
 * {@code 'connector' = 'pricestream-redis'}: a SQL table whose rows (the value rows of
 * {@link TileJob#OUTPUT_NAMES}) go into the online store through {@link RedisFeatureSink}. A table,
 * not a DataStream sink, so that it runs in the job's statement set with the other sinks.
 */
public final class RedisFeatureSinkFactory implements DynamicTableSinkFactory {

    public static final String IDENTIFIER = "pricestream-redis";
    static final ConfigOption<String> SPEC = ConfigOptions.key("spec").stringType().noDefaultValue()
        .withDescription("JSON of pipelines.feature_sql.redis_sink_spec");

    @Override
    public String factoryIdentifier() {
        return IDENTIFIER;
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        return Collections.singleton(SPEC);
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        return Collections.emptySet();
    }

    @Override
    public DynamicTableSink createDynamicTableSink(Context context) {
        FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
        helper.validate();
        return new Table(helper.getOptions().get(SPEC));
    }

    private static final class Table implements DynamicTableSink {
        private final String spec;

        Table(String spec) {
            this.spec = spec;
        }

        @Override
        public ChangelogMode getChangelogMode(ChangelogMode requested) {
            return ChangelogMode.insertOnly();
        }

        @Override
        public SinkRuntimeProvider getSinkRuntimeProvider(Context context) {
            try {
                return SinkV2Provider.of(new RedisFeatureSink(spec));
            } catch (IOException e) {
                throw new UncheckedIOException("redis sink: the spec is not valid JSON", e);
            }
        }

        @Override
        public DynamicTableSink copy() {
            return new Table(spec);
        }

        @Override
        public String asSummaryString() {
            return "online store: redis";
        }
    }
}
