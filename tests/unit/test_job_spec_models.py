"""The feature job's specs are typed models: each JSON spec parses back into its model unchanged, and a
spec with an unknown field or a value of the wrong kind is refused in Python, before any JVM reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.job_specs import redis_sink_spec, sink_spec, source_spec, tile_spec
from pipelines.spec_models import JobSpec, KafkaTarget, RedisSinkSpec, SinkSpec, SourceSpec, TileSpec

CASES: list[tuple[Callable[[FeatureJobConfig], str], type[JobSpec]]] = [
    (sink_spec, SinkSpec), (source_spec, SourceSpec), (tile_spec, TileSpec), (redis_sink_spec, RedisSinkSpec),
]


def _config(*, accepted_topic: str | None = "behaviour.events.accepted", topic_prefix: str = "") -> FeatureJobConfig:
    online = OnlineSink(redis_url="redis+cluster://10.0.0.1:7000,10.0.0.2:7001", project="p2",
                        username="writer", password="s3cret")
    return FeatureJobConfig(connector_jar=Path("/x.jar"), online=online, accepted_topic=accepted_topic,
                            topic_prefix=topic_prefix)


@pytest.mark.parametrize(("write", "model"), CASES)
@pytest.mark.parametrize("accepted_topic", [None, "behaviour.events.accepted"])
def test_each_spec_parses_back_into_its_model_unchanged(write: Callable, model: type[BaseModel],
                                                        accepted_topic: str | None) -> None:
    text = write(_config(accepted_topic=accepted_topic, topic_prefix="h3."))
    parsed = model.model_validate_json(text)
    assert isinstance(parsed, JobSpec)
    assert parsed.to_json() == text


def test_a_spec_with_an_unknown_field_or_a_wrong_kind_of_value_is_refused() -> None:
    spec = json.loads(sink_spec(_config()))
    with pytest.raises(ValidationError, match="topic_name"):
        SinkSpec.model_validate({**spec, "features": {**spec["features"], "topic_name": "x"}})
    with pytest.raises(ValidationError, match="delivery"):
        KafkaTarget.model_validate({"topic": "t", "delivery": "twice", "transactional_id_prefix": "p",
                                    "properties": {}})
    redis = json.loads(redis_sink_spec(_config()))
    assert redis["cluster"] == [["10.0.0.1", 7000], ["10.0.0.2", 7001]] and redis["user"] == "writer"
    with pytest.raises(ValidationError, match="port"):
        RedisSinkSpec.model_validate({**redis, "port": "not a port"})
