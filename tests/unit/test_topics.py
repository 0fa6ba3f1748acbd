"""The topic registry: every input topic has a DLQ twin, names are unique, settings are sane."""

from __future__ import annotations

import re

import pytest

from events.config import KafkaConfig
from events.topics import TOPICS, TopicSpec

_INPUTS = [spec for spec in TOPICS.values() if spec.is_input]
# Kafka's legal topic characters; a dot and an underscore collide in metric names, so we use dots only.
_LEGAL = re.compile(r"^[a-z0-9.\-]+$")


def test_the_pipeline_topics_are_registered_as_inputs() -> None:
    names = {spec.name for spec in _INPUTS}
    assert {"behaviour.events", "features.v1", "pricing.requests", "pricing.decisions", "feedback.labels",
            "training.examples"} <= names


@pytest.mark.parametrize("spec", _INPUTS, ids=lambda s: s.name)
def test_every_input_topic_has_a_dlq_twin(spec: TopicSpec) -> None:
    twin = TOPICS[f"{spec.name}.dlq"]
    assert spec.dlq == twin.name
    assert twin.is_input is False  # a DLQ never gets its own DLQ
    assert twin.key == spec.key
    assert twin.retention_ms >= spec.retention_ms  # dead letters outlive the records they came from
    assert spec.name in twin.description


def test_every_dlq_belongs_to_an_input_topic() -> None:
    dlqs = [name for name in TOPICS if name.endswith(".dlq")]
    assert sorted(dlqs) == sorted(f"{spec.name}.dlq" for spec in _INPUTS)
    state = [spec.name for spec in TOPICS.values() if spec.cleanup_policy == "compact"]
    assert state == ["control.v1"]  # the one state topic: neither an input nor a DLQ
    assert len(TOPICS) == 2 * len(_INPUTS) + len(state) + 1  # + audit.heads, the audit log's anchors


def test_names_are_unique_and_match_their_keys() -> None:
    names = [spec.name for spec in TOPICS.values()]
    assert len(names) == len(set(names))
    assert all(name == spec.name for name, spec in TOPICS.items())
    assert all(_LEGAL.match(name) and len(name) <= 200 for name in names), names


@pytest.mark.parametrize("spec", list(TOPICS.values()), ids=lambda s: s.name)
def test_partitions_retention_and_key_are_set(spec: TopicSpec) -> None:
    assert spec.partitions >= 1
    assert spec.retention_ms >= 24 * 3600 * 1000
    if spec.cleanup_policy == "compact":  # control state: one partition keeps every change in one order
        assert spec.partitions == 1 and not spec.is_input
    elif spec.name == "audit.heads":  # one audit log's anchors stay ordered under its own key
        assert spec.key == "audit log id" and not spec.is_input
    else:
        assert spec.key == "hotel_id"  # one hotel's records stay ordered on one partition
    assert spec.description


def test_registry_is_read_only_and_specs_frozen() -> None:
    with pytest.raises(TypeError):
        TOPICS["rogue"] = TopicSpec(name="rogue")  # type: ignore[index]
    with pytest.raises(ValueError, match="frozen"):
        TOPICS["behaviour.events"].partitions = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match="partitions"):
        TopicSpec(name="x", partitions=0)


def test_prefix_applies_to_the_physical_name_only() -> None:
    config = KafkaConfig(topic_prefix="t123-")
    assert config.topic(TOPICS["behaviour.events"].dlq) == "t123-behaviour.events.dlq"
