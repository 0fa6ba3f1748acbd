"""A self-contained HTML monitoring dashboard: six plots (embedded PNGs) and the numbers behind them.

Plots are drawn with matplotlib's object API on the Agg canvas (no pyplot, no
global state, safe in a server thread) and embedded as base64 PNGs, so the
file can be mailed or attached to an incident without its neighbours.

Example:
    >>> import tempfile
    >>> from datetime import UTC, datetime, timedelta
    >>> from pathlib import Path
    >>> from feedback.monitors import CoverageMonitor, FlipMonitor
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> cov = CoverageMonitor(timedelta(hours=1), timedelta(minutes=5), features=("a",))
    >>> cov.update("h1", {"a": None}, feature_time=t, now=t)
    >>> out = write_dashboard(Path(tempfile.mkdtemp()) / "d.html", coverage=cov.report(), drift_history=[],
    ...                       flips=[FlipMonitor().report(at=t)], tier_shares={"light": 1.0},
    ...                       latencies_ms={"light": [1.0, 2.0]}, rollout_weights_history=[(t, {"v1": 1.0})])
    >>> out.read_text().count("<img")
    6
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from feedback.monitors.coverage import CoverageReport
from feedback.monitors.drift import DriftReport
from feedback.monitors.flips import FlipReport

MAX_HEATMAP_HOTELS = 40
"""Hotels shown in the coverage heatmap (the worst ones): beyond ~40 columns the labels are unreadable."""

PERCENTILES = (50, 95, 99)

TierShares = Mapping[str, float] | Sequence[tuple[datetime, Mapping[str, float]]]
TimeRange = tuple[datetime, datetime] | None
"""The run's own time range: every time axis spans it (``None``: each axis spans its own points)."""
Latencies = Mapping[str, Sequence[float]] | Sequence[float]

_CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:0;background:#f4f6f9;color:#1f2933}
header{background:#1f2d3d;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#b8c4d2;font-size:13px}
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:20px;padding:24px 32px}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.08);padding:16px 20px;overflow:auto}
h2{font-size:16px;margin:0 0 10px;color:#243b53}img{max-width:100%;height:auto;display:block;margin:0 auto 12px}
table{border-collapse:collapse;font-size:12px;width:100%}th,td{padding:4px 8px;text-align:right}
th{background:#eef2f7;color:#334e68}th:first-child,td:first-child{text-align:left}
tr:nth-child(even) td{background:#fafbfc}.alert{color:#c62828;font-weight:600}
.note{font-size:12px;color:#627d98;margin:4px 0 8px}
"""


_EMPTY = "no-data:"  # prefix of a plot that drew the "no data" placeholder: the page says so in text too


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return _EMPTY + encoded if fig.get_label() == "no data" else encoded


def _figure(height: float = 3.6) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(7.2, height))
    ax = fig.add_subplot()
    ax.grid(alpha=0.3)
    return fig, ax


def _no_data(ax: Axes) -> None:
    ax.figure.set_label("no data")
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="#829ab1")
    ax.set_xticks([])
    ax.set_yticks([])


def _coverage_plot(report: CoverageReport) -> str:
    fig, ax = _figure(height=max(3.6, 0.18 * len(report.features) + 1.2))
    ax.grid(False)
    if not report.hotels:
        _no_data(ax)
        return _png(fig)
    share = report.missing_share
    order = np.argsort(-share.max(axis=1), kind="stable")[:MAX_HEATMAP_HOTELS]
    image = ax.imshow(share[order].T, aspect="auto", cmap="magma_r", vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.set_yticks(range(len(report.features)), report.features, fontsize=7)
    ax.set_xticks(range(len(order)), [report.hotels[i] for i in order], rotation=90, fontsize=7)
    ax.set_xlabel("hotel (worst first)", fontsize=8)
    ax.set_title("null-or-stale share (feature × hotel)", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.04)
    return _png(fig)


def _drift_plot(history: Sequence[DriftReport], span: TimeRange = None) -> str:
    return _png(drift_figure(history, span=span))


def drift_figure(history: Sequence[DriftReport], *, span: TimeRange = None) -> Figure:
    """PSI and Wasserstein/std per feature over the checks, on ``span`` (default: the checks' own time range)."""
    fig = Figure(figsize=(7.2, 4.6))
    ax_psi, ax_w = fig.subplots(2, 1, sharex=True)
    if not history:
        _no_data(ax_psi)
        return fig
    frame = pd.concat([report.to_frame() for report in history], ignore_index=True)
    for ax in (ax_psi, ax_w):
        _limit_to_data(ax, pd.DatetimeIndex(frame["at"]), span)
    for feature, rows in frame.groupby("feature", sort=False):
        (line,) = ax_psi.plot(rows["at"], rows["psi"], lw=1.2, marker="o", ms=2, label=str(feature))
        ax_w.plot(rows["at"], rows["wasserstein"], lw=1.2, marker="o", ms=2, color=line.get_color())
        hits = rows[rows["alert"]]
        ax_psi.scatter(hits["at"], hits["psi"], marker="x", color="#c62828", zorder=3)
    ax_psi.set_ylabel("PSI")
    ax_w.set_ylabel("Wasserstein / std")
    ax_psi.set_title("drift per feature (× = alert)", fontsize=10)
    for ax in (ax_psi, ax_w):
        ax.grid(alpha=0.3)
    ax_psi.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.autofmt_xdate()
    return fig


def _x_axis(reports: Sequence[FlipReport]) -> pd.DatetimeIndex | np.ndarray:
    if all(r.at is not None for r in reports):
        return pd.DatetimeIndex([r.at for r in reports])
    return np.arange(len(reports))


_SINGLE_POINT_PAD = pd.Timedelta(hours=1)
"""Half-width of a time axis that holds one point (matplotlib would widen it to +-2 years)."""


def _limit_to_data(ax: Axes, xs: pd.DatetimeIndex | np.ndarray, span: TimeRange = None) -> None:
    """Time axis over ``span`` when given, else from the first to the last point (not matplotlib's years)."""
    if span is not None and isinstance(xs, pd.DatetimeIndex):
        ax.set_xlim(pd.Timestamp(span[0]), pd.Timestamp(span[1]))
    elif isinstance(xs, pd.DatetimeIndex) and len(xs):
        lo, hi = xs.min(), xs.max()
        if lo == hi:
            lo, hi = lo - _SINGLE_POINT_PAD, hi + _SINGLE_POINT_PAD
        ax.set_xlim(lo, hi)


def _flip_plot(flips: Sequence[FlipReport], span: TimeRange = None) -> str:
    return _png(flip_figure(flips, span=span))


def flip_figure(flips: Sequence[FlipReport], *, span: TimeRange = None) -> Figure:
    """The flip rate over the reports (all, and per version), on ``span`` (default: the reports' own range)."""
    fig, ax = _figure()
    if not flips:
        _no_data(ax)
        return fig
    xs = _x_axis(flips)
    _limit_to_data(ax, xs, span)
    ax.plot(xs, [r.rate for r in flips], marker="o", ms=3, lw=1.6, color="#243b53", label="all")
    versions = sorted({v for r in flips for v in r.by_version})
    for version in versions:
        ax.plot(xs, [r.rate_of(version) for r in flips], lw=1.0, ls="--", label=version)
    ax.set_ylabel("flip rate")
    ax.set_ylim(bottom=0.0)
    ax.set_title("decision flip rate (identical inputs, different price)", fontsize=10)
    ax.legend(fontsize=7)
    fig.autofmt_xdate()
    return fig


def _stacked_plot(history: Sequence[tuple[datetime, Mapping[str, float]]], title: str, ylabel: str,
                  span: TimeRange = None) -> str:
    return _png(stacked_figure(history, title, ylabel, span=span))


def stacked_figure(history: Sequence[tuple[datetime, Mapping[str, float]]], title: str, ylabel: str, *,
                   span: TimeRange = None) -> Figure:
    """Shares over time as a stacked area (tier shares, rollout weights), on ``span`` (default: the points')."""
    fig, ax = _figure()
    if not history:
        _no_data(ax)
        return fig
    frame = pd.DataFrame([dict(values) for _, values in history], index=[t for t, _ in history]).fillna(0.0)
    _limit_to_data(ax, pd.DatetimeIndex(frame.index), span)
    ax.stackplot(frame.index, *(frame[c] for c in frame.columns), labels=list(frame.columns), alpha=0.85)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.autofmt_xdate()
    return fig


def _tier_plot(shares: TierShares, span: TimeRange = None) -> str:
    if not isinstance(shares, Mapping) and len(shares) == 1:  # one export: a stacked area of one point is empty
        shares = dict(shares[0][1])
    if isinstance(shares, Mapping):
        fig, ax = _figure()
        names = list(shares)
        ax.bar(names, [shares[n] for n in names], color=["#829ab1", "#3e7cb1", "#1f2d3d"][: len(names)] or None)
        for i, name in enumerate(names):
            ax.text(i, shares[name], f"{shares[name]:.1%}", ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("share of decisions")
        ax.set_title("tier shares", fontsize=10)
        return _png(fig)
    return _stacked_plot(shares, "tier shares over time", "share of decisions", span)


def _latency_table(latencies: Latencies) -> pd.DataFrame:
    groups = latencies if isinstance(latencies, Mapping) else {"all": latencies}
    rows = {
        tier: [float(np.percentile(np.asarray(values, dtype=float), q)) for q in PERCENTILES] + [len(values)]
        for tier, values in groups.items()
        if len(values)
    }
    return pd.DataFrame.from_dict(rows, orient="index", columns=[*(f"p{q} ms" for q in PERCENTILES), "n"])


def _latency_plot(table: pd.DataFrame) -> str:
    fig, ax = _figure()
    if table.empty:
        _no_data(ax)
        return _png(fig)
    x = np.arange(len(table))
    width = 0.8 / len(PERCENTILES)
    for k, q in enumerate(PERCENTILES):
        bars = ax.bar(x + (k - 1) * width, table[f"p{q} ms"], width, label=f"p{q}")
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(x, list(table.index))
    ax.set_ylabel("latency (ms)")
    ax.set_title("decision latency percentiles", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig)


def _table(frame: pd.DataFrame, *, index: bool = True) -> str:
    if frame.empty:
        return '<p class="note">no data</p>'
    return frame.to_html(index=index, float_format=lambda v: f"{v:.4g}", border=0, na_rep="–")


def _drift_table(history: Sequence[DriftReport]) -> str:
    if not history:
        return _table(pd.DataFrame())
    last = history[-1].to_frame().drop(columns=["at"]).set_index("feature")
    last = last.sort_values(["alert", "psi"], ascending=False)
    return f'<p class="note">last check {history[-1].at:%Y-%m-%d %H:%M} UTC</p>' + _table(last)


def _coverage_table(report: CoverageReport) -> str:
    frame = pd.DataFrame({"pooled": report.by_feature(), "worst hotel": report.worst_hotel()})
    frame = frame.sort_values("pooled", ascending=False)
    note = f'<p class="note">{len(report.hotels)} hotels, {int(report.counts.sum())} reads in the window</p>'
    return note + _table(frame)


def _flip_table(flips: Sequence[FlipReport]) -> str:
    if not flips:
        return _table(pd.DataFrame())
    last = flips[-1]
    rows = {"all": (last.n_inputs, last.n_flipped, last.rate)}
    rows.update({v: (n, f, last.rate_of(v)) for v, (n, f) in last.by_version.items()})
    return _table(pd.DataFrame.from_dict(rows, orient="index", columns=["inputs", "flipped", "rate"]))


def _latest(series: TierShares) -> pd.DataFrame:
    if isinstance(series, Mapping):
        return pd.DataFrame({"share": dict(series)})
    return pd.DataFrame({"latest": dict(series[-1][1])}) if series else pd.DataFrame()


def _section(title: str, image: str, table: str) -> str:
    empty = image.startswith(_EMPTY)
    alt = html.escape(title + (" (no data)" if empty else ""))
    return (
        f"<section><h2>{html.escape(title)}</h2>"
        f'<img alt="{alt}" data-empty="{str(empty).lower()}" src="data:image/png;base64,{image.removeprefix(_EMPTY)}">'
        f"{table}</section>"
    )


def _page(title: str, sections: Sequence[str], *, generated_at: datetime | None, time_range: TimeRange) -> str:
    stamp = (generated_at or datetime.now(tz=UTC)).astimezone(UTC)
    shown = "" if time_range is None else f" · run {time_range[0]:%Y-%m-%d %H:%M} .. {time_range[1]:%Y-%m-%d %H:%M} UTC"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><header><h1>{html.escape(title)}</h1>"
        f"<p>generated {stamp:%Y-%m-%d %H:%M:%S} UTC{html.escape(shown)}</p></header>"
        f"<main>{''.join(sections)}</main></body></html>"
    )


def write_dashboard(
    path: str | Path,
    *,
    coverage: CoverageReport,
    drift_history: Sequence[DriftReport],
    flips: Sequence[FlipReport] | FlipReport,
    tier_shares: TierShares,
    latencies_ms: Latencies,
    rollout_weights_history: Sequence[tuple[datetime, Mapping[str, float]]],
    title: str = "pricestream monitoring",
    generated_at: datetime | None = None,
    time_range: TimeRange = None,
) -> Path:
    """Render the dashboard to ``path`` (parents created) and return the path.

    Args:
        path: output HTML file.
        coverage: the coverage report (heatmap and per-feature table).
        drift_history: drift reports, oldest first (e.g. ``DriftMonitor.history``).
        flips: flip reports over time (or one report).
        tier_shares: ``tier -> share`` now, or ``[(time, {tier: share})]`` over time.
        latencies_ms: decision latencies per tier (or one flat sequence).
        rollout_weights_history: ``[(time, {arm: weight})]``, oldest first.
        title: page title.
        generated_at: time stamp shown in the header (default: now, UTC).
        time_range: the run's own ``(first, last)`` time: every time axis (drift, flips, tier shares,
            rollout weights) spans it, and the header names it (default: each axis spans its points).
    """
    flip_list = [flips] if isinstance(flips, FlipReport) else list(flips)
    history = list(drift_history)
    latency = _latency_table(latencies_ms)
    sections = [
        _section("Feature coverage", _coverage_plot(coverage), _coverage_table(coverage)),
        _section("Feature drift", _drift_plot(history, time_range), _drift_table(history)),
        _section("Decision flip rate", _flip_plot(flip_list, time_range), _flip_table(flip_list)),
        _section("Tier shares", _tier_plot(tier_shares, time_range), _table(_latest(tier_shares))),
        _section("Decision latency", _latency_plot(latency), _table(latency)),
        _section(
            "Rollout weights",
            _stacked_plot(rollout_weights_history, "rollout weights over time", "traffic weight", time_range),
            _table(_latest(rollout_weights_history)),
        ),
    ]
    page = _page(title, sections, generated_at=generated_at, time_range=time_range)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
