"""`conceptlens analyze comparisons`: the checkpoints of a dataset against each other.

One unit per dataset, recomputed whenever one of its checkpoints' clusterings or
metrics changes (or a checkpoint is added). Per k it writes CLID and W-CLID
(`clid_scores`), the correlation of every predictor with kNN accuracy
(`predictor_correlations`, lu2022 Table 1), the adjusted NMI between every two
clusterings (`clustering_similarity`) and their contingency tables (`cluster_links`,
which the Checkpoints page turns into splits and merges). A pair whose two
clusterings are unchanged since the last run is not compared again.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..workspace import files_signature
from .common import Context
from .registry import Analysis, Unit

PREDICTORS = ("cl", "cl_heldout", "id", "clid", "wclid")


def _checkpoints_of(ctx: Context, dataset: str) -> list[str]:
    ck = ctx.checkpoints
    return sorted(ck.loc[ck["dataset"] == dataset, "checkpoint_id"])


def _units(ctx: Context, opts: dict) -> list[Unit]:
    measured = {p["checkpoint_id"] for p in ctx.ws.partitions("checkpoint_metrics")}
    ck = ctx.checkpoints
    wanted = opts.get("_checkpoint")
    if wanted is not None:
        ck = ck[ck["checkpoint_id"] == wanted]
    datasets = sorted(set(ck.loc[ck["checkpoint_id"].isin(measured), "dataset"]))
    return [Unit({"dataset": d}) for d in datasets]


def _inputs_of(ctx: Context, dataset: str) -> dict[tuple[str, int], dict]:
    """(checkpoint, k) -> its clusters and checkpoint_metrics files, for this dataset."""
    cids = set(_checkpoints_of(ctx, dataset))
    out = {}
    for p in ctx.ws.partitions("checkpoint_metrics"):
        if p["checkpoint_id"] in cids and ctx.ws.has("clusters", **p):
            out[p["checkpoint_id"], p["k"]] = {
                "clusters": ctx.ws.partition_files("clusters", **p),
                "metrics": ctx.ws.partition_files("checkpoint_metrics", **p)}
    return out


def _fingerprint(ctx: Context, unit: Unit) -> str:
    files = [f for v in _inputs_of(ctx, unit.partition["dataset"]).values()
             for f in v["clusters"] + v["metrics"]]
    return files_signature(files)


def _clid_and_correlations(metrics: pd.DataFrame) -> tuple[list, list]:
    from .. import metrics as M
    scores, corr = [], []
    for k, g in metrics.groupby("k", sort=True):
        def f(c):
            return g[c].astype(float).to_numpy()
        g = g.assign(clid=M.clid(f("cl"), f("id")), wclid=M.wclid(f("cl"), f("id"), f("knn_acc"))[0])
        for r in g.itertuples(index=False):
            scores.append({"k": int(k), "checkpoint_id": r.checkpoint_id,
                           "clid": None if np.isnan(r.clid) else float(r.clid),
                           "wclid": None if np.isnan(r.wclid) else float(r.wclid)})
        for p in PREDICTORS:
            r = M.correlations(g[p].astype(float).to_numpy(), g["knn_acc"].astype(float).to_numpy())
            # A correlation that cannot be computed is missing (null), not a number.
            corr.append({"k": int(k), "predictor": p,
                         **{c: None if isinstance(v, float) and math.isnan(v) else v for c, v in r.items()}})
    return scores, corr


def _run(ctx: Context, unit: Unit, opts: dict) -> str:
    from .compare import anmi, contingency
    ds = unit.partition["dataset"]
    inputs = _inputs_of(ctx, ds)
    fingerprint = _fingerprint(ctx, unit)
    rows = [ctx.ws.read("checkpoint_metrics", checkpoint_id=c, k=k).to_pandas() for c, k in sorted(inputs)]
    metrics = pd.concat(rows, ignore_index=True)
    scores, corr = _clid_and_correlations(metrics)

    # Pairs whose two clusterings are unchanged keep their previous results.
    sig = {f"{c}/{k}": files_signature(v["clusters"]) for (c, k), v in inputs.items()}
    old_sig = ctx.ws.read_metadata("cluster_links", dataset=ds).get("clusterings", {})
    old_sim = old_links = None
    if old_sig and ctx.ws.has("clustering_similarity", dataset=ds) and ctx.ws.has("cluster_links", dataset=ds):
        old_sim = ctx.ws.read("clustering_similarity", dataset=ds).to_pandas()
        old_links = ctx.ws.read("cluster_links", dataset=ds).to_pandas()
    sim, links = [], []
    for k in sorted({k for _, k in inputs}):
        cids = sorted(c for c, kk in inputs if kk == k)
        assign = {}
        for i, a in enumerate(cids):
            for b in cids[i + 1:]:
                same = all(old_sig.get(f"{c}/{k}") == sig[f"{c}/{k}"] for c in (a, b))
                if same and old_sim is not None:
                    pick = (old_sim["k"] == k) & (old_sim["checkpoint_a"] == a) & (old_sim["checkpoint_b"] == b)
                    if pick.any():
                        sim += old_sim[pick].drop(columns="dataset").to_dict("records")
                        lk = (old_links["k"] == k) & (old_links["checkpoint_a"] == a) & \
                            (old_links["checkpoint_b"] == b)
                        links += old_links[lk].drop(columns="dataset").to_dict("records")
                        continue
                for c in (a, b):
                    if c not in assign:
                        assign[c] = ctx.ws.read("clusters", columns=["image_id", "cluster"],
                                                checkpoint_id=c, k=k).to_pandas()
                j = assign[a].merge(assign[b], on="image_id", suffixes=("_a", "_b"))
                value = anmi(j["cluster_a"], j["cluster_b"]) if len(j) >= 2 else None
                sim.append({"k": k, "checkpoint_a": a, "checkpoint_b": b, "anmi": value,
                            "n_shared": len(j)})
                t = contingency(assign[a], assign[b])
                links += [{"k": k, "checkpoint_a": a, "checkpoint_b": b, **r}
                          for r in t.to_dict("records")]
    write = [("clid_scores", scores, None), ("clustering_similarity", sim, None),
             ("cluster_links", links, {"clusterings": sig}),
             ("predictor_correlations", corr, {"inputs": fingerprint})]   # last: marks the unit done
    for name, data, md in write:
        ctx.ws.write(name, pa.Table.from_pylist(data, schema=schema.arrow_schema(name, partition=False)),
                     metadata=md, dataset=ds)
    return fingerprint


ANALYSIS = Analysis(
    name="comparisons", title="Checkpoints compared: CLID, predictor correlations, aNMI, cluster matching",
    writes=("clid_scores", "clustering_similarity", "cluster_links", "predictor_correlations"),
    units=_units, run=_run, inputs=_fingerprint, depends=("cluster_metrics",), page="Checkpoints",
    doc=__doc__.splitlines()[0],
)
