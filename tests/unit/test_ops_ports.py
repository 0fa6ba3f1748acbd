"""Issue 31 item 6: a deployment's ops ports are its own (picked free, recorded), and its status is its processes'."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from pricestream.commands.common import CliInputError, ensure_bindable
from pricestream.settings import Settings
from pricestream.supervision import OPS_PORTS_FILE, listening, ops_base, programs


def _ops_ports(s: Settings) -> dict[str, int]:
    return {p.name: int(p.env["PRICESTREAM_OPS_PORT"]) for p in programs(s, exe="x") if "PRICESTREAM_OPS_PORT" in p.env}


def test_two_state_dirs_get_two_blocks_each_recorded_and_kept(tmp_path: Path) -> None:
    a = Settings(state_dir=tmp_path / "a", ops_base_port=None)
    b = Settings(state_dir=tmp_path / "b", ops_base_port=None)
    ports_a, ports_b = _ops_ports(a), _ops_ports(b)
    assert not set(ports_a.values()) & set(ports_b.values())
    assert 9461 not in ports_a.values() or 9461 not in ports_b.values()
    recorded = json.loads((tmp_path / "a" / "run" / OPS_PORTS_FILE).read_text())
    assert recorded["ports"]["offline-writer"] == ports_a["offline-writer"]
    assert _ops_ports(a) == ports_a  # the next run of the same state dir: the same ports


def test_a_recorded_block_that_another_process_took_is_replaced(tmp_path: Path) -> None:
    s = Settings(state_dir=tmp_path, ops_base_port=None)
    base = ops_base(s)
    with socket.socket() as other:
        other.bind(("127.0.0.1", base + 2))
        other.listen()
        assert ops_base(s) != base
    assert json.loads((tmp_path / "run" / OPS_PORTS_FILE).read_text())["base"] == ops_base(s)


def test_an_explicit_base_is_kept(tmp_path: Path) -> None:
    assert _ops_ports(Settings(state_dir=tmp_path, ops_base_port=40100))["monitor"] == 40105
    assert not (tmp_path / "run" / OPS_PORTS_FILE).exists()


def test_a_port_is_a_process_own_only_while_it_listens_there() -> None:
    import os
    import subprocess
    import sys

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            assert listening(os.getpid(), sock.getsockname()[1])
            assert not listening(other.pid, sock.getsockname()[1])  # what the status table saw as "ok"
    finally:
        other.kill()
        other.wait()


def test_a_taken_port_is_named_before_any_work() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(CliInputError, match=f"serve --port: cannot bind 127.0.0.1:{port}: Address already in use"):
            ensure_bindable("127.0.0.1", port, what="serve --port")
    ensure_bindable("127.0.0.1", port, what="serve --port")  # free again
