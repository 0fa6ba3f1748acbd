"""The feature store: Feast repo, online and offline writers, snapshots, analyst queries.

Importing Feast switches ``prometheus_client`` to multiprocess mode for the whole
process (its metrics module sets ``PROMETHEUS_MULTIPROC_DIR`` before the client is
first imported), after which every registry shares one set of value files and the
scorer's per-registry counters would add up across instances. Importing the client
first fixes its value class to the ordinary in-process one.
"""

from __future__ import annotations

import prometheus_client.values  # noqa: F401  (must precede any feast import; see above)
