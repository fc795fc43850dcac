"""`conceptlens analyze concepts`: the quality of concept representations (the
concept-quality paper; docs/concepts.md).

One unit per checkpoint of a dataset with `concept_labels`. Its concepts are the
checkpoint's own (`checkpoints.concept_names`, `concept_dim`: feature_dim = k x d,
concept-major) or, without them, probe concepts: one logistic-regression probe per
ground-truth concept on its features, fitted on the train split (concept-based model
extraction, Kazhdan et al. 2020). For each seed:

- the purity matrix on the dataset's test images (an 80/20 split of them shared by every
  pair and by the oracle), its alignment to the true concepts, OIS and the non-oracle
  impurity; the dataset's oracle matrix is computed once per run;
- the concept-correlation nicher on the train split, the label predictor (MLP 20-20) on
  the train split and niche purity / impurity on the test split for every beta of the
  public code's grid, with the paper's scores at `--niche-beta` and the curve's area.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..metrics import concepts as CQ
from ..schema import BOOL, FLOAT, INT, NON_NEGATIVE, STRING, UNIT, Column, Table
from ..workspace import WorkspaceError
from .base import SEED, Analysis, Option, Scope, Unit
from .common import Context, files_footprint

ORACLE_PURITY = Table(
    "oracle_purity",
    "oracle_purity",
    "The oracle purity matrix of a concept dataset (concept-quality paper, Definition 1 "
    "on the ground-truth concepts themselves): test AUC of a one-hidden-layer (32 ReLU) "
    "classifier predicting concept j from concept i, on the seed's 80/20 split of the "
    "test images; the diagonal is 1.",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column("seed", INT, "Seed of the split and the classifiers.", bounds=NON_NEGATIVE),
        Column("concept_i", STRING, "Concept read (`concept_labels.concept`)."),
        Column("concept_j", STRING, "Concept predicted."),
        Column(
            "auc",
            FLOAT,
            "Test AUC (for a multiclass concept j: macro one-vs-one, or one-vs-rest with "
            "`--purity-multiclass ovr`).",
            bounds=UNIT,
            finite=True,
        ),
    ),
    key=("dataset", "seed", "concept_i", "concept_j"),
    partition=("dataset",),
)

PURITY_MATRICES = Table(
    "purity_matrices",
    "purity_matrices",
    "The purity matrix of a checkpoint's concepts (concept-quality paper, Definition 1): "
    "test AUC of a one-hidden-layer (32 ReLU) classifier predicting true concept j from "
    "learnt concept i (all its d dimensions), on the same split as `oracle_purity`. "
    "Checkpoints without `concept_names` get probe concepts (one probe per true concept, "
    "fitted on the train split).",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("seed", INT, "Seed of the split and the classifiers.", bounds=NON_NEGATIVE),
        Column("learnt_concept", STRING, "Learnt (or probe) concept read."),
        Column("true_concept", STRING, "Ground-truth concept predicted (`concept_labels.concept`)."),
        Column(
            "auc",
            FLOAT,
            "Test AUC (for a multiclass concept: macro one-vs-one, or one-vs-rest with "
            "`--purity-multiclass ovr`).",
            bounds=UNIT,
            finite=True,
        ),
        Column(
            "aligned",
            BOOL,
            "The learnt concept is the one aligned to this true concept: by name, or "
            "else greedily by AUC (the paper's appendix 6.4). OIS compares the aligned rows.",
        ),
    ),
    key=("checkpoint_id", "seed", "learnt_concept", "true_concept"),
    partition=("checkpoint_id",),
)

CONCEPT_NICHES = Table(
    "concept_niches",
    "concept_niches",
    "The concept-correlation nicher (concept-quality paper, Definition 3): |Pearson "
    "correlation| between each learnt concept (max over its d dimensions) and each task "
    "label (one-hot) on the train split; the concept is in the label's niche where it "
    "exceeds beta.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("seed", INT, "Seed of the analysis.", bounds=NON_NEGATIVE),
        Column("beta", FLOAT, "Threshold.", bounds=UNIT, finite=True),
        Column("label", INT, "Task label (`images.label`).", bounds=NON_NEGATIVE),
        Column("learnt_concept", STRING, "Learnt (or probe) concept."),
        Column("corr", FLOAT, "|Pearson correlation|.", bounds=UNIT, finite=True),
        Column("in_niche", BOOL, "corr > beta."),
    ),
    key=("checkpoint_id", "seed", "beta", "label", "learnt_concept"),
    partition=("checkpoint_id",),
)

NICHE_SCORES = Table(
    "niche_scores",
    "niche_scores",
    "Niche purity and impurity per label and beta (concept-quality paper, Definitions "
    "5-6; its Figure 6): test AUC for the label of one label predictor (ReLU MLP 20-20, "
    "trained once on all concepts) with every concept outside the niche zeroed (`nps`) "
    "or every concept inside it zeroed (`nis`, the public code's curve).",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("seed", INT, "Seed of the label predictor.", bounds=NON_NEGATIVE),
        Column("beta", FLOAT, "Threshold of the nicher.", bounds=UNIT, finite=True),
        Column("label", INT, "Task label.", bounds=NON_NEGATIVE),
        Column("niche_size", INT, "Learnt concepts in the label's niche.", bounds=NON_NEGATIVE),
        Column("nps", FLOAT, "Niche purity: AUC from the niche alone.", bounds=UNIT, finite=True),
        Column("nis", FLOAT, "Niche impurity: AUC from its complement.", bounds=UNIT, finite=True),
    ),
    key=("checkpoint_id", "seed", "beta", "label"),
    partition=("checkpoint_id",),
)

CONCEPT_SCORES = Table(
    "concept_scores",
    "concept_scores",
    "Concept quality of a checkpoint per seed (concept-quality paper): oracle impurity, "
    "the non-oracle impurity, the niche scores at a fixed beta and the area under the "
    "niche impurity curve.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("seed", INT, "Seed of the analysis.", bounds=NON_NEGATIVE),
        Column(
            "ois",
            FLOAT,
            "Oracle impurity score 2/k ||pi - pi_oracle||_F over the aligned k x k matrix "
            "(at most 1 where every AUC is >= 0.5).",
            bounds=(0, 2),
            finite=True,
        ),
        Column(
            "non_oracle_impurity",
            FLOAT,
            "The same against an oracle of 1 on the diagonal and 0.5 elsewhere.",
            bounds=(0, 2),
            finite=True,
        ),
        Column(
            "nis_area",
            FLOAT,
            "Area under the mean niche impurity (`niche_scores.nis`: each label's raw "
            "probability column, the paper's Definitions 5-6) over beta, divided by the width "
            "of the beta range (a mean). Null (with the other niche scores) when the dataset "
            "has no task labels.",
            nullable=True,
            bounds=UNIT,
            finite=True,
        ),
        Column(
            "nis_area_code",
            FLOAT,
            "`nis_area` as the public code computes it (`niching.niche_impurity`): for three "
            "or more labels, a softmax across labels of the niche-zeroed probability columns "
            "before each label's one-vs-rest AUC; equal to `nis_area` for a binary task. "
            "Absent from files written before it existed.",
            nullable=True,
            required=False,
            bounds=UNIT,
            finite=True,
        ),
        Column("nps_beta", FLOAT, "Mean niche purity over labels at `beta`.", nullable=True, bounds=UNIT),
        Column("nis_beta", FLOAT, "Mean niche impurity over labels at `beta`.", nullable=True, bounds=UNIT),
        Column(
            "mean_niche_size",
            FLOAT,
            "Mean niche size over labels at `beta`.",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
        Column("beta", FLOAT, "The fixed beta (the paper's 0.2).", bounds=UNIT, finite=True),
        Column(
            "task_auc",
            FLOAT,
            "Test AUC of the label predictor on all concepts (mean one-vs-rest over labels).",
            nullable=True,
            bounds=UNIT,
            finite=True,
        ),
    ),
    key=("checkpoint_id", "seed"),
    partition=("checkpoint_id",),
)

OPTIONS = (
    Option(
        "concept_seeds",
        int,
        3,
        "seeds of the purity splits, classifiers and label predictor (--seed, --seed + 1, ...); "
        "intervals are over them",
        minimum=1,
    ),
    Option(
        "niche_beta", float, CQ.PAPER_BETA, "beta of the niche purity / impurity scores", minimum=0, maximum=1
    ),
    Option("purity_steps", int, 200, "minibatch Adam steps of each purity classifier", minimum=1),
    Option(
        "purity_multiclass",
        str,
        CQ.MULTICLASS[0],
        "AUC of a multiclass true concept in the purity matrices: ovo (macro one-vs-one) or ovr "
        "(macro one-vs-rest, the public code's one-hot roc_auc_score)",
        choices=CQ.MULTICLASS,
    ),
)


# ---- what is analysed ----------------------------------------------------------------------
def _labels(ctx: Context) -> pd.DataFrame | None:
    return ctx.table("concept_labels", required=False)


def _concept_datasets(ctx: Context) -> set[str]:
    labels = _labels(ctx)
    if labels is None or labels.empty:
        return set()
    img = ctx.images[["image_id", "dataset"]]
    return set(img.loc[img["image_id"].isin(set(labels["image_id"])), "dataset"])


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    datasets = _concept_datasets(ctx)
    ck = ctx.checkpoints
    out = []
    for r in ck.sort_values("checkpoint_id").itertuples(index=False):
        if r.dataset not in datasets or not ctx.ws.has("features", checkpoint_id=r.checkpoint_id):
            continue
        if scope.checkpoint not in (None, r.checkpoint_id):
            continue
        out.append(Unit({"checkpoint_id": r.checkpoint_id, "dataset": r.dataset}, r.checkpoint_id))
    return out


def _declared(row: pd.Series) -> tuple[list[str] | None, int | None]:
    names = row.get("concept_names")
    if names is None or (not isinstance(names, (list, np.ndarray)) and pd.isna(names)):
        return None, None
    dim = row.get("concept_dim")
    return [str(n) for n in names], (None if dim is None or pd.isna(dim) else int(dim))


def _fingerprint(ctx: Context, unit: Unit, opts: dict) -> str:
    cid = unit.partition["checkpoint_id"]
    names, dim = _declared(ctx.checkpoint_row(cid))
    payload = {
        "features": files_footprint(ctx.ws.partition_files("features", checkpoint_id=cid)),
        "inputs": files_footprint(ctx.ws.files("concept_labels") + ctx.ws.files("images")),
        "concepts": [names, dim],
        # In the hash since before options were stored with every unit: kept, so the units
        # analysed then stay done.
        "options": {o.name: opts[o.name] for o in (SEED, *OPTIONS)},
    }
    return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# ---- a dataset's ground truth ------------------------------------------------------------------
class Truth:
    """The labelled images of a dataset (sorted by id), their concepts and task labels."""

    def __init__(self, ctx: Context, dataset: str):
        img = ctx.images
        img = img[img["dataset"] == dataset].set_index("image_id")
        labels = _labels(ctx)
        labels = labels[labels["image_id"].isin(img.index)]
        wide = labels.pivot(index="image_id", columns="concept", values="value")
        where = ctx.ws.table_path("concept_labels")
        if wide.isna().any().any():
            missing = wide.columns[wide.isna().any()].tolist()
            raise WorkspaceError(
                f"{where}: images of dataset {dataset!r} lack a value of concept(s) "
                f"{missing[:5]}: every labelled image needs every concept"
            )
        wide = wide.sort_index()
        constant = [c for c in wide.columns if wide[c].nunique() < 2]
        if constant:
            raise WorkspaceError(f"{where}: concept(s) {constant} of dataset {dataset!r} take a single value")
        self.dataset = dataset
        self.ids = wide.index.to_numpy(dtype=object)
        self.names = [str(c) for c in wide.columns]
        self.C = wide.to_numpy(np.int64)
        meta = img.loc[self.ids]
        self.split = meta["split"].to_numpy(dtype=object)
        self.y = meta["label"].to_numpy(dtype=float)
        self.label_names = (
            meta.dropna(subset=["label"]).groupby("label")["label_name"].first().to_dict()
            if "label_name" in meta
            else {}
        )
        self.test = np.flatnonzero(self.split == "test")
        self.train = np.flatnonzero(self.split == "train")
        if len(self.test) < 10:
            raise WorkspaceError(
                f"{ctx.ws.table_path('images')}: dataset {dataset!r} has {len(self.test)} labelled "
                "test image(s); the purity matrices need at least 10"
            )

    def oracle(self, seed: int, steps: int, multiclass: str = "ovo") -> np.ndarray:
        try:
            return CQ.oracle_matrix(self.C[self.test], random_state=seed, steps=steps, multiclass=multiclass)
        except CQ.UnsplittableConcept as e:
            counts = np.unique(self.C[self.test, e.column], return_counts=True)
            held = ", ".join(f"{v} on {c}" for v, c in zip(*counts))
            raise WorkspaceError(
                f"concept {self.names[e.column]!r} of dataset {self.dataset!r}: the purity matrices "
                f"score every concept on a {CQ.TEST_SHARE:.0%} share of the {len(self.test)} test "
                "images, and "
                f"its values are too rare there (value: images {held}); mark more images `test` "
                "(conceptlens import images --test-fraction) or leave the concept out "
                "(conceptlens import concepts --replace)"
            ) from None


def _truth(ctx: Context, dataset: str) -> Truth:
    cache = ctx.__dict__.setdefault("_concept_truth", {})
    if dataset not in cache:
        cache.clear()  # one dataset at a time: units come sorted by checkpoint, usually grouped
        cache[dataset] = Truth(ctx, dataset)
    return cache[dataset]


def _oracles(ctx: Context, truth: Truth, seeds: list[int], opts: dict) -> dict[int, np.ndarray]:
    """The dataset's oracle matrices, computed and written once per run."""
    cache = ctx.__dict__.setdefault("_concept_oracles", {})
    key = (truth.dataset, tuple(seeds), opts["purity_steps"], opts["purity_multiclass"])
    if key not in cache:
        mats = {s: truth.oracle(s, opts["purity_steps"], opts["purity_multiclass"]) for s in seeds}
        rows = [
            {"seed": s, "concept_i": a, "concept_j": b, "auc": float(M[i, j])}
            for s, M in mats.items()
            for i, a in enumerate(truth.names)
            for j, b in enumerate(truth.names)
        ]
        ctx.ws.write(
            "oracle_purity",
            pa.Table.from_pylist(rows, schema=schema.arrow_schema("oracle_purity", partition=False)),
            dataset=truth.dataset,
        )
        cache[key] = mats
    return cache[key]


# ---- a checkpoint's concepts -------------------------------------------------------------------
def representations(ctx: Context, cid: str, truth: Truth, seed: int) -> tuple[list[str], list[np.ndarray]]:
    """(names, per-concept arrays aligned with truth.ids) of checkpoint `cid`."""
    ids, X = ctx.features(cid)
    pos = {i: k for k, i in enumerate(ids)}
    missing = [i for i in truth.ids if i not in pos]
    if missing:
        raise WorkspaceError(
            f"{ctx.ws.table_path('features', checkpoint_id=cid)}: lacks {len(missing)} labelled "
            f"image(s) of dataset {truth.dataset!r}, e.g. {missing[0]!r}"
        )
    X = X[[pos[i] for i in truth.ids]]
    names, dim = _declared(ctx.checkpoint_row(cid))
    if names is not None:
        if dim is None or len(names) * dim != X.shape[1]:
            raise WorkspaceError(
                f"{ctx.ws.table_path('checkpoints')}: checkpoint {cid!r} declares {len(names)} concepts "
                f"x concept_dim {dim} but its features have {X.shape[1]} dimensions"
            )
        return names, [X[:, i * dim : (i + 1) * dim] for i in range(len(names))]
    return truth.names, probe_concepts(X, truth, seed)


def probe_concepts(X: np.ndarray, truth: Truth, seed: int) -> list[np.ndarray]:
    """One logistic-regression probe per true concept, fitted on the train split: its
    predicted probability (binary) or probabilities (multiclass) for every image."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(truth.train) == 0:
        raise WorkspaceError(f"dataset {truth.dataset!r} has no labelled train image to fit probes on")
    out = []
    for j, name in enumerate(truth.names):
        c = truth.C[truth.train, j]
        if len(np.unique(c)) < 2:
            raise WorkspaceError(
                f"concept {name!r} of dataset {truth.dataset!r} takes one value on the train split: "
                "no probe can be fitted"
            )
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
        probe.fit(X[truth.train], c)
        p = probe.predict_proba(X)
        out.append(p[:, 1:2] if p.shape[1] == 2 else p)
    return [o.astype(np.float32) for o in out]


# ---- one checkpoint -------------------------------------------------------------------------
def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    # Every product here is small: BLAS threads only wait on each other, badly so on a
    # shared machine (probes and the label predictor ran 3-5x slower with them).
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _run_unit(ctx, unit, opts)


def _run_unit(ctx: Context, unit: Unit, opts: dict) -> str:
    cid, ds = unit.partition["checkpoint_id"], unit.partition["dataset"]
    truth = _truth(ctx, ds)
    seeds = [opts["seed"] + s for s in range(opts["concept_seeds"])]
    oracles = _oracles(ctx, truth, seeds, opts)
    names, reps = representations(ctx, cid, truth, opts["seed"])
    if len(names) < len(truth.names):
        raise WorkspaceError(
            f"{ctx.ws.table_path('checkpoints')}: checkpoint {cid!r} has {len(names)} concepts, fewer "
            f"than the {len(truth.names)} true concepts of {ds!r}: they cannot be aligned"
        )
    if len(set(names)) != len(names):
        raise WorkspaceError(f"{ctx.ws.table_path('checkpoints')}: concept_names of {cid!r} repeat a name")
    test_reps = [r[truth.test] for r in reps]
    labelled = ~np.isnan(truth.y)
    tr = truth.train[labelled[truth.train]]
    te = truth.test[labelled[truth.test]]
    betas = sorted(set(CQ.BETAS) | {float(opts["niche_beta"])})
    purity, niche_rows, niche_score_rows, scores = [], [], [], []
    flat = np.hstack(reps).astype(np.float64)
    columns = CQ.concept_columns(reps)
    for s in seeds:
        P = CQ.purity_matrix(
            test_reps,
            truth.C[truth.test],
            random_state=s,
            steps=opts["purity_steps"],
            multiclass=opts["purity_multiclass"],
        )
        aligned = CQ.align(P, names, truth.names)
        pairs = set(zip(aligned, range(len(truth.names))))
        purity += [
            {
                "seed": s,
                "learnt_concept": a,
                "true_concept": b,
                "auc": float(P[i, j]),
                "aligned": (i, j) in pairs,
            }
            for i, a in enumerate(names)
            for j, b in enumerate(truth.names)
        ]
        Pa = P[aligned]
        row = {
            "seed": s,
            "ois": CQ.ois(Pa, oracles[s]),
            "non_oracle_impurity": CQ.non_oracle_impurity(Pa),
            "nis_area": None,
            "nis_area_code": None,
            "nps_beta": None,
            "nis_beta": None,
            "mean_niche_size": None,
            "beta": float(opts["niche_beta"]),
            "task_auc": None,
        }
        if len(np.unique(truth.y[tr])) >= 2 and len(te):
            row.update(_niches(truth, names, reps, flat, columns, tr, te, betas, s, opts, niche_rows))
            niche_score_rows += row.pop("_curve")
        scores.append(row)
    if not niche_rows:
        ctx.note(f"concepts {cid}: dataset {ds!r} has no task labels on both splits; niche scores skipped")

    def write(name, rows, **md):
        t = pa.Table.from_pylist(rows, schema=schema.arrow_schema(name, partition=False))
        ctx.ws.write(name, t, checkpoint_id=cid, **md)

    fp = _fingerprint(ctx, unit, opts)
    write("purity_matrices", purity)
    write("concept_niches", niche_rows)
    write("niche_scores", niche_score_rows)
    write("concept_scores", scores, metadata=ANALYSIS.done_metadata(opts, fp))
    return fp


def _niches(truth, names, reps, flat, columns, tr, te, betas, seed, opts, niche_rows) -> dict:
    y = truth.y  # float: NaN where an image has no label (tr and te hold labelled rows only)
    f = CQ.fit_label_predictor(flat[tr], y[tr].astype(np.int64), random_state=seed)
    labels = [int(v) for v in f.classes_]
    corr = CQ.niche_correlations([r[tr] for r in reps], y[tr], labels)
    for beta in betas:
        inside = CQ.niches(corr, beta)
        niche_rows += [
            {
                "seed": seed,
                "beta": float(beta),
                "label": lab,
                "learnt_concept": name,
                "corr": float(corr[i, j]),
                "in_niche": bool(inside[i, j]),
            }
            for i, name in enumerate(names)
            for j, lab in enumerate(labels)
        ]
    curve = pd.DataFrame(CQ.niche_scores(f, flat[te], y[te].astype(np.int64), columns, corr, betas))
    curve = curve.dropna(subset=["nps", "nis"])  # a label absent from the test split has no AUC
    at = curve[np.isclose(curve["beta"], opts["niche_beta"])]
    grid = curve[curve["beta"].isin(CQ.BETAS)].groupby("beta")["nis"].mean()
    code = CQ.niche_impurity_code(f, flat[te], y[te].astype(np.int64), columns, corr, CQ.BETAS)
    return {
        "nis_area": CQ.area_over_beta(grid.index.to_numpy(), grid.to_numpy()),
        "nis_area_code": CQ.area_over_beta(list(code), list(code.values())),
        "nps_beta": float(at["nps"].mean()),
        "nis_beta": float(at["nis"].mean()),
        "mean_niche_size": float(at["niche_size"].mean()),
        "task_auc": CQ.task_auc(f, flat[te], y[te].astype(np.int64)),
        "_curve": [{"seed": seed, **r} for r in curve.to_dict("records")],
    }


ANALYSIS = Analysis(
    name="concepts",
    title="Concept quality: purity matrices, oracle impurity and concept niches",
    writes=("oracle_purity", "purity_matrices", "concept_niches", "niche_scores", "concept_scores"),
    tables=(ORACLE_PURITY, PURITY_MATRICES, CONCEPT_NICHES, NICHE_SCORES, CONCEPT_SCORES),
    units=_units,
    run=_run,
    options=OPTIONS,
    inputs=_fingerprint,
    mtime_inputs_before_2_3=True,
    doc="Purity matrices of every checkpoint's concepts (its own, or probe concepts), the "
    "oracle impurity score, and niche purity / impurity (the concept-quality paper).",
)
