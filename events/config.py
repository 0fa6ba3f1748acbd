"""Configuration for the Kafka adapters (data, validated at start-up)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class KafkaConfig(BaseModel):
    """Where Kafka is and how to talk to it.

    Example:
        >>> KafkaConfig().bootstrap_servers
        '127.0.0.1:9092'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: str = "PLAINTEXT"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_mechanism: str | None = None
    """``sasl.mechanisms`` (e.g. ``SCRAM-SHA-512``); unset: librdkafka's default."""
    ssl_ca_location: str | None = None
    """CA certificate (PEM) that signs the broker's TLS certificate (``SASL_SSL``, ``SSL``)."""
    topic_prefix: str = ""
    client_id: str = "pricestream"
    linger_ms: int = Field(default=5, ge=0)
    batch_size: int = Field(default=1_000_000, gt=0)

    def client_conf(self) -> dict[str, str | int]:
        """Common confluent-kafka settings for producers, consumers and admin."""
        conf: dict[str, str | int] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "client.id": self.client_id,
        }
        if self.sasl_username and self.sasl_password:
            conf["sasl.username"] = self.sasl_username
            conf["sasl.password"] = self.sasl_password.get_secret_value()
        if self.sasl_mechanism:
            conf["sasl.mechanisms"] = self.sasl_mechanism
        if self.ssl_ca_location:
            conf["ssl.ca.location"] = self.ssl_ca_location
        return conf

    def topic(self, name: str) -> str:
        """Physical name of a logical topic (the prefix isolates tests and tenants)."""
        return f"{self.topic_prefix}{name}"
