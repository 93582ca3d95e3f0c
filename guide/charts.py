"""Plotly figures with the reader's units and labels. Data in, figure out."""

from __future__ import annotations

import plotly.graph_objects as go

GIB = 2**30


def base_layout(fig: go.Figure, x_title: str, y_title: str, lang: str = "en", height: int = 380) -> go.Figure:
    fig.update_layout(
        separators=", " if lang == "fr" else ".,",  # decimal mark, then thousands separator
        height=height, margin=dict(l=10, r=10, t=30, b=10), xaxis_title=x_title, yaxis_title=y_title,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0), hovermode="x unified",
    )
    return fig


def capacity_line(fig: go.Figure, capacity_bytes: int, label: str) -> None:
    fig.add_hline(y=capacity_bytes / GIB, line_dash="dash", line_color="#d62728",
                  annotation_text=label, annotation_position="top left")


def stacked_memory(x: list, parts: dict[str, list[int]], x_title: str, y_title: str, lang: str = "en") -> go.Figure:
    """Stacked bars of byte counts (shown in GiB)."""
    fig = go.Figure()
    for name, values in parts.items():
        fig.add_bar(x=x, y=[v / GIB for v in values], name=name)
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    fig.update_xaxes(type="category")  # batch sizes 1, 2, 4... evenly spaced, not on a linear scale
    return base_layout(fig, x_title, y_title, lang)
