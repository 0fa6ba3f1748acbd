"""``pricestream keys``: API keys of the HTTP API (hashed at rest; a running server follows the file).

``add`` prints the new key once (only its hash is kept); ``revoke`` takes a key id or a client
name; a server answers 401 to a revoked key within a second, without a restart.
"""

from __future__ import annotations

from typing import Annotated

import typer

from pricestream.commands.common import fail, new_app, out, settings, table

app = new_app("API keys of the HTTP API (hashed at rest; servers re-read the file).")


@app.command("add")
def add(client: Annotated[str, typer.Argument(help="who holds the key (its rate-limit identity)")]) -> None:
    """Create a key for CLIENT and print it (the only time it is shown)."""
    from serving.auth import KeyStore

    store = KeyStore(settings().keys_file())
    key = store.add(client)
    out.print(key, soft_wrap=True)


@app.command("revoke")
def revoke(ident: Annotated[str, typer.Argument(help="key id, or a client name (revokes all its keys)")]) -> None:
    """Revoke a key (or every key of a client); servers refuse it within a second."""
    from serving.auth import KeyStore

    store = KeyStore(settings().keys_file())
    if not store.revoke(ident):
        fail(f"key: got {ident!r}, expected the id or client of a valid key in {store.path} (see `keys list`)")
    out.print(f"revoked {ident} in {store.path}")


@app.command("list")
def list_keys() -> None:
    """Every key: id, client, created, revoked (never the key)."""
    from serving.auth import KeyStore

    store = KeyStore(settings().keys_file())
    rows = [(r.id, r.client, r.created, r.revoked or "-") for r in store.records()]
    out.print(table(["id", "client", "created", "revoked"], rows, title=str(store.path)))
