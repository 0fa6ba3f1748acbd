"""The local supervisor's pure parts: the generated supervisord.conf and reading how each process ended."""

from __future__ import annotations

import configparser
from pathlib import Path

from pricestream.settings import Settings
from pricestream.supervision import STOP_MARGIN_S, Program, Supervisor, programs, write_config


def test_every_service_is_a_program_with_its_own_command_and_ops_port(tmp_path: Path) -> None:
    s = Settings(state_dir=tmp_path, ops_base_port=40100, http_port=40200, job_writes_online=False)
    progs = programs(s, exe="/x/pricestream", skip=frozenset({"features"}))
    assert [p.name for p in progs] == ["online-writer", "offline-writer", "serve", "labels", "sampler", "trainer",
                                       "monitor"]
    assert {p.name: p.env.get("PRICESTREAM_OPS_PORT") for p in progs} == {
        "online-writer": "40100", "offline-writer": "40101", "serve": None, "labels": "40102", "sampler": "40103",
        "trainer": "40104", "monitor": "40105"}
    assert progs[3].command == "/x/pricestream services run labels"
    assert progs[2].ops_url == "http://127.0.0.1:40200/healthz"


def test_no_online_writer_when_the_job_writes_redis_itself(tmp_path: Path) -> None:
    s = Settings(state_dir=tmp_path, ops_base_port=40100, http_port=40200)
    assert s.job_writes_online and s.feature_job().online is not None
    assert s.feature_job().online.project == s.feast_project  # type: ignore[union-attr]
    assert [p.name for p in programs(s, exe="/x/pricestream")][:3] == ["features", "offline-writer", "serve"]


def test_config_escapes_percent_and_stops_each_program_past_its_grace(tmp_path: Path) -> None:
    root = tmp_path / "100%"
    progs = [Program("labels", "pricestream services run labels", 40, env={"PRICESTREAM_X": 'a"b%c'})]
    parser = configparser.ConfigParser(interpolation=configparser.BasicInterpolation())
    parser.read(write_config(root, progs, grace_s=12.0))
    section = parser["program:labels"]
    assert section["stopsignal"] == "TERM" and section["stopwaitsecs"] == str(int(12 + STOP_MARGIN_S))
    assert section["environment"] == 'PRICESTREAM_X="a\\"b%c"'  # %% in the file reads back as %
    assert parser["unix_http_server"]["file"] == str(root / "supervisor.sock")


def test_exit_codes_read_from_the_supervisord_log(tmp_path: Path) -> None:
    progs = [Program("features", "f", 10, stops_by_signal=True), Program("labels", "l", 40), Program("serve", "s", 30)]
    sup = Supervisor(tmp_path, progs, grace_s=5.0)
    (tmp_path / "supervisord.log").write_text(
        "2026-12-01 09:00:39,540 WARN exited: labels (exit status 1; not expected)\n"
        "2026-12-01 09:01:05,262 WARN stopped: features (terminated by SIGTERM)\n"
        "2026-12-01 09:01:05,390 WARN stopped: labels (terminated by SIGKILL)\n"
        "2026-12-01 09:01:05,618 INFO stopped: serve (exit status 0)\n")
    assert sup.exit_codes() == {"features": -15, "labels": -9, "serve": 0}
    assert sup.unclean() == {"labels": -9}  # the Flink job stops by SIGTERM; the others must exit 0
