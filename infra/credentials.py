"""The secure stack's own credentials: passwords that nobody set are generated once, into a 0600 file.

``pricestream up --secure`` needs one SCRAM password per Kafka principal
(:data:`infra.kafka_security.PRINCIPALS`) and one per Redis ACL user (:data:`infra.redis_server.ROLES`).
Like other secure-by-default stacks that create their first credentials, it generates each one that no
setting gives (``PRICESTREAM_KAFKA_PASSWORDS``, ``PRICESTREAM_REDIS_<ROLE>_PASSWORD``) into
``<state>/secrets/stack-passwords.json`` (mode 0600, its folder 0700) and says where; every command
on that state dir reads it (:func:`with_saved`), with a set variable winning over the file.

Example:
    >>> import tempfile
    >>> cfg = StackConfig(state_dir=Path(tempfile.mkdtemp()), secure=True,
    ...                   redis_passwords={"admin": SecretStr("mine")})
    >>> filled, path, made = ensure(cfg)
    >>> oct(path.stat().st_mode & 0o777), len(made), filled.redis_passwords["admin"].get_secret_value()
    ('0o600', 14, 'mine')
    >>> with_saved(StackConfig(state_dir=cfg.state_dir)).kafka_passwords == filled.kafka_passwords
    True
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from infra.config import StackConfig
from infra.errors import StartError

FILE = Path("secrets") / "stack-passwords.json"
"""Under the state dir: ``{"kafka": {principal: password}, "redis": {role: password}}``."""
_TOKEN_BYTES = 24
"""192 random bits per password (URL-safe text: no quoting in JAAS lines or Redis ACL files)."""


def path_of(state_dir: Path) -> Path:
    return state_dir / FILE


def load(state_dir: Path) -> dict[str, dict[str, SecretStr]]:
    """The saved passwords of ``state_dir`` (empty when there is no file).

    Raises:
        ValueError: the file is not an object of string passwords (names the file and the entry).
    """
    path = path_of(state_dir)
    if not path.exists():
        return {"kafka": {}, "redis": {}}
    body = json.loads(path.read_text(encoding="utf-8"))
    saved: dict[str, dict[str, SecretStr]] = {}
    for kind in ("kafka", "redis"):
        entries = body.get(kind, {}) if isinstance(body, dict) else None
        if not isinstance(entries, dict) or not all(isinstance(v, str) and v for v in entries.values()):
            msg = f"{path}: field {kind!r}: expected an object of non-empty password strings"
            raise ValueError(msg)
        saved[kind] = {str(k): SecretStr(v) for k, v in entries.items()}
    return saved


def with_saved(config: StackConfig) -> StackConfig:
    """``config`` with the saved passwords of its state dir under the ones it sets (a set one wins)."""
    saved = load(config.state_dir)
    if not saved["kafka"] and not saved["redis"]:
        return config
    return config.model_copy(update={"kafka_passwords": saved["kafka"] | config.kafka_passwords,
                                     "redis_passwords": saved["redis"] | config.redis_passwords})


def ensure(config: StackConfig) -> tuple[StackConfig, Path, list[str]]:
    """Every password of a secure stack: saved ones, set ones, and new ones for the rest (saved).

    Returns the filled config, the file, and the names generated now (``kafka:admin``, ``redis:writer``, ...).

    Raises:
        StartError: the broker was formatted with Kafka passwords that are neither set nor saved (new ones
            would not match its SCRAM credentials).
    """
    from infra.kafka_security import PRINCIPALS
    from infra.redis_server import ROLES

    config = with_saved(config)
    path = path_of(config.state_dir)
    saved = load(config.state_dir)
    made: list[str] = []
    for kind, names, given in (("kafka", PRINCIPALS, config.kafka_passwords),
                               ("redis", ROLES, config.redis_passwords)):
        for name in names:
            if name not in given or not given[name].get_secret_value():
                saved[kind][name] = SecretStr(secrets.token_urlsafe(_TOKEN_BYTES))
                made.append(f"{kind}:{name}")
    lost = [m.split(":", 1)[1] for m in made if m.startswith("kafka:")]
    if lost and (config.state_dir / "kafka" / "data" / "meta.properties").exists():
        # the broker's SCRAM credentials were formatted from passwords this state dir no longer has
        msg = (f"kafka state {config.state_dir / 'kafka'}: formatted with SCRAM passwords of {lost} that neither "
               f"{path} nor PRICESTREAM_KAFKA_PASSWORDS holds; set them, or start in a fresh PRICESTREAM_STATE_DIR")
        raise StartError(msg)
    if made:
        _write(path, saved)
    return with_saved(config), path, made


def _write(path: Path, saved: dict[str, dict[str, SecretStr]]) -> None:
    """Atomically, created 0600 in a 0700 folder (the passwords are never readable by another user)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    body = {kind: {k: v.get_secret_value() for k, v in sorted(entries.items())} for kind, entries in saved.items()}
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(body, handle, indent=1)
    tmp.chmod(0o600)
    tmp.replace(path)
