"""Issue 31 item 5: a KRaft cluster id never begins with ``-`` (which ``kafka-storage format`` reads as an option)."""

from __future__ import annotations

import uuid
from pathlib import Path

from infra import kafka, kafka_cluster

DASH_FIRST = uuid.UUID(bytes=b"\xf8" + bytes(range(1, 16)))
"""A uuid whose base64url text begins with ``-`` (first six bits 62)."""


def test_a_dash_first_draw_is_drawn_again() -> None:
    draws = iter([DASH_FIRST, DASH_FIRST, uuid.UUID(int=7)])
    got = kafka.new_cluster_id(lambda: next(draws))
    assert got == "AAAAAAAAAAAAAAAAAAAABw"
    assert not got.startswith("-")


def test_one_in_64_draws_would_begin_with_a_dash_none_does() -> None:
    ids = [kafka.new_cluster_id() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)


def test_a_saved_dash_id_of_an_unformatted_node_is_repaired(tmp_path: Path) -> None:
    (tmp_path / "cluster.id").write_text("-cenBVttRUmIyIhUAhL2EA")
    got = kafka._cluster_id(tmp_path)
    assert not got.startswith("-")
    assert (tmp_path / "cluster.id").read_text() == got


def test_a_saved_id_of_formatted_storage_is_kept(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("cluster.id=-cenBVttRUmIyIhUAhL2EA\n")
    (tmp_path / "cluster.id").write_text("-cenBVttRUmIyIhUAhL2EA")
    assert kafka._cluster_id(tmp_path) == "-cenBVttRUmIyIhUAhL2EA"


def test_the_multi_node_cluster_repairs_its_saved_id_too(tmp_path: Path) -> None:
    (tmp_path / "cluster.id").write_text("-cenBVttRUmIyIhUAhL2EA")
    assert not kafka_cluster._cluster_id(tmp_path).startswith("-")


def test_the_format_argument_is_one_token() -> None:
    assert kafka.format_args("-cenBVttRUmIyIhUAhL2EA") == ["--cluster-id=-cenBVttRUmIyIhUAhL2EA"]
