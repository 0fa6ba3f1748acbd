"""The audit log's anchors on the ``audit.heads`` topic of a secure stack (``secure_stack``), with its own ACL.

The scorer principal publishes the anchors and cannot read them back; ``pricestream audit verify``
reads them as the ``auditor`` principal, which may read that topic and nothing else. An editor
who cuts the log, deletes its ``.head`` and cuts the anchor file to match leaves files that verify
on their own: the topic's anchors catch it.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from audit.anchors import anchors_path, resolve_key
from audit.errors import AuditLogError
from audit.kafka_anchors import TopicAnchorPublisher, read_topic_anchors
from audit.log import AuditLog, head_path
from audit.verify import verify
from events.admin import create_topics
from infra.config import StackConfig
from infra.kafka_security import apply_acls
from pricestream.deployment import settings_env
from pricestream.settings import Settings
from pricestream.supervision import executable

pytestmark = pytest.mark.integration

KEY = "audit-topic-test-key-0123456789"
ENTRIES, FLUSH_EVERY, KEEP = 40, 4, 20
"""Anchor interval 0: one anchor per fsync, i.e. per 4 entries; the editor keeps the first 20 entries."""


@pytest.fixture(scope="module")
def settings(secure_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    pw = secure_stack.redis_passwords
    s = Settings(state_dir=tmp_path_factory.mktemp("audit-topic"), cache_dir=secure_stack.cache_dir,
                 kafka_port=secure_stack.kafka_port, kafka_controller_port=secure_stack.kafka_controller_port,
                 redis_port=secure_stack.redis_port, secure=True, kafka_passwords=secure_stack.kafka_passwords,
                 redis_admin_password=pw["admin"], topic_prefix=f"t{uuid.uuid4().hex[:8]}-", audit_key=KEY)
    create_topics(s.kafka())  # as the admin
    apply_acls(s.stack(), s.topic_prefix)
    return s


def _write(s: Settings, path: Path) -> None:
    scorer = s.acting_as("scorer").kafka()
    with AuditLog(path, key=KEY, flush_every=FLUSH_EVERY, fsync_interval_s=3600.0, anchor_interval_s=0,
                  on_anchor=TopicAnchorPublisher(scorer, path)) as log:
        for i in range(ENTRIES):
            log.append_entry({"tier": "light", "decision": {"hotel_id": f"h{i % 4}", "price": 100.0 + i}})


def _cut(path: Path) -> None:
    """What an editor of the host does: keep the first KEEP entries, drop the head, cut the anchors to match."""
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:KEEP]))
    head_path(path).unlink()
    anchors = anchors_path(path)
    kept = [a for a in anchors.read_bytes().splitlines(keepends=True) if json.loads(a)["seq"] <= KEEP]
    anchors.write_bytes(b"".join(kept))


def test_a_cut_log_with_its_head_deleted_is_caught_by_the_topic_anchors(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    _write(settings, path)
    key = resolve_key(KEY)
    where, anchored = read_topic_anchors(settings.kafka(), path, key)  # the admin reads the topic
    assert (anchored.count, anchored.last_seq, anchored.error) == (ENTRIES // FLUSH_EVERY, ENTRIES, "")
    assert verify(path, key=KEY, remote=(where, anchored)).ok

    _cut(path)
    assert verify(path, key=KEY).ok  # the files alone no longer show the cut
    result = verify(path, key=KEY, remote=read_topic_anchors(settings.kafka(), path, key))
    assert (result.ok, result.first_bad_position) == (False, KEEP + 1)
    assert result.reason == (f"log ends at seq {KEEP} but topic '{settings.topic_prefix}audit.heads' anchors "
                             f"seq {ENTRIES}: entries removed from the end")

    env = {**settings_env(settings), "PRICESTREAM_AUDIT_LOG": str(path)}
    done = subprocess.run([executable(), "audit", "verify"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"chain broken at line {KEEP + 1}: log ends at seq {KEEP} but topic" in done.stderr


def test_the_scorer_writes_the_anchors_topic_but_cannot_read_it(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    _write(settings, path)
    scorer = settings.acting_as("scorer").kafka()
    topic = scorer.topic("audit.heads")
    admin = AdminClient({**scorer.client_conf(), "log_level": 0})
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic]
    allowed = {op.name for op in described.result(timeout=30).authorized_operations}
    assert allowed == {"WRITE", "DESCRIBE"}  # the broker's word: no READ, no DELETE for the scorer
    with pytest.raises(AuditLogError, match="cannot be read"):
        read_topic_anchors(scorer, path, resolve_key(KEY))
    trainer = settings.acting_as("trainer").kafka()
    publisher = TopicAnchorPublisher(trainer, path)  # another service may not add anchors
    publisher({"n": 1, "seq": 1, "hash": "0" * 64, "prev": "0" * 64, "at": "t", "mac": "0" * 64})
    publisher.close()
    assert publisher.failed == 1


def test_the_auditor_reads_the_anchors_topic_and_nothing_else(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "audited.jsonl"
    _write(settings, path)
    auditor = settings.acting_as("auditor").kafka()
    assert auditor.sasl_username == "auditor"
    admin = AdminClient({**auditor.client_conf(), "log_level": 0})
    topics = [auditor.topic("audit.heads"), auditor.topic("pricing.decisions")]
    described = admin.describe_topics(TopicCollection(topics), include_authorized_operations=True)
    allowed = {op.name for op in described[topics[0]].result(timeout=30).authorized_operations}
    assert allowed == {"READ", "DESCRIBE"}  # no WRITE: the auditor cannot add or forge anchors
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        described[topics[1]].result(timeout=30)
    where, anchored = read_topic_anchors(auditor, path, resolve_key(KEY))
    assert (anchored.count, anchored.last_seq, anchored.error) == (ENTRIES // FLUSH_EVERY, ENTRIES, "")
    assert verify(path, key=KEY, remote=(where, anchored)).ok
    with pytest.raises(AuditLogError, match="cannot be read"):  # another topic: refused by the broker
        read_topic_anchors(auditor, path, resolve_key(KEY), topic="pricing.decisions")

    env = {**settings_env(settings), "PRICESTREAM_AUDIT_LOG": str(path)}
    done = subprocess.run([executable(), "audit", "verify"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr  # the command logs in as the auditor
    refused = subprocess.run([executable(), "audit", "verify"], env={**env, "PRICESTREAM_KAFKA_PRINCIPAL": "scorer"},
                             capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "cannot be read" in refused.stderr
