"""The transports around one pricer: the HTTP app and the stream scorer.

Modules: :mod:`.http` (FastAPI app: ``POST /v1/price``, health, metrics), :mod:`.body`
(the strict request body parser), :mod:`.openapi` (the documented schema), :mod:`.auth`
(API keys and per-client rate limits), :mod:`.stream` (``pricing.requests`` to
``pricing.decisions`` as a consumer group), :mod:`.heavy` (the heavy tier as its own service).
"""
