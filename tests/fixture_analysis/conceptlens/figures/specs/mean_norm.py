"""The Mean norm page's figure: each checkpoint's mean feature norm with its 95% interval.

A fixture, not part of the product (tests/test_contracts.py)."""

from __future__ import annotations

from ...views import mean_norm as V
from ..catalog import Figure, Param, add, view
from .common import col, needs


def _norms(db, p):
    import plotly.graph_objects as go

    df = needs(view(db, V.norms, dataset=p["ds"]), f"no mean norm in dataset {p['ds']}")
    err = dict(
        type="data",
        symmetric=False,
        array=(df["mean_norm_hi"] - df["mean_norm"]).to_numpy(float),
        arrayminus=(df["mean_norm"] - df["mean_norm_lo"]).to_numpy(float),
    )
    fig = go.Figure(go.Bar(x=list(df["checkpoint_id"]), y=df["mean_norm"].to_numpy(float), error_y=err))
    fig.update_layout(xaxis_title="checkpoint", yaxis_title="mean feature norm")
    return fig


add(
    Figure(
        "mean_norm",
        "mean_norm_bars",
        "Mean feature norm per checkpoint",
        (Param("ds", lambda db, p: col(view(db, V.datasets), "dataset"), help="dataset"),),
        _norms,
        aspect=0.6,
        steps=("mean_norm",),
    )
)
