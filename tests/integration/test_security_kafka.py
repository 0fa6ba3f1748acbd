"""Kafka of a secure stack: a real Kafka 4.x broker started by ``infra.kafka`` with ``secure=True``.

SASL/SCRAM-SHA-512 credentials bootstrapped at format time, ``StandardAuthorizer`` with the
admin as the only super user, least-privilege ACLs per service principal.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from infra import kafka_security
from infra.config import StackConfig

pytestmark = pytest.mark.integration

ATTEMPTS = 100
TOPICS = ("behaviour.events", "pricing.decisions", "pricing.decisions.dlq", "pricing.requests", "features.v1",
          "training.examples", "training.examples.dlq")


@pytest.fixture(scope="module")
def secure(secure_stack: StackConfig) -> StackConfig:
    """The session's secure stack (its broker is shared with the other security tests), with this module's topics."""
    admin = AdminClient(kafka_security.client_config(secure_stack, "admin"))
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        future.result(timeout=60)
    return secure_stack


def _produce(conf: dict[str, Any], topic: str) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer(conf | {"log_level": 0, "message.timeout.ms": 20_000})
    producer.produce(topic, b"{}", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1, "no delivery report"
    return errors[0]


def test_unauthenticated_and_wrong_password_clients_are_refused_every_time(secure: StackConfig) -> None:
    refused = 0
    for i in range(ATTEMPTS):
        if i % 2 == 0:  # no credentials at all: a PLAINTEXT client on the SASL listener
            conf: dict[str, Any] = {"bootstrap.servers": secure.kafka_bootstrap}
        else:  # a known principal with a guessed password
            conf = kafka_security.client_config(secure, "scorer") | {"sasl.password": f"guess-{i}"}
        admin = AdminClient(conf | {"log_level": 0, "socket.connection.setup.timeout.ms": 1000})
        try:
            admin.list_topics(timeout=1.0)
        except KafkaException:
            refused += 1
    assert refused == ATTEMPTS


def test_the_scorer_may_not_write_training_examples(secure: StackConfig) -> None:
    scorer = kafka_security.client_config(secure, "scorer")
    refused = _produce(scorer, "training.examples")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(scorer, "pricing.decisions") is None  # its own output topic works


def test_the_producer_writes_behaviour_events_only(secure: StackConfig) -> None:
    producer = kafka_security.client_config(secure, "producer")
    assert _produce(producer, "behaviour.events") is None
    refused = _produce(producer, "pricing.decisions")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_the_trainer_reads_training_examples_in_its_own_group_only(secure: StackConfig) -> None:
    assert _produce(kafka_security.client_config(secure, "admin"), "training.examples") is None
    trainer = kafka_security.client_config(secure, "trainer")

    def first_message(group: str) -> Any:
        consumer = Consumer(trainer | {"group.id": group, "auto.offset.reset": "earliest", "log_level": 0})
        consumer.subscribe(["training.examples"])
        try:
            for _ in range(60):
                msg = consumer.poll(1.0)
                if msg is not None:
                    return msg
            return None
        finally:
            consumer.close()

    own = first_message(f"trainer-{uuid.uuid4().hex[:6]}")
    assert own is not None and own.error() is None and own.value() == b"{}"
    foreign = first_message(f"scorer-{uuid.uuid4().hex[:6]}")  # a group the trainer has no ACL on
    assert foreign is not None and foreign.error() is not None
    assert foreign.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
