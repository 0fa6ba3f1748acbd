"""``pricestream heavy serve``: the heavy tier as its own service (``serving.heavy``)."""

from __future__ import annotations

import threading
from typing import Annotated

import typer

from pricestream.commands.common import ensure_bindable, err, new_app, settings

app = new_app("The heavy tier as its own service, scaled apart from the scorers (PRICESTREAM_HEAVY_TIER=remote).")


@app.command("serve")
def heavy_serve(
    host: Annotated[str | None, typer.Option(envvar="PRICESTREAM_HTTP_HOST", help="bind address")] = None,
    port: Annotated[int | None, typer.Option(envvar="PRICESTREAM_HEAVY_PORT", min=1, max=65535)] = None,
) -> None:
    """Serve ``POST /v1/quote`` with the registry's live heavy model, following promotions and rollbacks.

    With ``PRICESTREAM_CONTROL_PLANE=kafka`` the live version comes from ``control.v1`` (bundles from the
    shared model store, sha256 verified); otherwise from the registry directory. Scorers reach it with
    ``PRICESTREAM_HEAVY_TIER=remote`` and ``PRICESTREAM_HEAVY_URL``, within ``PRICESTREAM_HEAVY_DEADLINE_MS``.
    """
    import uvicorn

    from pricestream.control import enabled, follow_models
    from pricestream.wiring import ensure_models, pricer_loader
    from pricing.scorer import ModelSource
    from serving.heavy import HeavySlot, create_heavy_app

    s = settings().model_copy(update={"heavy_tier": "local"})  # this process holds the model itself
    ensure_bindable(host or s.http_host, port or s.heavy_port, what="heavy serve --port")  # before the models
    follower = None
    if enabled(s):
        follower = follow_models(s)
        follower.start()
        models: ModelSource = follower.state
    else:
        from feedback.registry import ModelRegistry

        registry = ModelRegistry(s.registry())
        ensure_models(registry, seed=s.seed, rows=s.bootstrap_rows, cache_dir=s.cache_dir)
        models = registry
    slot = HeavySlot(models, loader=pricer_loader(s))
    slot.refresh()
    stop = threading.Event()

    def follow() -> None:
        while not stop.wait(s.follow_interval_s):
            try:
                if slot.refresh():
                    err.print(f"heavy model now {slot.pricer.version if slot.pricer else None}")
            except Exception as exc:  # noqa: BLE001 - a failed reload keeps the model in force
                err.print(f"[yellow]heavy model reload failed, keeping the current one[/yellow]: {exc}")

    threading.Thread(target=follow, name="heavy-follower", daemon=True).start()
    bind_host, bind_port = host or s.http_host, port or s.heavy_port
    err.print(f"heavy tier on http://{bind_host}:{bind_port}  model {slot.pricer.version if slot.pricer else None}")
    try:
        uvicorn.run(create_heavy_app(slot), host=bind_host, port=bind_port, log_level="warning")
    finally:
        stop.set()
        if follower is not None:
            follower.stop()
