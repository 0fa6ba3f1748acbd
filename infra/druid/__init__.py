"""Local Apache Druid: settings, runtime properties, Kafka supervisor specs (see ``infra.druid_stack``)."""
