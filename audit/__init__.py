"""The decision log: an HMAC-keyed hash chain of every price returned, its anchors and verification.

Modules: :mod:`.log` (the append-only chain, verification and repair), :mod:`.anchors`
(chain heads kept apart from the log, in a file), :mod:`.kafka_anchors` (the same heads on a
compacted Kafka topic), :mod:`.errors`.
"""
