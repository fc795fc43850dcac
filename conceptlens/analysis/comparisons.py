"""`conceptlens analyze comparisons`: the checkpoints of a dataset against each other.

One unit per dataset, recomputed whenever one of its checkpoints' clusterings or
metrics changes (or a checkpoint is added). Per k it writes CLID, W-CLID and its
leave-one-out version (`clid_scores`) and the correlation of every predictor with kNN
accuracy, with 95% intervals (`predictor_correlations`, lu2022 Table 1) - over the
checkpoints that embedded the same images only, and of the population `--population` asks
for (`POPULATIONS`: by default lu2022's, the training checkpoints, without the layers of a
depth sequence) - then the adjusted NMI between every two
clusterings (`clustering_similarity`) and their contingency tables (`cluster_links`,
which the Checkpoints page turns into splits and merges). A pair whose two
clusterings are unchanged since the last run is not compared again.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import metrics as M
from .. import schema
from ..metrics.compare import contingency
from ..metrics.scores import anmi
from ..schema import (
    BOOL,
    FLOAT,
    INT,
    MIN_STABLE_CHECKPOINTS,
    NON_NEGATIVE,
    SIGNED_UNIT,
    STRING,
    UNIT,
    Column,
    Table,
)
from ..workspace import files_signature
from .base import Analysis, Option, Scope, Unit
from .common import Context

# The unsupervised predictors correlated with kNN accuracy (`predictor_correlations.predictor`).
PREDICTORS = (
    "cl",
    "cl_heldout",
    "id",
    "clid",
    "wclid",
    "wclid_loo",
    # lu2022's baselines (section 3.2; `conceptlens analyze baselines`)
    "alignment",
    "uniformity",
    "mcr2",
    "rotation",
    "source_entropy",
)
# Transfer accuracy is also compared with in-domain kNN accuracy and the target label entropy.
TRANSFER_PREDICTORS = PREDICTORS + ("knn_acc", "target_entropy")

# Which checkpoints of a dataset CLID, W-CLID and the correlations are over (`--population`).
# lu2022 correlates measures across trained models and their epochs: each checkpoint's
# default embedding. A layer of one network (`checkpoints.layer`, extracted for a depth
# sequence) is another kind of population. A *training checkpoint* is a checkpoint of a
# model's default embedding (`layer` null), whatever its `depth`: the embedding that ends
# a depth sequence (depth = its last position) is the model's output at that epoch, a
# training checkpoint like the others. A *layer checkpoint* is one with a `layer` or a
# `depth`: the checkpoints of the networks' layers, a depth sequence's closing embedding
# included (the last of its layers). `both` is every checkpoint.
POPULATIONS = ("training", "layers", "both")
POPULATION_NAMES = {
    "training": "training checkpoints",
    "layers": "layer checkpoints",
    "both": "training and layer checkpoints",
}
POPULATION_MEANING = {
    "training": "lu2022's population: each model's default embedding, at every epoch; the "
    "layers of a depth sequence are left out (the embedding that ends one is a training checkpoint)",
    "layers": "the layers of depth sequences, the embedding that ends each included; not lu2022's population",
    "both": "training checkpoints and layers together: a layer of one network is another kind "
    "of population than lu2022's trained models",
}
POPULATION = Option(
    "population",
    str,
    "training",
    "which checkpoints of a dataset CLID, W-CLID and the predictor and transfer correlations "
    "are over: `training` (lu2022's population, the default: each model's default embedding, "
    "checkpoints without a `layer`; the embedding that ends a depth sequence is one), "
    "`layers` (checkpoints with a `layer` or a `depth`: the layers of depth sequences, their "
    "closing embedding included) or `both` (every checkpoint)",
    choices=POPULATIONS,
    legacy="both",  # units stored before the option existed were over every checkpoint
)


def _column(ck: pd.DataFrame, name: str) -> pd.Series:
    """A nullable column of `checkpoints` (absent in older workspaces: all null)."""
    if name in ck.columns:
        return ck[name]
    return pd.Series(None, index=ck.index, dtype=object)


def checked_population(population) -> str:
    """`population` if it is one of POPULATIONS, else ValueError naming `--population`."""
    why = POPULATION.problem(population)
    if why:
        raise ValueError(f"{POPULATION.flag} {why}")
    return population


def in_population(ck: pd.DataFrame, population: str) -> np.ndarray:
    """Which rows of a `checkpoints` frame belong to `population` (one of POPULATIONS);
    ValueError naming `--population` for another value."""
    checked_population(population)
    trained = _column(ck, "layer").isna().to_numpy()
    if population == "training":
        return trained
    if population == "layers":
        return ~trained | _column(ck, "depth").notna().to_numpy()
    return np.ones(len(ck), bool)


def population_label(population: str, n: int | None = None, of: int | None = None) -> str:
    """How pages and figures name a population: "29 training checkpoints (of 33)"."""
    name = POPULATION_NAMES[checked_population(population)]
    if n is None:
        return name
    return f"{n} {name}" + (f" (of {of})" if of is not None and of != n else "")


def _correlation_columns(against: str) -> tuple[Column, ...]:
    """Pearson and Kendall correlations with `against`, their p-values and 95% intervals."""
    return (
        Column("pearson", FLOAT, f"Pearson r with {against}.", nullable=True, bounds=SIGNED_UNIT),
        Column("pearson_p", FLOAT, "Its two-sided p-value.", nullable=True, bounds=UNIT),
        Column(
            "pearson_lo",
            FLOAT,
            "95% interval of r, low end (Fisher z).",
            nullable=True,
            required=False,
            bounds=SIGNED_UNIT,
            at_most=("pearson",),
        ),
        Column(
            "pearson_hi",
            FLOAT,
            "95% interval of r, high end (Fisher z).",
            nullable=True,
            required=False,
            bounds=SIGNED_UNIT,
        ),
        Column("kendall", FLOAT, f"Kendall tau-b with {against}.", nullable=True, bounds=SIGNED_UNIT),
        Column("kendall_p", FLOAT, "Its two-sided p-value.", nullable=True, bounds=UNIT),
        Column(
            "kendall_lo",
            FLOAT,
            "95% interval of tau, low end (percentile bootstrap over checkpoints, 2,000 seeded resamples).",
            nullable=True,
            required=False,
            bounds=SIGNED_UNIT,
        ),
        Column(
            "kendall_hi",
            FLOAT,
            "95% interval of tau, high end.",
            nullable=True,
            required=False,
            bounds=SIGNED_UNIT,
        ),
        Column(
            "pearson_perm_p",
            FLOAT,
            f"Two-sided permutation p-value of r: the share of permutations of {against} across "
            "the checkpoints with |r| at least the observed one (all n! of them up to 7 "
            "checkpoints, else 10,000 seeded ones, counted with the observed order).",
            nullable=True,
            required=False,
            bounds=UNIT,
        ),
        Column(
            "kendall_perm_p",
            FLOAT,
            "The same permutation p-value for tau.",
            nullable=True,
            required=False,
            bounds=UNIT,
        ),
        Column(
            "unstable",
            BOOL,
            f"Fewer than {MIN_STABLE_CHECKPOINTS} checkpoints: the interval is unstable, the value "
            "is not a finding.",
            nullable=True,
            required=False,
        ),
    )


CLID_SCORES = Table(
    "clid_scores",
    "clid_scores",
    "CLID and W-CLID of each checkpoint, relative to the other checkpoints of its dataset "
    "at the same k (lu2022).",
    (
        Column(
            "dataset",
            STRING,
            "Dataset of the compared checkpoints (partition folder).",
            references="images.dataset",
        ),
        Column("k", INT, "Number of clusters.", positive=True),
        Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
        Column("clid", FLOAT, "z(CL) + z(ID) across the compared checkpoints.", nullable=True),
        Column(
            "wclid",
            FLOAT,
            "Least-squares fit of knn_acc on [CL, ID, 1] across checkpoints.",
            nullable=True,
        ),
        Column(
            "wclid_loo",
            FLOAT,
            "The same fit leaving this checkpoint out (leave-one-out).",
            nullable=True,
            required=False,
        ),
    ),
    key=("checkpoint_id", "k"),
    partition=("dataset",),
)

PREDICTOR_CORRELATIONS = Table(
    "predictor_correlations",
    "predictor_correlations",
    "Correlation of each unsupervised predictor with knn_acc across a dataset's "
    "checkpoints (lu2022 Table 1).",
    (
        Column(
            "dataset",
            STRING,
            "Dataset of the compared checkpoints (partition folder).",
            references="images.dataset",
        ),
        Column("k", INT, "Number of clusters.", positive=True),
        Column("predictor", STRING, "Unsupervised predictor compared.", allowed=PREDICTORS),
        *_correlation_columns("knn_acc"),
        Column("n_checkpoints", INT, "Checkpoints with both values.", bounds=NON_NEGATIVE),
    ),
    key=("dataset", "k", "predictor"),
    partition=("dataset",),
)

TRANSFER_CORRELATIONS = Table(
    "transfer_correlations",
    "transfer_correlations",
    "Correlation of each predictor with transfer accuracy across a dataset's checkpoints "
    "(lu2022 Tables 2 and 5).",
    (
        Column(
            "dataset",
            STRING,
            "Source dataset of the compared checkpoints (partition folder).",
            references="images.dataset",
        ),
        Column("target_dataset", STRING, "Dataset transferred to.", references="images.dataset"),
        Column("k", INT, "Number of clusters of the cluster-based predictors.", positive=True),
        Column("predictor", STRING, "Predictor compared.", allowed=TRANSFER_PREDICTORS),
        *_correlation_columns("transfer accuracy"),
        Column("n_checkpoints", INT, "Checkpoints with both values.", bounds=NON_NEGATIVE),
    ),
    key=("dataset", "target_dataset", "k", "predictor"),
    partition=("dataset",),
)


def _pair_columns() -> tuple[Column, ...]:
    """The key of a table about two clusterings of a dataset at one k (checkpoint_a <
    checkpoint_b): clustering_similarity's and cluster_links'."""
    return (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column("k", INT, "Number of clusters.", positive=True),
        Column(
            "checkpoint_a",
            STRING,
            "First checkpoint.",
            references="checkpoints.checkpoint_id",
            less_than="checkpoint_b",
        ),
        Column("checkpoint_b", STRING, "Second checkpoint.", references="checkpoints.checkpoint_id"),
    )


CLUSTERING_SIMILARITY = Table(
    "clustering_similarity",
    "clustering_similarity",
    "Adjusted NMI between the clusterings of two checkpoints of a dataset at the same k, "
    "on the images both assign (one row per unordered pair, checkpoint_a < checkpoint_b).",
    (
        *_pair_columns(),
        Column(
            "anmi",
            FLOAT,
            "Adjusted NMI (arithmetic normalisation); null below 2 shared images.",
            nullable=True,
            bounds=SIGNED_UNIT,
        ),
        Column("n_shared", INT, "Images both clusterings assign.", bounds=NON_NEGATIVE),
    ),
    key=("dataset", "k", "checkpoint_a", "checkpoint_b"),
    partition=("dataset",),
)

CLUSTER_LINKS = Table(
    "cluster_links",
    "cluster_links",
    "The contingency table of two clusterings of a dataset at the same k: how many shared "
    "images cluster a of checkpoint_a and cluster b of checkpoint_b have in common "
    "(non-zero cells only; checkpoint_a < checkpoint_b).",
    (
        *_pair_columns(),
        Column("a", INT, "Cluster of checkpoint_a.", bounds=NON_NEGATIVE, less_than="k"),
        Column("b", INT, "Cluster of checkpoint_b.", bounds=NON_NEGATIVE, less_than="k"),
        Column("count", INT, "Shared images in both (> 0).", positive=True, at_most=("size_a", "size_b")),
        Column("size_a", INT, "Shared images in cluster a.", positive=True),
        Column("size_b", INT, "Shared images in cluster b.", positive=True),
    ),
    key=("dataset", "k", "checkpoint_a", "checkpoint_b", "a", "b"),
    partition=("dataset",),
)


def _checkpoints_of(ctx: Context, dataset: str) -> list[str]:
    ck = ctx.checkpoints
    return sorted(ck.loc[ck["dataset"] == dataset, "checkpoint_id"])


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    measured = {p["checkpoint_id"] for p in ctx.ws.partitions("checkpoint_metrics")}
    ck = ctx.checkpoints
    wanted = scope.checkpoint
    if wanted is not None:
        ck = ck[ck["checkpoint_id"] == wanted]
    datasets = sorted(set(ck.loc[ck["checkpoint_id"].isin(measured), "dataset"]))
    return [Unit({"dataset": d}) for d in datasets]


def _inputs_of(ctx: Context, dataset: str) -> dict[tuple[str, int], dict]:
    """(checkpoint, k) -> its clusters and checkpoint_metrics files, and the baseline and
    transfer files of the checkpoint where `conceptlens analyze baselines` ran, for this dataset."""
    cids = set(_checkpoints_of(ctx, dataset))
    out = {}
    for p in ctx.ws.partitions("checkpoint_metrics"):
        if p["checkpoint_id"] in cids and ctx.ws.has("clusters", **p):
            cid = {"checkpoint_id": p["checkpoint_id"]}
            out[p["checkpoint_id"], p["k"]] = {
                "clusters": ctx.ws.partition_files("clusters", **p),
                "metrics": ctx.ws.partition_files("checkpoint_metrics", **p),
                "baselines": ctx.ws.partition_files("baseline_scores", **cid)
                + ctx.ws.partition_files("transfer_scores", **cid),
            }
    return out


def _fingerprint(ctx: Context, unit: Unit, opts: dict | None = None) -> str:
    files = [f for v in _inputs_of(ctx, unit.partition["dataset"]).values() for fs in v.values() for f in fs]
    return files_signature(sorted(set(files), key=str))


# Predictor columns from `baseline_scores` (the entropy is stored as -H; its name says so).
BASELINE_COLUMNS = {
    "alignment": "alignment",
    "uniformity": "uniformity",
    "mcr2": "mcr2",
    "rotation": "rotation",
    "source_entropy": "source_neg_entropy",
}


def _with_baselines(ctx: Context, metrics: pd.DataFrame) -> pd.DataFrame:
    """checkpoint_metrics rows with the baseline predictors of their (checkpoint, k)
    (missing values where the baselines analysis has not run)."""
    frames = [
        ctx.ws.read("baseline_scores", checkpoint_id=c).to_pandas()
        for c in sorted(set(metrics["checkpoint_id"]))
        if ctx.ws.has("baseline_scores", checkpoint_id=c)
    ]
    cols = ["checkpoint_id", "k", *BASELINE_COLUMNS.values()]
    base = pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
    base = base.rename(columns={v: k for k, v in BASELINE_COLUMNS.items()})
    base["k"] = base["k"].astype("int64")
    out = metrics.merge(base, on=["checkpoint_id", "k"], how="left")
    for c in BASELINE_COLUMNS:
        out[c] = out[c].astype(float)
    return out


def transfer_correlations(ctx: Context, sub_by_k: dict[int, pd.DataFrame], seed: int) -> list[dict]:
    """Correlation of every predictor, in-domain kNN accuracy and the target label entropy
    with each target's transfer accuracy, over the comparable checkpoints of each k."""
    frames = [
        ctx.ws.read("transfer_scores", checkpoint_id=c).to_pandas()
        for c in sorted({c for g in sub_by_k.values() for c in g["checkpoint_id"]})
        if ctx.ws.has("transfer_scores", checkpoint_id=c)
    ]
    if not frames:
        return []
    tr = pd.concat(frames, ignore_index=True)
    out = []
    for k, sub in sorted(sub_by_k.items()):
        for target, t in tr.groupby("target_dataset", sort=True):
            j = sub.merge(t, on="checkpoint_id", how="left").sort_values("checkpoint_id")
            j = j.assign(target_entropy=j["target_neg_entropy"].astype(float))
            acc = j["accuracy"].astype(float).to_numpy()
            for p in TRANSFER_PREDICTORS:
                r = M.correlations(j[p].astype(float).to_numpy(), acc, random_state=seed)
                out.append(
                    {
                        "target_dataset": target,
                        "k": int(k),
                        "predictor": p,
                        **{n: None if isinstance(v, float) and math.isnan(v) else v for n, v in r.items()},
                    }
                )
    return out


def _image_set(ctx: Context, cid: str, k: int) -> str:
    """Fingerprint of the set of images a clustering covers."""
    ids = ctx.ws.read("clusters", columns=["image_id"], checkpoint_id=cid, k=k)["image_id"].to_pylist()
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def comparable(g: pd.DataFrame) -> np.ndarray:
    """Rows of one k whose image set is the most common one (ties: more images, then the set
    of the first checkpoint id). CL, ID and kNN accuracy measured on other images are not
    comparable: a z-score across them would mix datasets."""
    sizes = g.groupby("image_set").agg(
        n=("checkpoint_id", "size"), images=("n_images", "max"), first=("checkpoint_id", "min")
    )
    best = sizes.sort_values(["n", "images", "first"], ascending=[False, False, True]).index[0]
    return (g["image_set"] == best).to_numpy()


def clid_and_correlations(
    metrics: pd.DataFrame, seed: int = 0, comparable_rows: dict | None = None
) -> tuple[list, list, list]:
    """clid_scores and predictor_correlations rows, and notes on checkpoints left out.

    `metrics` holds checkpoint_metrics rows with `checkpoint_id`, `k` and `image_set`, and
    the baseline predictors where known. `comparable_rows`, if given, receives each k's
    comparable rows with their CLID scores."""
    metrics = metrics.copy()
    for c in BASELINE_COLUMNS:
        if c not in metrics:
            metrics[c] = math.nan
    scores, corr, notes = [], [], []
    for k, g in metrics.groupby("k", sort=True):
        g = g.sort_values("checkpoint_id").reset_index(drop=True)
        same = comparable(g)
        if not same.all():
            notes.append(
                f"k={k}: {', '.join(g.loc[~same, 'checkpoint_id'])} embedded other images "
                f"than the other {int(same.sum())} checkpoint(s): left out of CLID, W-CLID "
                f"and the predictor correlations"
            )
        sub = g[same].reset_index(drop=True)
        cl, id_, acc = (sub[c].astype(float).to_numpy() for c in ("cl", "id", "knn_acc"))
        sub = sub.assign(
            clid=M.clid(cl, id_),
            wclid=M.wclid(cl, id_, acc)[0],
            wclid_loo=M.wclid(cl, id_, acc, leave_one_out=True)[0],
        )
        if comparable_rows is not None:
            comparable_rows[int(k)] = sub
        values = sub.set_index("checkpoint_id")[["clid", "wclid", "wclid_loo"]]
        for cid in g["checkpoint_id"]:
            row = {"k": int(k), "checkpoint_id": cid}
            for col in values.columns:
                v = values.at[cid, col] if cid in values.index else math.nan
                row[col] = None if np.isnan(v) else float(v)
            scores.append(row)
        for p in PREDICTORS:
            r = M.correlations(sub[p].astype(float).to_numpy(), acc, random_state=seed)
            # A correlation that cannot be computed is missing (null), not a number.
            corr.append(
                {
                    "k": int(k),
                    "predictor": p,
                    **{n: None if isinstance(v, float) and math.isnan(v) else v for n, v in r.items()},
                }
            )
    return scores, corr, notes


def population_members(ctx: Context, dataset: str, population: str) -> tuple[list[str], list[str]]:
    """The checkpoints of `dataset` in `population`, and those left out of it."""
    ck = ctx.checkpoints[ctx.checkpoints["dataset"] == dataset]
    inside = in_population(ck, population)
    return sorted(ck.loc[inside, "checkpoint_id"]), sorted(ck.loc[~inside, "checkpoint_id"])


def stored_population(ws, dataset: str) -> str | None:
    """The population the stored `predictor_correlations` of `dataset` are over, from the
    options stored with its unit (`legacy` `both` for a unit stored before the option
    existed); None when not computed."""
    if not ws.has("predictor_correlations", dataset=dataset):
        return None
    md = ws.read_metadata("predictor_correlations", dataset=dataset)
    return ANALYSIS.stored_options(md.get("analysis_options"))["population"]


def _population_metrics(ctx: Context, ds: str, inputs: dict, population: str) -> pd.DataFrame | None:
    """checkpoint_metrics rows (with image sets and baselines) of the population's
    measured checkpoints of `ds`; None when it has none (a note says so)."""
    members, out = population_members(ctx, ds, population)
    measured_out = sorted({c for c, _ in inputs if c in set(out)})
    if measured_out:
        ctx.note(
            f"{ds}: {len(measured_out)} checkpoint(s) outside the population "
            f"`--population {population}` ({population_label(population)}) left out of CLID, "
            f"W-CLID and the correlations: {', '.join(measured_out)}"
        )
    metrics = metrics_of(ctx, ds, members, inputs)
    if metrics is None:
        ctx.note(f"{ds}: no measured checkpoint is among the {population_label(population)}: no correlation")
    return metrics


def metrics_of(ctx: Context, dataset: str, cids, inputs: dict | None = None) -> pd.DataFrame | None:
    """What `clid_and_correlations` reads for the checkpoints `cids` of `dataset`: their
    checkpoint_metrics rows at every k with the fingerprint of their image set and their
    baseline predictors; None when none of them is measured. `inputs`: `_inputs_of`'s
    (read again without)."""
    inputs = _inputs_of(ctx, dataset) if inputs is None else inputs
    wanted = set(cids)
    rows = [
        ctx.ws.read("checkpoint_metrics", checkpoint_id=c, k=k)
        .to_pandas()
        .assign(checkpoint_id=c, k=k, image_set=_image_set(ctx, c, k))
        for c, k in sorted(inputs)
        if c in wanted
    ]
    return _with_baselines(ctx, pd.concat(rows, ignore_index=True)) if rows else None


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    ds = unit.partition["dataset"]
    inputs = _inputs_of(ctx, ds)
    fingerprint = _fingerprint(ctx, unit)
    metrics = _population_metrics(ctx, ds, inputs, opts["population"])
    by_k: dict = {}
    scores, corr, notes = [], [], []
    if metrics is not None:
        scores, corr, notes = clid_and_correlations(metrics, opts["seed"], by_k)
    transfer = transfer_correlations(ctx, by_k, opts["seed"])
    for n in notes:
        ctx.note(f"{ds} {n}")

    # Pairs whose two clusterings are unchanged keep their previous results (whole-frame
    # joins: at 28 checkpoints the stored links have millions of rows).
    sig = {f"{c}/{k}": files_signature(v["clusters"]) for (c, k), v in inputs.items()}
    old_sig = ctx.ws.read_metadata("cluster_links", dataset=ds).get("clusterings", {})
    pairs = pd.DataFrame(
        [
            (k, a, b)
            for k in sorted({k for _, k in inputs})
            for a in sorted(c for c, kk in inputs if kk == k)
            for b in sorted(c for c, kk in inputs if kk == k)
            if a < b
        ],
        columns=["k", "checkpoint_a", "checkpoint_b"],
    )
    unchanged = [
        all(old_sig.get(f"{c}/{k}") == sig[f"{c}/{k}"] for c in (a, b))
        for k, a, b in pairs.itertuples(index=False)
    ]
    keep = pairs[unchanged] if len(pairs) else pairs
    sims, links = [], []
    stored = ctx.ws.has("clustering_similarity", dataset=ds) and ctx.ws.has("cluster_links", dataset=ds)
    if len(keep) and stored:
        old_sim = ctx.ws.read("clustering_similarity", dataset=ds).to_pandas().drop(columns="dataset")
        sims.append(old_sim.merge(keep, on=["k", "checkpoint_a", "checkpoint_b"]))
        old_links = ctx.ws.read("cluster_links", dataset=ds).to_pandas().drop(columns="dataset")
        links.append(
            old_links.merge(
                sims[0][["k", "checkpoint_a", "checkpoint_b"]], on=["k", "checkpoint_a", "checkpoint_b"]
            )
        )
    done = set(map(tuple, sims[0][["k", "checkpoint_a", "checkpoint_b"]].to_numpy())) if sims else set()
    assign: dict = {}
    for k, a, b in pairs.itertuples(index=False):
        if (k, a, b) in done:
            continue
        for c in (a, b):
            if (c, k) not in assign:
                assign[c, k] = ctx.ws.read(
                    "clusters", columns=["image_id", "cluster"], checkpoint_id=c, k=k
                ).to_pandas()
        j = assign[a, k].merge(assign[b, k], on="image_id", suffixes=("_a", "_b"))
        value = anmi(j["cluster_a"], j["cluster_b"]) if len(j) >= 2 else None
        sims.append(
            pd.DataFrame([{"k": k, "checkpoint_a": a, "checkpoint_b": b, "anmi": value, "n_shared": len(j)}])
        )
        links.append(contingency(assign[a, k], assign[b, k]).assign(k=k, checkpoint_a=a, checkpoint_b=b))
    frames = {"clustering_similarity": sims, "cluster_links": links}
    write = [
        ("clid_scores", scores, None),
        ("clustering_similarity", sims, None),
        ("cluster_links", links, {"clusterings": sig}),
        ("transfer_correlations", transfer, None),
        ("predictor_correlations", corr, ANALYSIS.done_metadata(opts, fingerprint)),
    ]  # last: marks the unit done
    for name, data, md in write:
        want = schema.arrow_schema(name, partition=False)
        if name in frames:
            df = pd.concat(data, ignore_index=True) if data else pd.DataFrame(columns=want.names)
            df = df[want.names].sort_values([c for c in want.names if c in schema.TABLES_BY_NAME[name].key])
            table = pa.Table.from_pandas(df, schema=want, preserve_index=False)
        else:
            table = pa.Table.from_pylist(data, schema=want)
        ctx.ws.write(name, table, metadata=md, dataset=ds)
    return fingerprint


ANALYSIS = Analysis(
    name="comparisons",
    title="Checkpoints compared: CLID, predictor correlations, aNMI, cluster matching",
    writes=(
        "clid_scores",
        "clustering_similarity",
        "cluster_links",
        "transfer_correlations",
        "predictor_correlations",
    ),
    tables=(CLID_SCORES, PREDICTOR_CORRELATIONS, TRANSFER_CORRELATIONS, CLUSTERING_SIMILARITY, CLUSTER_LINKS),
    units=_units,
    run=_run,
    options=(POPULATION,),
    inputs=_fingerprint,
    depends=("cluster_metrics",),
    doc=__doc__.splitlines()[0],
)
