"""Model registry: versioned bundle directories and a manifest of what is live per tier.

Layout::

    root/
      manifest.json            versions, promotion history per tier, generation
      light/<version>/         a copy of the registered bundle dir (model.onnx, booster_*.txt, meta.json)
      heavy/<version>/
      hotels/                  per-hotel bundles (a new hotel's refit, :class:`feedback.hotel_models.HotelModels`)

Every manifest write goes to a temporary file that replaces ``manifest.json``
atomically, under an exclusive lock on ``root/.lock``; readers never see a half
written manifest. ``generation`` bumps on every promote and rollback, so a scorer
can poll one integer and reload its models only when it changes.

``on_change`` (optional) is called after every change is on disk, with the registry, the kind
of change (``registered``, ``promoted``, ``rolled_back``) and the version concerned: the
control plane (:mod:`delivery.control_plane`) publishes the new state to every serving
replica from there. Calls that change nothing (registering the same bundle again, promoting
the live version) do not call it.

A bundle written by :func:`pricing.training.train_bundle` keeps its own version
(``meta.json``) so that decisions' ``model_version`` matches the registry;
registering the same bundle twice returns the same version.

Example:
    >>> import tempfile, pathlib
    >>> bundle = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (bundle / "model.onnx").write_bytes(b"onnx")
    >>> reg = ModelRegistry(tempfile.mkdtemp())
    >>> v1 = reg.register(bundle, tier="light", snapshot_id="snap-1")
    >>> reg.promote(v1).status, reg.generation
    ('promoted', 1)
    >>> reg.current("light").version == v1
    True
"""

from __future__ import annotations

import builtins
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from feedback.errors import RegistryError, UnknownVersionError

Status = Literal["registered", "promoted", "retired", "rolled_back"]
Change = Literal["registered", "promoted", "rolled_back"]
MANIFEST = "manifest.json"
_FORMAT = 1
_TIERS = ("rules", "light", "heavy")


@dataclass(frozen=True)
class Entry:
    """One registered model version."""

    version: str
    tier: str
    path: Path
    parent: str | None
    snapshot_id: str | None
    data_range: tuple[str, str] | None
    metrics: dict[str, Any] = field(default_factory=dict)
    onnx_sha256: dict[str, str] = field(default_factory=dict)
    created_at: str = ""
    status: Status = "registered"


def _hash_onnx(bundle: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(bundle.glob("*.onnx"))}


def _checked_bundle(bundle: Path, tier: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The bundle's ``meta.json`` and ONNX hashes, after refusing an unknown tier, a missing directory
    and a ``meta.json`` whose hashes or tier differ (see :func:`_check_meta`)."""
    if tier not in _TIERS:
        msg = f"field 'tier': got {tier!r}, expected one of {list(_TIERS)}"
        raise RegistryError(msg)
    if not bundle.is_dir():
        msg = f"field 'bundle_dir': got {str(bundle)!r}, expected an existing bundle directory"
        raise RegistryError(msg)
    meta, hashes = _read_meta(bundle), _hash_onnx(bundle)
    _check_meta(bundle, meta, hashes, tier)
    return meta, hashes


def _read_meta(bundle: Path) -> dict[str, Any]:
    path = bundle / "meta.json"
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        msg = f"bundle {str(bundle)!r}: meta.json is not JSON ({exc})"
        raise RegistryError(msg) from exc
    return meta if isinstance(meta, dict) else {}


class ModelRegistry:
    """Directory-backed model registry.

    Args:
        root: registry directory (created if missing).
        on_change: ``on_change(registry, change, version)`` after every change is written.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        on_change: Callable[[ModelRegistry, Change, str], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.on_change = on_change

    # ------------------------------------------------------------------ reads
    @property
    def generation(self) -> int:
        """Bumps on every promote and rollback."""
        return int(self._load()["generation"])

    def show(self, version: str) -> Entry:
        """The entry of ``version``.

        Raises:
            UnknownVersionError: if it is not registered.
        """
        manifest = self._load()
        return self._entry(manifest, version)

    def list(self, tier: str | None = None) -> builtins.list[Entry]:
        """Registered versions, oldest first, optionally of one tier."""
        manifest = self._load()
        return [self._entry(manifest, v) for v, row in manifest["versions"].items() if tier in (None, row["tier"])]

    def current(self, tier: str) -> Entry | None:
        """The promoted version of ``tier`` (``None`` if none was promoted)."""
        manifest = self._load()
        history = manifest["history"].get(tier, [])
        return self._entry(manifest, history[-1]) if history else None

    # ------------------------------------------------------------------ writes
    def register(
        self,
        bundle_dir: str | os.PathLike[str],
        *,
        tier: str,
        parent: str | None = None,
        snapshot_id: str | None = None,
        data_range: tuple[datetime, datetime] | None = None,
        metrics: Mapping[str, Any] | None = None,
    ) -> str:
        """Copy a bundle into the registry and record it; returns its version.

        Raises:
            RegistryError: unknown tier, missing dir, ONNX hash or tier differing from ``meta.json``,
                or a version id already taken by different model bytes.
        """
        bundle = Path(bundle_dir)
        meta, hashes = _checked_bundle(bundle, tier)
        with self._locked() as manifest:
            n_tier = sum(row["tier"] == tier for row in manifest["versions"].values())
            version = str(meta.get("version") or f"{tier}-r{n_tier + 1}")
            known = manifest["versions"].get(version)
            if known is not None:
                if known["onnx_sha256"] != hashes or known["tier"] != tier:
                    msg = f"version {version!r} is already registered with other model bytes or another tier"
                    raise RegistryError(msg)
                return version
            self._copy(bundle, tier, version)
            manifest["versions"][version] = {
                "tier": tier,
                "parent": parent if parent is not None else meta.get("parent"),
                "snapshot_id": snapshot_id,
                "data_range": None if data_range is None else [t.isoformat() for t in data_range],
                "metrics": dict(metrics) if metrics is not None else dict(meta.get("metrics") or {}),
                "onnx_sha256": hashes,
                "created_at": datetime.now(tz=UTC).isoformat(),
                "status": "registered",
            }
        self._changed("registered", version)
        return version

    def promote(self, version: str) -> Entry:
        """Make ``version`` the live model of its tier (the previous one stays as rollback target).

        Raises:
            UnknownVersionError: if ``version`` is not registered.
        """
        with self._locked() as manifest:
            row = manifest["versions"].get(version)
            if row is None:
                raise UnknownVersionError(version, known=tuple(manifest["versions"]))
            history: builtins.list[str] = manifest["history"].setdefault(row["tier"], [])
            if history and history[-1] == version:
                return self._entry(manifest, version)
            if history:
                manifest["versions"][history[-1]]["status"] = "retired"
            if version in history:
                history.remove(version)
            history.append(version)
            row["status"] = "promoted"
            manifest["generation"] += 1
            entry = self._entry(manifest, version)
        self._changed("promoted", version)
        return entry

    def rollback(self, tier: str) -> Entry:
        """Retire the live model of ``tier`` and promote the one live before it.

        Raises:
            RegistryError: if ``tier`` has no earlier promoted version.
        """
        with self._locked() as manifest:
            history: builtins.list[str] = manifest["history"].get(tier, [])
            if len(history) < 2:
                msg = f"tier {tier!r}: promoted history {history} has no earlier version to roll back to"
                raise RegistryError(msg)
            manifest["versions"][history.pop()]["status"] = "rolled_back"
            manifest["versions"][history[-1]]["status"] = "promoted"
            manifest["generation"] += 1
            entry = self._entry(manifest, history[-1])
        self._changed("rolled_back", entry.version)
        return entry

    # ------------------------------------------------------------------ internals
    def _changed(self, change: Change, version: str) -> None:
        if self.on_change is not None:
            self.on_change(self, change, version)

    def _entry(self, manifest: dict[str, Any], version: str) -> Entry:
        row = manifest["versions"].get(version)
        if row is None:
            raise UnknownVersionError(version, known=tuple(manifest["versions"]))
        rng = row["data_range"]
        return Entry(
            version=version,
            tier=row["tier"],
            path=self.root / row["tier"] / version,
            parent=row["parent"],
            snapshot_id=row["snapshot_id"],
            data_range=None if rng is None else (rng[0], rng[1]),
            metrics=dict(row["metrics"]),
            onnx_sha256=dict(row["onnx_sha256"]),
            created_at=row["created_at"],
            status=row["status"],
        )

    def _load(self) -> dict[str, Any]:
        return read_json_format(self.root / MANIFEST, _FORMAT, {"generation": 0, "versions": {}, "history": {}})

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write the manifest under an exclusive lock; written only if the block succeeds."""
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                manifest = self._load()
                before = json.dumps(manifest, sort_keys=True)
                yield manifest
                if json.dumps(manifest, sort_keys=True) != before:
                    self._write(manifest)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.root, MANIFEST, manifest)

    def _copy(self, bundle: Path, tier: str, version: str) -> None:
        target = self.root / tier / version
        staging = self.root / tier / f".staging-{uuid.uuid4().hex}"
        shutil.copytree(bundle, staging)
        if target.exists():  # left over by a register that crashed before its manifest write
            shutil.rmtree(target)
        os.replace(staging, target)


def _check_meta(bundle: Path, meta: Mapping[str, Any], hashes: Mapping[str, str], tier: str) -> None:
    if meta.get("tier") not in (None, tier):
        msg = f"bundle {str(bundle)!r}: meta.json tier {meta.get('tier')!r} does not match tier={tier!r}"
        raise RegistryError(msg)
    declared = meta.get("onnx_sha256")
    if isinstance(declared, dict) and any(hashes.get(name) != sha for name, sha in declared.items()):
        msg = f"bundle {str(bundle)!r}: ONNX files do not match the sha256 in meta.json (corrupt or edited bundle)"
        raise RegistryError(msg)



def read_json_format(path: Path, fmt: int, empty: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object at ``path`` with ``"format": fmt`` (``empty`` with that format when there is no file).

    Raises:
        RegistryError: the file's ``format`` is another one (the message names the file, field and both values).
    """
    if not path.exists():
        return {"format": fmt, **empty}
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if value.get("format") != fmt:
        msg = f"{path}: field 'format': got {value.get('format')!r}, expected {fmt}"
        raise RegistryError(msg)
    return value


def write_json_atomic(directory: Path, name: str, value: Mapping[str, Any]) -> None:
    """``directory/name`` replaced atomically by ``value`` as JSON (fsynced before the rename)."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(value, fh, indent=2, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, directory / name)
