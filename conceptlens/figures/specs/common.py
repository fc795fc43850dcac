"""Parameters and helpers the Clusters and Checkpoints pages' figures share."""

from __future__ import annotations

from ... import views
from ..catalog import Param, Unavailable, view


def col(df, col: str) -> list:
    return [] if df is None or df.empty else list(df[col])


C = views.clusters
K = views.checkpoints
DS_CLUSTERED = Param("ds", lambda db, p: col(view(db, C.datasets), "dataset"), help="dataset")
CKPT = Param(
    "ckpt", lambda db, p: col(view(db, C.checkpoints, dataset=p["ds"]), "checkpoint_id"), help="checkpoint"
)
K_OF_CKPT = Param(
    "k", lambda db, p: [int(k) for k in col(view(db, C.ks, checkpoint=p["ckpt"]), "k")], kind=int, help="k"
)
K_OF_DS = Param(
    "k", lambda db, p: [int(k) for k in col(view(db, K.ks, dataset=p["ds"]), "k")], kind=int, help="k"
)


def order(db, p) -> list:
    return col(view(db, K.summary, dataset=p["ds"], k=p["k"], clid=False), "checkpoint_id")


def needs(df, what: str):
    if df is None or len(df) == 0:
        raise Unavailable(what)
    return df
