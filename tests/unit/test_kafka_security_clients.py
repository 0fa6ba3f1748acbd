"""Every client's security settings on a secure stack, without services: the specs and configs they are given."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import SecretStr

from infra import kafka_security
from infra.config import StackConfig
from infra.druid.supervisors import load_spec
from pricestream.deployment import settings_env
from pricestream.settings import Settings
from pricestream.supervision import programs

PASSWORDS = {p: SecretStr(f"{p}-pw") for p in kafka_security.PRINCIPALS}


def _secure(**extra: object) -> Settings:
    return Settings(state_dir=Path("/tmp/ps-unit"), secure=True, kafka_passwords=PASSWORDS,
                    redis_scorer_password=SecretStr("rs"), redis_writer_password=SecretStr("rw"), **extra)


def test_the_druid_spec_carries_the_druid_principal_login_with_the_unshaded_module() -> None:
    login = kafka_security.java_client_properties(_secure().stack(), "druid", shaded=False)
    spec = load_spec("features.v1", kafka_bootstrap="k:1", consumer_properties=login)
    props = spec["spec"]["ioConfig"]["consumerProperties"]
    assert props["bootstrap.servers"] == "k:1"
    assert (props["security.protocol"], props["sasl.mechanism"]) == ("SASL_PLAINTEXT", "SCRAM-SHA-512")
    assert props["sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule required")
    assert 'username="druid" password="druid-pw"' in props["sasl.jaas.config"]
    plain = load_spec("features.v1", kafka_bootstrap="k:1")["spec"]["ioConfig"]["consumerProperties"]
    assert "sasl.jaas.config" not in plain  # the committed spec is not changed by a secure load


def test_the_feature_job_logs_in_as_features_through_the_connectors_shaded_module() -> None:
    props = _secure().feature_job(connector_jar=Path("/x.jar")).kafka_properties
    assert props["sasl.jaas.config"].startswith(kafka_security.SHADED_JAAS_PACKAGE + ".scram.ScramLoginModule")
    assert 'username="features"' in props["sasl.jaas.config"]
    assert Settings().feature_job(connector_jar=Path("/x.jar")).kafka_properties == {}


def test_each_process_of_a_secure_deployment_gets_its_own_principal_and_redis_user() -> None:
    env = {p.name: p.env for p in programs(_secure(job_writes_online=False), exe="pricestream")}
    assert {n: e.get("PRICESTREAM_KAFKA_PRINCIPAL") for n, e in env.items()} == {
        "features": "features", "online-writer": "online-writer", "offline-writer": "offline-writer",
        "serve": "scorer", "labels": "labels", "sampler": "sampler", "trainer": "trainer", "monitor": "monitor"}
    assert env["serve"]["PRICESTREAM_REDIS_USER"] == "scorer"
    assert env["online-writer"]["PRICESTREAM_REDIS_USER"] == "writer"
    assert all("PRICESTREAM_KAFKA_PRINCIPAL" not in p.env for p in programs(Settings(), exe="pricestream"))
    job = _secure().feature_job(connector_jar=Path("/x.jar"))
    assert job.online is not None and job.online.username == "writer"  # the job writing Redis itself


def test_a_service_login_is_its_principal_and_its_redis_user() -> None:
    s = _secure().acting_as("scorer", redis_user="scorer")
    conf = s.kafka().client_conf()
    assert (conf["sasl.username"], conf["sasl.password"], conf["sasl.mechanisms"]) == ("scorer", "scorer-pw",
                                                                                      "SCRAM-SHA-512")
    features = s.features()
    assert features.redis_username == "scorer" and features.redis_password is not None
    assert features.redis_password.get_secret_value() == "rs"
    assert _secure(kafka_principal="trainer").acting_as("scorer").kafka().sasl_username == "trainer"


def test_settings_env_hands_children_the_secrets_not_their_masks() -> None:
    env = settings_env(_secure(), base={})
    assert json.loads(env["PRICESTREAM_KAFKA_PASSWORDS"])["scorer"] == "scorer-pw"
    assert env["PRICESTREAM_REDIS_SCORER_PASSWORD"] == "rs"
    assert Settings(**{"kafka_passwords": json.loads(env["PRICESTREAM_KAFKA_PASSWORDS"])}).kafka_passwords[
        "trainer"].get_secret_value() == "trainer-pw"


def test_acls_give_the_scorer_no_access_to_training_examples_and_the_sampler_write() -> None:
    bindings = kafka_security.acl_bindings(StackConfig(secure=True, kafka_passwords=PASSWORDS), "p-")
    training = {(b.principal, b.operation.name) for b in bindings if b.name == "p-training.examples"}
    assert ("User:sampler", "WRITE") in training and ("User:trainer", "READ") in training
    assert not any(principal == "User:scorer" for principal, _ in training)
    groups = {(b.principal, b.name) for b in bindings if b.restype.name == "GROUP"}
    assert ("User:features", "pricestream-feature-job") in groups  # the Flink job's group carries no prefix
    assert ("User:labels", "p-feedback-labels") in groups


def test_a_tls_stack_gives_every_client_the_ca(tmp_path: Path) -> None:
    cert = tmp_path / "broker.pem"
    s = _secure(kafka_tls_cert=cert, kafka_tls_key=tmp_path / "broker.key")
    conf = s.acting_as("producer").kafka().client_conf()
    assert (conf["security.protocol"], conf["ssl.ca.location"]) == ("SASL_SSL", str(cert))
    props = s.feature_job(connector_jar=Path("/x.jar")).kafka_properties
    assert (props["security.protocol"], props["ssl.truststore.type"], props["ssl.truststore.location"]) == (
        "SASL_SSL", "PEM", str(cert))
    lines = kafka_security.listener_properties(s.stack(), keystore=(tmp_path / "k.p12", "pw"))
    assert "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT" in lines
    assert f"listener.name.sasl_ssl.ssl.keystore.location={tmp_path / 'k.p12'}" in lines
