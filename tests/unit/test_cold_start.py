"""Cold start: a hotel the stream has never seen gets a valid price from its first request, tier and reason recorded.

The router scores a request with no features as complex (missing features, cold start), so with no heavy
model it goes to the light tier, inside the rules' floor and ceiling; it is not sent to the rules tier.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from events.models import PricingRequest
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


def test_a_new_hotel_gets_a_valid_price_with_tier_and_reason(tmp_path: object) -> None:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(1500, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = np.exp(rng.uniform(math.log(60.0), math.log(500.0), 1500))
    frame["base_rate"] = 150.0
    frame["booked"] = (rng.random(1500) < 1 / (1 + (frame["price"] / 170.0) ** 2.5)).astype(int)
    bundle = train_bundle(frame, str(tmp_path), tier="light", config=DemandModelConfig(num_trees=30)).path
    scorer = Scorer(ScorerConfig(stale_after_s=None), rules=RuleSet.from_yaml(RULES),
                    feature_source=MemoryFeatureSource(), light=load_pricer(bundle), heavy=None,
                    router=TieredRouter())
    req = PricingRequest(hotel_id="h-new", room_type="std", stay_date=NOW.date() + timedelta(days=30), event_time=NOW)
    decision = scorer.price(req)
    assert 60.0 <= decision.price <= 500.0 and math.isfinite(decision.price)
    assert decision.tier == "light" and decision.model_name == "demand-light"
    assert decision.complexity > 0.45  # the reason it left the rules tier: the cold-start score
    assert decision.bid_price is None and decision.forecast_views is None  # no forecast without features
    assert not decision.degraded and decision.degraded_reason is None


def test_stage_one_a_hotel_with_no_model_yet_gets_the_rules_price_with_the_rules_that_set_it() -> None:
    """Cold start, stage one: no model covers the new hotel, so the rules tier prices it from its base rate."""
    rules = RuleSet.from_yaml(
        RULES + "base_rates:\n  - {hotel: h-new, room_type: std, rate: 180}\n"
        "lead_time_ladder:\n  - {lead_time_at_most_days: 7, factor: 1.1}\n"
    )
    scorer = Scorer(ScorerConfig(stale_after_s=None), rules=rules, feature_source=MemoryFeatureSource(),
                    light=None, heavy=None, router=TieredRouter())
    req = PricingRequest(hotel_id="h-new", room_type="std", stay_date=NOW.date() + timedelta(days=3), event_time=NOW)
    decision = scorer.price(req)
    assert decision.tier == "rules" and decision.model_name is None
    assert abs(decision.price - 198.0) < 1e-6  # its base rate 180 x the lead-time ladder's 1.1
    assert "lead_time_ladder" in decision.rule_ids  # the reason, recorded on the decision
    assert decision.complexity > 0.10  # cold: above the rules cut-off, a model tier would have priced it


# Stages two and three (pricing.cold_start): the stage rule, the pooled model, the hotel's own labels.

from pricing.cold_start import (  # noqa: E402
    ColdStartConfig,
    ColdStartScorer,
    HotelHistory,
    refit_bundles,
    stage_counts,
    stage_of,
)
from pricing.training import read_meta  # noqa: E402

STAGE_CFG = ColdStartConfig(transfer_after_days=1.0, own_after_labels=300, own_after_bookings=20, own_weight=4.0,
                            pooled_rows=1500, refit_trees=40)


def _frame(rng: np.random.Generator, n: int, wtp: float) -> pd.DataFrame:
    """Label rows of hotels whose booking probability is ``1 / (1 + (price / wtp) ** 2.5)``, base rate 150."""
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = np.exp(rng.uniform(math.log(60.0), math.log(500.0), n))
    frame["base_rate"] = 150.0
    frame["booked"] = (rng.random(n) < 1 / (1 + (frame["price"] / wtp) ** 2.5)).astype(int)
    return frame


def _cold_scorer(tmp_path: object, config: ColdStartConfig = STAGE_CFG) -> tuple[ColdStartScorer, pd.DataFrame, str]:
    pooled_frame = _frame(np.random.default_rng(1), 1500, wtp=220.0)
    pooled = train_bundle(pooled_frame, f"{tmp_path}/pooled", tier="light", config=DemandModelConfig(num_trees=30))
    rules = RuleSet.from_yaml(RULES + "base_rates:\n  - {hotel: h-new, room_type: std, rate: 150}\n")

    def scorer(light: object) -> Scorer:
        return Scorer(ScorerConfig(stale_after_s=None), rules=rules, feature_source=MemoryFeatureSource(),
                      light=light, heavy=None, router=TieredRouter())  # type: ignore[arg-type]

    def refit(hotel: str, own: pd.DataFrame) -> Scorer:
        paths = refit_bundles([pooled.path], own, f"{tmp_path}/own-{hotel}", config=config,
                              pooled_frame=pooled_frame, seed=0)
        return scorer(load_pricer(paths[0]))

    cold = ColdStartScorer(config, rules=scorer(None), pooled=scorer(load_pricer(pooled.path)), refit=refit)
    return cold, pooled_frame, pooled.version


def _request(at: datetime, days_out: int = 30) -> PricingRequest:
    return PricingRequest(hotel_id="h-new", room_type="std", stay_date=at.date() + timedelta(days=days_out),
                          event_time=at)


def test_the_stage_rule_moves_a_hotel_at_its_thresholds() -> None:
    at = NOW + timedelta(days=5)
    just_before = stage_of(HotelHistory(NOW + timedelta(days=1, seconds=1), 0, 0), NOW + timedelta(days=2), STAGE_CFG)
    assert just_before[0] == "rules" and "< 1.0" in just_before[1]
    assert stage_of(HotelHistory(NOW + timedelta(days=1), 0, 0), NOW + timedelta(days=2), STAGE_CFG)[0] == "transfer"
    assert stage_of(HotelHistory(NOW, 299, 50), at, STAGE_CFG)[0] == "transfer"  # one label short
    assert stage_of(HotelHistory(NOW, 300, 19), at, STAGE_CFG)[0] == "transfer"  # one booking short
    own = stage_of(HotelHistory(NOW, 300, 20), at, STAGE_CFG)
    assert own == ("own", "own: 300 labels >= 300 and 20 bookings >= 20")
    assert stage_of(HotelHistory(None, 0, 0), at, STAGE_CFG)[0] == "rules"  # never seen: day one


def test_stage_two_prices_a_new_hotel_with_the_pooled_model_after_its_first_day(tmp_path: object) -> None:
    cold, _, pooled_version = _cold_scorer(tmp_path)
    first = cold.price(_request(NOW))
    second = cold.price(_request(NOW + timedelta(days=1, hours=1)))
    assert first.tier == "rules" and first.rule_ids[-1] == "cold_start:rules" and first.model_version is None
    assert abs(first.price - 150.0) < 1e-6  # the base rate: no ladder fires 30 days out with no features
    assert second.tier == "light" and second.rule_ids[-1] == "cold_start:transfer"
    assert second.model_version == pooled_version
    assert second.price > first.price + 15.0  # the pooled model's price (its hotels pay more), not the rules'
    assert 60.0 <= second.price <= 500.0
    assert dict(stage_counts([first, second])) == {"rules": 1, "transfer": 1, "own": 0}


@pytest.mark.parametrize("refit_response", [False, True])
def test_stage_three_refits_on_the_hotels_own_labels_and_follows_them(tmp_path: object, refit_response: bool) -> None:
    """The new hotel's guests pay far more than the pooled hotels' (wtp 420 vs 220): its own model books more at
    the same price; with its price response refitted too (not the default), it prices higher."""
    config = STAGE_CFG.model_copy(update={"refit_price_response": refit_response})
    cold, _, pooled_version = _cold_scorer(tmp_path, config)
    cold.price(_request(NOW))
    at = NOW + timedelta(days=2)
    transfer = cold.price(_request(at))
    own = _frame(np.random.default_rng(2), 299, wtp=420.0)
    for row in own.itertuples():
        request = _request(at)
        decision = transfer.model_copy(update={"price": float(row.price)})
        cold.learn_one(request, decision, bool(row.booked))
    assert cold.stage("h-new", at)[0] == "transfer"  # 299 labels: one short
    request = _request(at)
    cold.learn_one(request, transfer.model_copy(update={"price": 200.0}), True)
    assert cold.stage("h-new", at)[0] == "own"
    refitted = cold.price(_request(at))
    assert refitted.rule_ids[-1] == "cold_start:own" and refitted.tier == "light"
    assert refitted.model_version not in (None, pooled_version)
    meta = read_meta(tmp_path / "own-h-new" / "light")  # type: ignore[operator]
    assert meta["parent"] == pooled_version  # continued from the pooled model
    assert meta["rows"] == 300 + 1500  # its own 300 labels and the pooled sample
    pooled_response = read_meta(tmp_path / "pooled")["price_response"]  # type: ignore[operator]
    assert refitted.expected_booking_prob is not None and transfer.expected_booking_prob is not None
    if refit_response:
        assert meta["price_response"] != pooled_response
        assert refitted.price > transfer.price * 1.1  # its own guests' willingness to pay moved the price up
    else:
        assert meta["price_response"] == pooled_response  # the trees only: the pooled elasticity stays
        # a logit in log price: the level does not move the optimum, so the price stays; the demand level does
        assert abs(refitted.price - transfer.price) < 0.05 * transfer.price
        assert refitted.expected_booking_prob > transfer.expected_booking_prob + 0.05


def test_the_cli_shows_the_stage_and_refits_a_hotel_on_its_own_labels(tmp_path: object) -> None:
    from typer.testing import CliRunner

    from pricestream.cli import app

    runner = CliRunner()
    env = {"PRICESTREAM_COLD_START_OWN_AFTER_LABELS": "250", "PRICESTREAM_COLD_START_OWN_AFTER_BOOKINGS": "5"}
    shown = runner.invoke(app, ["cold-start", "stage", "--first-seen", "2026-05-01T00:00:00Z", "--labels", "260",
                                "--bookings", "6", "--at", "2026-05-04T00:00:00Z"], env=env)
    assert shown.exit_code == 0 and "own: 260 labels >= 250 and 6 bookings >= 5" in shown.stdout
    pooled_frame = _frame(np.random.default_rng(1), 1500, wtp=220.0)
    pooled = train_bundle(pooled_frame, f"{tmp_path}/pooled", tier="light", config=DemandModelConfig(num_trees=20))
    own = _frame(np.random.default_rng(2), 260, wtp=420.0).assign(hotel_id="h-new")
    labels = f"{tmp_path}/labels.parquet"
    pd.concat([own, own.assign(hotel_id="h-other")]).to_parquet(labels)
    args = ["cold-start", "refit", "--hotel", "h-new", "--labels", labels, "--pooled", str(pooled.path),
            "--out", f"{tmp_path}/own"]
    done = runner.invoke(app, args, env=env)
    assert done.exit_code == 0, done.stdout
    meta = read_meta(f"{tmp_path}/own/light")
    assert meta["parent"] == pooled.version and meta["rows"] == 260  # its own rows only (no --pooled-frame)
    short = runner.invoke(app, [*args[:2], "--hotel", "h-none", *args[4:]], env=env)
    assert short.exit_code == 1
    assert "--hotel h-none: 0 labels" in short.output and "expected at least 250" in short.output


def test_partial_windows_read_a_new_hotels_counts_at_full_length_until_its_history_covers_them() -> None:
    from datetime import date

    from pricing.cold_start import PartialWindows

    src = MemoryFeatureSource()
    night = date(2026, 5, 20)
    values = {"searches_7d": 14.0, "views_24h": 6.0, "bookings_14d": 2.0, "bookings_prev_7d": 0.0,
              "booking_pace_7d": 0.0, "look_to_book_7d": 0.2, "occupancy": 0.7}
    for hotel in ("h-new", "h-old"):
        src.put(hotel, "std", night, values)
    now = [NOW + timedelta(hours=12)]
    read = PartialWindows(src, first_seen={"h-new": NOW}.get, clock=lambda: now[0])
    half_day = read.read("h-new", "std", night).values
    assert half_day["searches_7d"] == 14.0 * 7 / 0.5 and half_day["views_24h"] == 12.0
    assert half_day["bookings_prev_7d"] is None and half_day["booking_pace_7d"] is None  # no bookings_7d: unknown
    assert half_day["look_to_book_7d"] == 0.2 and half_day["occupancy"] == 0.7  # ratios and levels as they are
    assert read.read("h-old", "std", night).values == values  # a mature hotel is read as it is
    now[0] = NOW + timedelta(days=7)
    week = read.read("h-new", "std", night).values
    assert week["searches_7d"] == 14.0 and week["views_24h"] == 6.0 and week["bookings_14d"] == 4.0
    now[0] = NOW + timedelta(days=14)
    assert read.read("h-new", "std", night).values == values


def test_partial_windows_estimate_the_week_before_last_from_the_days_seen() -> None:
    """The pooled models never saw a missing pace: before day 14 it is estimated from the scaled counts."""
    from datetime import date

    from pricing.cold_start import PartialWindows

    src = MemoryFeatureSource()
    night = date(2026, 5, 20)
    src.put("h-new", "std", night, {"bookings_7d": 2.0, "bookings_14d": 2.0, "views_7d": 8.0,
                                    "bookings_prev_7d": 0.0, "booking_pace_7d": 2.0, "look_to_book_7d": 4.0})
    now = [NOW + timedelta(days=2)]
    read = PartialWindows(src, first_seen={"h-new": NOW}.get, clock=lambda: now[0])
    two_days = read.read("h-new", "std", night).values
    assert (two_days["bookings_7d"], two_days["bookings_14d"]) == (7.0, 14.0)  # 2 days read at 7 and 14
    assert two_days["bookings_prev_7d"] == 7.0 and two_days["booking_pace_7d"] == 1.0  # the same rate: pace 1
    assert two_days["look_to_book_7d"] == 4.0
    src.put("h-new", "std", night, {"bookings_7d": 3.0, "bookings_14d": 5.0, "bookings_prev_7d": 2.0,
                                    "booking_pace_7d": 1.5})
    now[0] = NOW + timedelta(days=10)  # a full week, 3 days of the week before: 2 bookings read at 14/10
    ten_days = read.read("h-new", "std", night).values
    assert ten_days["bookings_prev_7d"] == 5.0 * 14 / 10 - 3.0 and ten_days["booking_pace_7d"] == 3.0 / 4.0
    missing = PartialWindows(src, first_seen={"h-new": NOW}.get, clock=lambda: now[0], prior_week="missing")
    old = missing.read("h-new", "std", night).values
    assert old["bookings_prev_7d"] is None and old["booking_pace_7d"] is None  # as before run 7


# Cold start in the service (delivery.cold_start): the stage rule in front of the service's scorer.

from delivery.cold_start import MemoryHistoryStore, StagedScorer  # noqa: E402


class _BrokenStore(MemoryHistoryStore):
    def first_seen(self, hotel_id: str, at: datetime, *, mature: object) -> datetime | None:
        msg = "redis down"
        raise ConnectionError(msg)


def _staged(tmp_path: object, source: MemoryFeatureSource, store: MemoryHistoryStore) -> StagedScorer:
    pooled = train_bundle(_frame(np.random.default_rng(1), 1500, wtp=220.0), f"{tmp_path}/pooled", tier="light",
                          config=DemandModelConfig(num_trees=20))
    scorer = Scorer(ScorerConfig(stale_after_s=None), rules=RuleSet.from_yaml(RULES), feature_source=source,
                    light=load_pricer(pooled.path), heavy=None, router=TieredRouter())
    return StagedScorer(scorer, history=store, cold_start=STAGE_CFG, counts_ttl_s=0.0)


def test_the_served_scorer_moves_a_new_hotel_through_its_stages_and_leaves_a_traded_one_alone(
    tmp_path: object,
) -> None:
    source, store = MemoryFeatureSource(), MemoryHistoryStore()
    stay = NOW.date() + timedelta(days=30)
    source.put("h-old", "std", stay, {"searches_7d": 40.0, "views_7d": 12.0})
    source.put("h-new", "std", stay, {"searches_7d": 10.0, "bookings_prev_7d": 2.0})
    staged = _staged(tmp_path, source, store)
    first = staged.price(_request(NOW))
    assert (first.tier, first.rule_ids[-1], first.degraded) == ("rules", "cold_start:rules", False)
    assert abs(first.price - 150.0) < 1e-6  # the rules' default base rate, no model
    at = NOW + timedelta(days=2)
    second = staged.price(_request(at, days_out=28))  # the same stay night
    assert second.tier == "light" and second.rule_ids[-1] == "cold_start:transfer"
    assert second.features["searches_7d"] == 35.0  # 2 days of a 7-day window, read at full length
    assert second.features["bookings_prev_7d"] is None  # the week before last: not seen yet
    store.add_labels("h-new", labels=300, bookings=19)
    assert staged.price(_request(at)).rule_ids[-1] == "cold_start:transfer"  # one booking short
    store.add_labels("h-new", labels=0, bookings=1)
    assert staged.price(_request(at)).rule_ids[-1] == "cold_start:own"
    old = staged.price(_request(NOW).model_copy(update={"hotel_id": "h-old"}))
    assert old.tier == "light" and old.rule_ids[-1] == "cold_start:own"  # traded before: mature, the model
    assert old.features["searches_7d"] == 40.0  # a mature hotel's windows are read as they are
    batch = staged.price_batch([_request(NOW).model_copy(update={"hotel_id": "h-third"}), _request(at)])
    assert [(d.hotel_id, d.tier, d.rule_ids[-1]) for d in batch] == [
        ("h-third", "rules", "cold_start:rules"), ("h-new", "light", "cold_start:own")]


def test_the_served_scorer_prices_as_before_when_the_history_store_fails(tmp_path: object) -> None:
    staged = _staged(tmp_path, MemoryFeatureSource(), _BrokenStore())
    decision = staged.price(_request(NOW))
    assert decision.tier == "light" and decision.rule_ids[-1] == "cold_start:own"
    assert 60.0 <= decision.price <= 500.0


def test_the_service_refits_with_the_measured_own_weight_unless_the_setting_says_otherwise() -> None:
    from pricestream.commands.cold_start import cold_start_config
    from pricestream.settings import Settings

    assert ColdStartConfig().own_weight == 1.0  # measured in docs/cold-start.md; bench/cold_start.py's default
    assert cold_start_config(Settings(cold_start_own_weight=None)).own_weight == 1.0
    assert cold_start_config(Settings(cold_start_own_weight=2.5)).own_weight == 2.5


def test_the_history_adds_the_label_services_totals_to_the_hand_added_counts() -> None:
    store = MemoryHistoryStore()
    store.set_joined({"h-new": (120, 4)})
    assert store.add_labels("h-new", labels=10, bookings=1) == (130, 5)
    store.set_joined({"h-new": (125, 4)})  # totals are set, not added: a replayed batch writes the same totals
    assert store.counts("h-new") == (135, 5) and store.counts("h-other") == (0, 0)


def test_partial_windows_scale_no_more_than_min_days_allows() -> None:
    """Two hours in, a night's 3 searches read x84 in ``searches_7d`` by default, x7 with ``min_days=1``."""
    from datetime import date

    from pricing.cold_start import PartialWindows

    src = MemoryFeatureSource()
    night = date(2026, 5, 20)
    src.put("h-new", "std", night, {"searches_7d": 3.0, "searches_24h": 3.0})
    at = NOW + timedelta(hours=2)
    hourly = PartialWindows(src, first_seen={"h-new": NOW}.get, clock=lambda: at).read("h-new", "std", night)
    daily = PartialWindows(src, first_seen={"h-new": NOW}.get, clock=lambda: at, min_days=1.0).read(
        "h-new", "std", night)
    assert hourly.values["searches_7d"] == 3.0 * 84 and hourly.values["searches_24h"] == 3.0 * 12
    assert daily.values["searches_7d"] == 3.0 * 7 and daily.values["searches_24h"] == 3.0
