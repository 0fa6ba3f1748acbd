"""Cold start, stage three in the deployed system: a new hotel's refit published under it and served for it.

``feedback.hotel_refit`` (the trainer's refitter), ``feedback.hotel_models.HotelModels`` (where it is published)
and ``delivery.cold_start.StagedScorer`` (which loads it per hotel), without services.
"""

from __future__ import annotations

import math
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from delivery.cold_start import BAD_REFIT, NO_REFIT, MemoryHistoryStore, StagedScorer
from events.models import PricingRequest
from feedback.errors import RegistryError
from feedback.hotel_models import HotelModels
from feedback.hotel_refit import HotelRefitter, RefitConfig
from feedback.registry import ModelRegistry
from pricing.cold_start import ColdStartConfig
from pricing.feature_source import MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from pricing.vectorize import LIGHT_COLUMNS
from routing.router import TieredRouter

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
RULES = "min_price: 60\nmax_price: 500\ndefault_base_rate: 150\n"
CFG = ColdStartConfig(transfer_after_days=1.0, own_after_labels=100, own_after_bookings=10, pooled_rows=800,
                      refit_trees=20)


def _frame(seed: int, n: int, wtp: float) -> pd.DataFrame:
    """Rows of hotels whose booking probability is ``1 / (1 + (price / wtp) ** 2.5)``, base rate 150."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = np.exp(rng.uniform(math.log(60.0), math.log(500.0), n))
    frame["base_rate"] = 150.0
    frame["booked"] = (rng.random(n) < 1 / (1 + (frame["price"] / wtp) ** 2.5)).astype(int)
    return frame


def _examples(hotel: str, n: int, *, seed: int = 2, wtp: float = 420.0) -> list[dict[str, object]]:
    """Training rows as the trainer hands them on (``example_row``): a hotel whose guests pay far more."""
    rows = _frame(seed, n, wtp).assign(hotel_id=hotel, weight=1.0).to_dict("records")
    for i, row in enumerate(rows):
        row["decision_id"], row["event_time"] = str(uuid.uuid4()), NOW + timedelta(days=2, minutes=i)
    return rows


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModelRegistry, pd.DataFrame]:
    """A registry with a promoted pooled light model, trained on hotels whose guests pay less (wtp 220)."""
    root = tmp_path_factory.mktemp("registry")
    frame = _frame(1, 1500, wtp=220.0)
    info = train_bundle(frame, root / "bundle", tier="light", config=DemandModelConfig(num_trees=20))
    registry = ModelRegistry(root / "registry")
    registry.promote(registry.register(info.path, tier="light"))
    return registry, frame


def _refitter(registry: ModelRegistry, frame: pd.DataFrame, store: MemoryHistoryStore) -> HotelRefitter:
    def live() -> dict[str, object]:
        return {t: e for t in ("light", "heavy") if (e := registry.current(t)) is not None}

    return HotelRefitter(RefitConfig(cold_start=CFG, min_examples=60), history=store,
                         hotels=HotelModels(registry.root), pooled=live, pooled_frame=lambda: frame)  # type: ignore[arg-type]


def _staged(registry: ModelRegistry, store: MemoryHistoryStore, source: MemoryFeatureSource) -> StagedScorer:
    pooled = Scorer(ScorerConfig(stale_after_s=None), rules=RuleSet.from_yaml(RULES), feature_source=source,
                    light=load_pricer(registry.current("light").path), heavy=None,  # type: ignore[union-attr]
                    router=TieredRouter())
    return StagedScorer(pooled, history=store, cold_start=CFG, counts_ttl_s=0.0,
                        hotel_models=HotelModels(registry.root))


def _request(hotel: str, at: datetime = NOW) -> PricingRequest:
    return PricingRequest(hotel_id=hotel, room_type="std", stay_date=NOW.date() + timedelta(days=30), event_time=at)


def test_hotel_models_publish_versions_per_hotel_bump_one_generation_and_withdraw(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "model.onnx").write_bytes(b"onnx-a")
    (bundle / "meta.json").write_text('{"version": "light-aaa@x", "tier": "light"}')
    hotels = HotelModels(tmp_path / "registry")
    assert hotels.generation == 0 and hotels.get("Resort Hotel/1") is None
    one = hotels.publish("Resort Hotel/1", {"light": bundle}, parents={"light": "light-pooled"}, examples=70)
    assert (one.live["light"].version, one.parents, one.examples) == ("light-aaa@x", {"light": "light-pooled"}, 70)
    assert one.live["light"].path.is_dir() and one.live["light"].path.parent.parent.parent == hotels.root
    assert hotels.registry("Resort Hotel/1").current("light").version == "light-aaa@x"  # type: ignore[union-attr]
    assert hotels.generation == 1 and ModelRegistry(tmp_path / "registry").generation == 0  # pooled untouched
    with pytest.raises(RegistryError, match="field 'bundles' of hotel 'h2': got none"):
        hotels.publish("h2", {}, parents={})
    assert hotels.withdraw("Resort Hotel/1") and not hotels.withdraw("Resort Hotel/1")
    assert hotels.generation == 2 and hotels.live() == {}


def test_the_refitter_publishes_a_new_hotel_in_stage_own_and_not_before_nor_a_mature_one(
    pooled: tuple[ModelRegistry, pd.DataFrame],
) -> None:
    registry, frame = pooled
    store = MemoryHistoryStore()
    new, old = f"new-{uuid.uuid4().hex[:6]}", f"old-{uuid.uuid4().hex[:6]}"
    store.first_seen(new, NOW, mature=lambda: False)
    store.first_seen(old, NOW, mature=lambda: True)
    refitter = _refitter(registry, frame, store)
    for row in _examples(new, 120) + _examples(old, 120):
        refitter.learn(row)
    store.add_labels(new, labels=99, bookings=40)  # one label short of stage own
    assert refitter.step() == [] and HotelModels(registry.root).get(new) is None
    assert refitter.rows_of(old) == 0  # mature: its rows are the pooled trainer's, forgotten here
    store.add_labels(new, labels=1, bookings=0)
    (published,) = refitter.step()
    pooled_version = registry.current("light").version  # type: ignore[union-attr]
    version = published.live["light"].version
    assert version.startswith("light-") and version.endswith(f"@{new}") and version != pooled_version
    assert published.parents == {"light": pooled_version} and published.examples == 120
    assert refitter.step() == []  # nothing new: not refitted again
    for row in _examples(new, 121, seed=3):  # its rows doubled (and one more): refitted on all of them
        refitter.learn(row)
    (again,) = refitter.step()
    assert again.examples == 241 and again.live["light"].version != version
    state = refitter.state_dict()
    restored = _refitter(registry, frame, store)
    restored.load_state(state)
    assert restored.rows_of(new) == 241 and restored.step() == []  # a restart neither loses nor repeats


def test_a_refit_that_fails_is_recorded_and_the_trainer_goes_on(pooled: tuple[ModelRegistry, pd.DataFrame]) -> None:
    registry, frame = pooled
    store = MemoryHistoryStore()
    store.first_seen("h-bad", NOW, mature=lambda: False)
    store.add_labels("h-bad", labels=500, bookings=50)
    refitter = _refitter(registry, frame, store)
    for row in _examples("h-bad", 80):
        del row["base_rate"]  # a label without the base rate cannot be refitted
        refitter.learn(row)
    assert refitter.step() == []
    assert "base_rate" in refitter.errors["h-bad"] and HotelModels(registry.root).get("h-bad") is None


def test_serve_prices_an_own_stage_hotel_with_its_refit_the_others_with_the_pooled_model(
    pooled: tuple[ModelRegistry, pd.DataFrame],
) -> None:
    registry, frame = pooled
    store, source = MemoryHistoryStore(), MemoryFeatureSource()
    new, other = f"new-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    staged = _staged(registry, store, source)
    staged.reload_hotels()
    at = NOW + timedelta(days=2)
    for hotel in (new, other):
        staged.price(_request(hotel))  # first requests: recorded as new hotels
        store.add_labels(hotel, labels=150, bookings=30)  # both in stage own
    pooled_version = registry.current("light").version  # type: ignore[union-attr]
    before = staged.price(_request(new, at))
    assert (before.model_version, before.rule_ids[-2:]) == (pooled_version, (NO_REFIT, "cold_start:own"))
    refitter = _refitter(registry, frame, store)
    for row in _examples(new, 150):
        refitter.learn(row)
    (published,) = refitter.step()
    assert staged.reload_hotels() and not staged.reload_hotels()  # loaded once, on the generation's move
    mine, theirs = staged.price(_request(new, at)), staged.price(_request(other, at))
    assert mine.model_version == published.live["light"].version and mine.rule_ids[-1] == "cold_start:own"
    assert NO_REFIT not in mine.rule_ids and mine.tier == "light"
    # its own guests pay more (wtp 420 vs 220): at the price the pooled response picks, its own model books more
    assert mine.expected_booking_prob > before.expected_booking_prob + 0.05  # type: ignore[operator]
    assert (theirs.model_version, theirs.rule_ids[-2:]) == (pooled_version, (NO_REFIT, "cold_start:own"))
    batch = staged.price_batch([_request(other, at), _request(new, at)])
    assert [d.model_version for d in batch] == [pooled_version, mine.model_version]
    assert batch[1].price == mine.price
    assert staged.health()["hotel_models"]["hotels"][new] == {"light": mine.model_version}
    # after a restart: a new scorer over the same published refits prices the hotel with them
    restarted = _staged(registry, store, source)
    restarted.reload_hotels()
    assert restarted.price(_request(new, at)).model_version == mine.model_version
    assert HotelModels(registry.root).withdraw(new) and restarted.reload_hotels()  # the operator takes it back
    withdrawn = restarted.price(_request(new, at))
    assert (withdrawn.model_version, withdrawn.rule_ids[-2]) == (pooled_version, NO_REFIT)


def test_a_bad_published_refit_falls_back_to_the_pooled_model_with_the_reason(
    pooled: tuple[ModelRegistry, pd.DataFrame],
) -> None:
    registry, frame = pooled
    store = MemoryHistoryStore()
    hotel = f"broken-{uuid.uuid4().hex[:6]}"
    store.first_seen(hotel, NOW, mature=lambda: False)
    store.add_labels(hotel, labels=150, bookings=30)
    refitter = _refitter(registry, frame, store)
    for row in _examples(hotel, 100):
        refitter.learn(row)
    (published,) = refitter.step()
    shutil.rmtree(published.live["light"].path)  # the bundle is gone from disk (a bad copy, a lost volume)
    staged = _staged(registry, store, MemoryFeatureSource())
    assert staged.reload_hotels()
    decision = staged.price(_request(hotel, NOW + timedelta(days=2)))
    assert decision.model_version == registry.current("light").version  # type: ignore[union-attr]
    assert decision.rule_ids[-2:] == (BAD_REFIT, "cold_start:own") and 60.0 <= decision.price <= 500.0
    assert published.live["light"].version in staged.own_errors[hotel]
    assert "BundleError" in staged.health()["hotel_models"]["errors"][hotel]


def test_the_cli_publishes_a_refit_from_a_labels_file_lists_it_and_withdraws_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pricestream.cli import app
    from pricestream.settings import Settings

    env = {"PRICESTREAM_STATE_DIR": str(tmp_path / "state"), "PRICESTREAM_COLD_START_OWN_AFTER_LABELS": "100",
           "COLUMNS": "250"}
    registry = ModelRegistry(Settings(state_dir=tmp_path / "state").registry())
    info = train_bundle(_frame(1, 800, wtp=220.0), tmp_path / "pooled", tier="light",
                        config=DemandModelConfig(num_trees=10))
    registry.promote(registry.register(info.path, tier="light"))
    pd.DataFrame(_examples("h-cli", 120)).drop(columns=["event_time"]).to_csv(tmp_path / "labels.csv", index=False)
    runner = CliRunner()
    done = runner.invoke(app, ["cold-start", "refit", "--hotel", "h-cli", "--labels", str(tmp_path / "labels.csv"),
                               "--publish"], env=env)
    assert done.exit_code == 0, done.output
    published = HotelModels(registry.root).get("h-cli")
    assert published is not None and published.parents == {"light": info.version} and published.examples == 120
    assert published.live["light"].version in done.stdout and published.live["light"].version.endswith("@h-cli")
    listed = runner.invoke(app, ["cold-start", "refits"], env=env)
    assert listed.exit_code == 0 and published.live["light"].version in listed.stdout and "h-cli" in listed.stdout
    assert runner.invoke(app, ["cold-start", "refits", "--withdraw", "h-cli"], env=env).exit_code == 0
    again = runner.invoke(app, ["cold-start", "refits", "--withdraw", "h-cli"], env=env)
    assert again.exit_code == 1 and "--withdraw h-cli: no own models published" in again.output
    bare = runner.invoke(app, ["cold-start", "refit", "--hotel", "h-cli", "--labels", str(tmp_path / "labels.csv")],
                         env=env)
    assert bare.exit_code == 1 and "--out: missing" in bare.output
