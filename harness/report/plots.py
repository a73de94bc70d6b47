"""The report's plots, drawn by matplotlib and rendered to inline SVG (text kept as text).

* `error_along_graph(case)`: each op's isolated and accumulated error relative to its tolerance
  along the graph order, log scale, the tolerance at 1: where error enters and how it grows.
* `headroom_by_kind(kinds)`: tolerance / observed per op kind across the run, least first.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.report.document import as_float
from harness.report.summary import OpKind, ops_of

FLOOR = 1e-6  # errors below a millionth of their tolerance are drawn on the floor
KIND_BARS = 25
WIDTH_IN = 8.0
COLORS = {"isolated": "#1f77b4", "accumulated": "#ff7f0e", "tolerance": "#d62728", "failed": "#d62728"}


def _ratio(comparison: Mapping[str, Any] | None) -> float:
    value = as_float(comparison.get("tolerance_ratio")) if comparison else None
    if value is None or math.isnan(value):
        return math.nan
    return max(min(value, 1e12), FLOOR)


def _svg(figure: Any, salt: str) -> str:
    """The figure as an <svg> element to inline in HTML: no XML prolog, ids unique per plot
    (matplotlib derives them from `svg.hashsalt`), width following the page."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="plot" role="img"', text, count=1)


def _figure(height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(WIDTH_IN, height), layout="constrained")


def error_along_graph(case: Mapping[str, Any]) -> str | None:
    """SVG of one case's per-op errors along the graph; None without per-op rows."""
    ops = ops_of(case)
    if not ops:
        return None
    figure = _figure(2.6)
    axes = figure.add_subplot()
    positions = list(range(len(ops)))
    for key in ("accumulated", "isolated"):
        values = [_ratio(op.get(key)) for op in ops]
        if any(not math.isnan(v) for v in values):
            axes.plot(positions, values, label=f"{key} error / tolerance", color=COLORS[key],
                      linewidth=1.0, marker="." if len(ops) <= 80 else None, markersize=3)
    failed = [(i, _ratio(op.get("isolated") or op.get("accumulated"))) for i, op in enumerate(ops)
              if op.get("passed") is False]
    if failed:
        axes.scatter([i for i, _ in failed], [v for _, v in failed], marker="x", color=COLORS["failed"],
                     zorder=3, label="op over tolerance")
    axes.axhline(1.0, color=COLORS["tolerance"], linestyle="--", linewidth=1.0, label="tolerance")
    axes.set_yscale("log")
    finite = [v for op in ops for v in (_ratio(op.get("isolated")), _ratio(op.get("accumulated"))) if math.isfinite(v)]
    axes.set_ylim(FLOOR / 2, max([10.0] + [v * 3 for v in finite]))
    axes.set_xlim(-0.5, len(ops) - 0.5)
    axes.set_xlabel(f"op in graph order (of {len(ops)})")
    axes.set_ylabel(f"error / tolerance\n(floor {FLOOR:g}, exact 0 too)", fontsize=8)
    axes.grid(True, which="major", alpha=0.3)
    figure.legend(fontsize=7, loc="outside upper center", ncols=4, frameon=False)
    return _svg(figure, f"case-{case['name']}")


def headroom_by_kind(kinds: Sequence[OpKind]) -> str | None:
    """SVG bar chart of the op kinds with the least headroom; None without isolated ops."""
    shown = list(kinds[:KIND_BARS])
    if not shown:
        return None
    figure = _figure(0.8 + 0.22 * len(shown))
    axes = figure.add_subplot()
    labels = [f"{k.aten} ({k.dtype})" for k in shown][::-1]
    values = [min(k.headroom, 1e9) for k in shown][::-1]
    colors = [COLORS["failed"] if k.failed else COLORS["isolated"] for k in shown][::-1]
    axes.barh(labels, values, color=colors)
    axes.axvline(1.0, color=COLORS["tolerance"], linestyle="--", linewidth=1.0)
    axes.set_xscale("log")
    axes.set_xlabel("headroom: tolerance / worst observed isolated error (log; < 1 fails)")
    axes.tick_params(axis="y", labelsize=7)
    axes.grid(True, axis="x", alpha=0.3)
    return _svg(figure, "kinds")
