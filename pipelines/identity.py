"""Which job a checkpoint directory belongs to: its source topic, group and sink, written beside the checkpoints.

A restore carries the Kafka source's offsets and the tiles of the topics the job read; restored into
a job reading other topics (another deployment's prefix, a backfill's topic), it would mix two
streams' state. :func:`write_identity` records the job in ``<checkpoints>/job.json`` when it starts;
:func:`check_restore` refuses a restore path whose recorded job reads another source topic.

Example:
    >>> import tempfile
    >>> from pipelines.config import FeatureJobConfig
    >>> root = Path(tempfile.mkdtemp())
    >>> ours = FeatureJobConfig(connector_jar=Path("/x.jar"), topic_prefix="a.", checkpoint_dir=root)
    >>> write_identity(ours).name
    'job.json'
    >>> theirs = FeatureJobConfig(connector_jar=Path("/x.jar"), topic_prefix="b.", checkpoint_dir=root,
    ...                           restore_from=root / "a.features" / "j1" / "chk-3")
    >>> check_restore(theirs)
    Traceback (most recent call last):
    ...
    pipelines.errors.RestoreMismatch: restore_from .../a.features/j1/chk-3: written by a job reading topic \
'a.behaviour.events', expected one reading 'b.behaviour.events' (this job); give a checkpoint of this job \
or run with --fresh
"""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.config import FeatureJobConfig
from pipelines.errors import RestoreMismatch

IDENTITY_FILE = "job.json"
_SEARCH_DEPTH = 4
"""How far above a restore path its checkpoint root can be (``<root>/<job id>/chk-<n>``, ``<root>/savepoints/<id>``)."""


def identity(config: FeatureJobConfig) -> dict[str, str]:
    """What identifies the job's state: the topic it reads, its group and the topic it writes."""
    return {"source_topic": config.topic(config.source_topic), "group_id": config.scoped(config.group_id),
            "sink_topic": config.topic(config.sink_topic)}


def write_identity(config: FeatureJobConfig) -> Path | None:
    """Record the job in its checkpoint directory (None when it has none)."""
    root = config.checkpoints
    if root is None:
        return None
    root.mkdir(parents=True, exist_ok=True)
    path = root / IDENTITY_FILE
    path.write_text(json.dumps(identity(config), indent=1, sort_keys=True))
    return path


def recorded(restore: Path) -> dict[str, str] | None:
    """The identity recorded at or above ``restore`` (the nearest ``job.json``), or None."""
    for directory in [restore, *restore.parents][:_SEARCH_DEPTH]:
        path = directory / IDENTITY_FILE
        if path.is_file():
            body = json.loads(path.read_text())
            return body if isinstance(body, dict) else None
    return None


def check_restore(config: FeatureJobConfig) -> None:
    """Refuse a restore whose state was written by a job reading another topic.

    Raises:
        RestoreMismatch: names the path, the recorded topic and this job's.
    """
    if config.restore_from is None:
        return
    found = recorded(config.restore_from)
    expected = config.topic(config.source_topic)
    if found is not None and found.get("source_topic") != expected:
        msg = (f"restore_from {config.restore_from}: written by a job reading topic {found.get('source_topic')!r}, "
               f"expected one reading {expected!r} (this job); give a checkpoint of this job or run with --fresh")
        raise RestoreMismatch(msg)
