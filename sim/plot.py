# SPDX-License-Identifier: BSD-2-Clause
"""Goodput plots of fabric runs (the fabric model's now, the RTL fabric's later): a PNG of
goodput against time with each fault and heal marked.

matplotlib draws on its Agg canvas (no display, no pyplot state): the module can run on a
headless machine and next to other users of matplotlib in one process.
"""

from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import ScaledTranslation

__all__ = ["Marker", "fault_markers", "goodput_plot", "FAULT_COLOR", "HEAL_COLOR"]

FAULT_COLOR = "#d62728"          # the fault lines (tab:red)
HEAL_COLOR = "#2ca02c"           # the heal lines (tab:green)
# The series take the other colours of matplotlib's tab10, so no series looks like a marker.
SERIES_COLORS = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                 "#17becf")
LEGEND_MAX = 16                  # more series than this: no legend, the count in the title


@dataclass(frozen=True)
class Marker:
    """A vertical line on the plot: at ``time_us``, labelled ``label``; a heal (the fault's
    end) when ``heal``, else a fault's start."""
    time_us: float
    label: str
    heal: bool = False


def fault_markers(faults):
    """The :class:`Marker` of every start and end of the scenario ``faults``
    (:class:`models.fabric.Fault`: each outage of a flap counted)."""
    out = []
    for fault in faults:
        if fault.kind in ("link", "flap"):
            where = f"P{fault.plane} T0 {fault.t0}-T1 {fault.t1}"
            start, end = f"link down {where}", f"link up {where}"
        elif fault.kind == "port":
            where = f"host {fault.host} P{fault.plane}"
            start, end = f"port down {where}", f"port up {where}"
        else:
            where = f"P{fault.plane} T1 {fault.t1}" if fault.kind == "path" else \
                f"P{fault.plane} T0 {fault.t0}-T1 {fault.t1}"
            start, end = f"impaired {where}", f"repaired {where}"
        for begin, finish in fault.windows():
            out.append(Marker(begin, f"{start} ({begin:g} us)"))
            if finish is not None:
                out.append(Marker(finish, f"{end} ({finish:g} us)", heal=True))
    return out


def _bin_text(series):
    """The bin width of ``series`` as text for the axis label, when every bin has one width."""
    widths = {round(b - a, 9) for edges, _ in series.values() for a, b in zip(edges, edges[1:])}
    return f"per {widths.pop():g} us bin" if len(widths) == 1 else "per bin (bins of varying width)"


def goodput_plot(series, faults, path, title, line_gbps=None):
    """Draw goodput against time into the PNG ``path``.

    ``series`` maps a label (a host, a flow) to ``(edges_us, gbps)``: the goodput in Gb/s over
    each bin from ``edges_us[k]`` to ``edges_us[k + 1]`` (microseconds of simulated time; one
    more edge than values), drawn as steps. ``faults`` holds :class:`Marker` objects (see
    :func:`fault_markers`), each drawn as a vertical line, red for a fault and green for a heal,
    labelled. ``line_gbps`` (optional) draws the raw line rate as a grey dotted line.
    Returns what was drawn, in pixels of the PNG (columns from the left, rows from the
    top): ``{"size": (width, height), "axes": (left, top, right, bottom), "markers": [(time_us,
    label, column), ...]}``."""
    for label, (edges, values) in series.items():
        if len(edges) != len(values) + 1:
            raise ValueError(f"series {label!r}: {len(edges)} edges for {len(values)} values "
                             f"(one more edge than values expected)")
    fig = Figure(figsize=(10, 5.5), dpi=100, layout="constrained")
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    end = 0.0
    top = 0.0
    for k, (label, (edges, values)) in enumerate(series.items()):
        if values:
            ax.stairs(values, edges, label=str(label), linewidth=1.4,
                      color=SERIES_COLORS[k % len(SERIES_COLORS)])
            end = max(end, edges[-1])
            top = max(top, max(values))
    for marker in faults:
        end = max(end, marker.time_us)
    if line_gbps:
        top = max(top, line_gbps)
        ax.axhline(line_gbps, color="#555555", linewidth=1, linestyle=":")
        ax.text(0.995, line_gbps, f"raw line rate {line_gbps:g} Gb/s", va="bottom", ha="right",
                fontsize=8, color="#555555", transform=ax.get_yaxis_transform())
    ax.set_xlim(0, end or 1.0)
    ax.set_ylim(0, top * 1.15 or 1.0)
    left_of_line = ax.get_xaxis_transform() + ScaledTranslation(-3 / 72, 0, fig.dpi_scale_trans)
    for marker in faults:
        color = HEAL_COLOR if marker.heal else FAULT_COLOR
        ax.axvline(marker.time_us, color=color, linewidth=2, linestyle="--" if marker.heal else "-")
        ax.text(marker.time_us, 0.98, marker.label, rotation=90, va="top", ha="right",
                fontsize=8, color=color, transform=left_of_line,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
    ax.set_xlabel("simulated time (us)")
    ax.set_ylabel(f"goodput (Gb/s): payload bytes placed x 8, {_bin_text(series)}")
    ax.grid(True, alpha=0.3)
    if 0 < len(series) <= LEGEND_MAX:
        fig.legend(loc="outside right upper", fontsize=8)
    elif series:
        title = f"{title} ({len(series)} series)"
    ax.set_title(title, fontsize=10)
    canvas.draw()
    width, height = canvas.get_width_height()
    x0, y0, x1, y1 = ax.get_window_extent().extents
    markers = [(m.time_us, m.label, float(ax.transData.transform((m.time_us, 0))[0]))
               for m in faults]
    fig.savefig(path, format="png", dpi=fig.dpi,
                metadata={"Title": title, "Description": "; ".join(
                    f"{m.label} at {m.time_us:g} us" for m in faults)})
    return {"size": (width, height), "axes": (x0, height - y1, x1, height - y0),
            "markers": markers}
