"""``stoppable``: SIGTERM sets the stop event; a process that overruns its grace period is ended with code 75."""

from __future__ import annotations

import signal
import subprocess
import sys

from pricestream.commands.common import EXIT_GRACE_EXCEEDED

_CHILD = """
import sys, time
from pricestream.commands.common import stoppable
with stoppable({grace}) as stop:
    print("ready", flush=True)
    stop.wait()
    time.sleep({work})  # the batch in hand, the flush, the commit
print("clean", flush=True)
"""


def _run(grace: float, work: float) -> tuple[int, str]:
    child = subprocess.Popen([sys.executable, "-c", _CHILD.format(grace=grace, work=work)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=60)
    return child.returncode, out.strip()


def test_sigterm_lets_the_work_in_hand_finish_within_the_grace_period() -> None:
    assert _run(grace=30.0, work=0.2) == (0, "clean")


def test_a_stop_that_overruns_its_grace_period_ends_the_process_with_75() -> None:
    assert _run(grace=0.5, work=60.0) == (EXIT_GRACE_EXCEEDED, "")  # ended by the timer: "clean" never printed
