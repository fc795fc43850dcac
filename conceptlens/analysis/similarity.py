"""`conceptlens analyze similarity`: people's similarity judgments (roads2021).

One unit per dataset with `similarity_trials`. It infers the psychological embedding
(`conceptlens.embedding.psych`: an ensemble per candidate dimensionality, the best on
held-out trials kept) into `psych_embedding` and `similarity_fit`, projects it to 2-D
(UMAP, `projections` partition `checkpoint_id=psych@DATASET`), and scores every
checkpoint of the dataset against people (`human_alignment`): triplet accuracy on the
trials and RSA against the embedding, overall and per label, with bootstrap intervals.

A unit is due when its trials or a checkpoint's features change (or with `--force`). The
fit is then redone only when the trials or the fit's options changed (always with
`--force`); a checkpoint is scored again only when its features, the fit or the scoring
options changed, so adding a checkpoint costs its own scoring alone.
"""

from __future__ import annotations

import hashlib
import json
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import rng as rngs
from .. import schema
from ..embedding import psych as P
from ..embedding.psych import psych_id, read_embedding
from ..metrics import similarity as S
from ..schema import BOOL, FLOAT, FLOAT_LIST, INT, NON_NEGATIVE, SIGNED_UNIT, STRING, UNIT, Column, Table
from ..workspace import WorkspaceError, files_signature
from .base import BETA, MAX_EPOCHS, Analysis, Option, Scope, Unit
from .common import Context, encode, files_footprint, read_trials

PSYCH_EMBEDDING = Table(
    "psych_embedding",
    "psych_embedding",
    "The psychological embedding inferred from a dataset's similarity trials (roads2021 "
    "section 4.2): per ensemble member, the variational posterior N(mu, diag(sigma^2)) of "
    "every image judged, at the dimensionality chosen on held-out trials.",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column(
            "member",
            INT,
            "Ensemble member (0-based): members differ in their seed and "
            "in the trials held out from their fit.",
            bounds=NON_NEGATIVE,
        ),
        Column("image_id", STRING, "Image (stimulus).", references="images.image_id"),
        Column("mu", FLOAT_LIST, "Posterior mean; its length is the chosen dimensionality.", finite=True),
        Column("sigma", FLOAT_LIST, "Posterior standard deviation of each dimension (> 0).", finite=True),
    ),
    key=("dataset", "member", "image_id"),
    partition=("dataset",),
)

SIMILARITY_FIT = Table(
    "similarity_fit",
    "similarity_fit",
    "How well the psychological embedding predicts trials it was not fitted on, per "
    "dimensionality and ensemble member; the dimensionality with the best mean held-out "
    "log-likelihood is `selected` (roads2021 section 4.2).",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column("dim", INT, "Dimensionality of the embedding.", positive=True),
        Column("member", INT, "Ensemble member.", bounds=NON_NEGATIVE),
        Column("selected", BOOL, "This dimensionality was kept (`psych_embedding`)."),
        Column("n_train", INT, "Trials fitted.", positive=True),
        Column("n_heldout", INT, "Train-split trials held out from this member's fit.", positive=True),
        Column(
            "heldout_loglik",
            FLOAT,
            "Mean weighted log-likelihood of a held-out trial (posterior mean embedding).",
            bounds=(None, 0),
        ),
        Column(
            "heldout_accuracy",
            FLOAT,
            "Share of held-out trials whose chosen references, "
            "in order, are the embedding's most probable outcome.",
            bounds=UNIT,
        ),
        Column(
            "heldout_triplet_accuracy",
            FLOAT,
            "Triplet accuracy (L2) on the held-out trials, as roads2021 Table 2's `Psych. Emb.` row.",
            bounds=UNIT,
        ),
        Column(
            "test_loglik",
            FLOAT,
            "Mean weighted log-likelihood of a `test` trial; null without test trials.",
            nullable=True,
            bounds=(None, 0),
        ),
        Column("test_accuracy", FLOAT, "Accuracy on the `test` trials.", nullable=True, bounds=UNIT),
        Column(
            "agreement",
            FLOAT,
            "Mean Spearman correlation of this member's expected "
            "similarities with the other members' at the same dimensionality (the "
            "ensemble's spread; roads2021 section 5.2); null for a single member.",
            nullable=True,
            bounds=SIGNED_UNIT,
        ),
        Column("prior_scale", FLOAT, "Learned standard deviation of the prior N(0, s^2 I).", positive=True),
        Column("epochs", INT, "Epochs run (early stopping on the training loss).", positive=True),
        Column("seconds", FLOAT, "Wall time of the fit.", bounds=NON_NEGATIVE),
    ),
    key=("dataset", "dim", "member"),
    partition=("dataset",),
)

HUMAN_ALIGNMENT = Table(
    "human_alignment",
    "human_alignment",
    "How well each checkpoint agrees with people (roads2021 section 6): triplet accuracy "
    "on the similarity trials and the Spearman correlation of its similarities with the "
    "psychological embedding's (RSA), overall and per label, with 95% bootstrap intervals.",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
        Column(
            "metric",
            STRING,
            "`triplet_accuracy` (roads2021 Eq. 10; ties count 1/2) or "
            "`rsa` (Spearman of the upper triangles).",
            allowed=("triplet_accuracy", "rsa"),
        ),
        Column(
            "distance",
            STRING,
            "Distance (or, for rsa, negated distance) between the checkpoint's features.",
            allowed=("l1", "l2", "cosine"),
        ),
        Column(
            "label",
            INT,
            "Label scored: of the trial's query (triplet accuracy) or of "
            "one image of each pair (rsa); null = every image.",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
        Column("label_name", STRING, "Its name.", nullable=True, present_with="label"),
        Column("value", FLOAT, "The score.", bounds=SIGNED_UNIT),
        Column(
            "lo",
            FLOAT,
            "95% percentile bootstrap interval, lower end (resampling "
            "trials for triplet accuracy, images for rsa).",
            nullable=True,
            bounds=SIGNED_UNIT,
            at_most=("hi",),
        ),
        Column("hi", FLOAT, "Upper end.", nullable=True, bounds=SIGNED_UNIT),
        Column("n", INT, "Triplets (triplet accuracy) or image pairs (rsa) scored.", positive=True),
        Column("n_units", INT, "Trials (triplet accuracy) or images (rsa) resampled.", positive=True),
    ),
    key=("dataset", "checkpoint_id", "metric", "distance", "label"),
    partition=("dataset",),
)

FIT_OPTIONS = ("seed", "dims", "members", "screen_members", "holdout", "beta", "max_epochs", "batch_trials")
SCORE_OPTIONS = ("seed", "n_boot", "rsa_max", "beta")


def _datasets(ctx: Context, opts: dict, scope: Scope) -> list[str]:
    have = sorted({p["dataset"] for p in ctx.ws.partitions("similarity_trials")})
    wanted = scope.checkpoint
    if wanted is not None:
        ds = ctx.checkpoint_row(wanted)["dataset"]
        have = [d for d in have if d == ds]
    return have


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    return [Unit({"dataset": d}) for d in _datasets(ctx, opts, scope)]


def _checkpoints_of(ctx: Context, dataset: str) -> list[str]:
    ck = ctx.checkpoints
    return sorted(
        c
        for c in ck.loc[ck["dataset"] == dataset, "checkpoint_id"]
        if ctx.ws.has("features", checkpoint_id=c)
    )


def _fingerprint(ctx: Context, unit: Unit, opts: dict | None = None) -> str:
    ds = unit.partition["dataset"]
    trials = files_signature(ctx.ws.partition_files("similarity_trials", dataset=ds))
    feats = {
        c: files_footprint(ctx.ws.partition_files("features", checkpoint_id=c))
        for c in _checkpoints_of(ctx, ds)
    }
    return _hash(json.dumps({"trials": trials, "features": feats}, sort_keys=True))


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# ---- the psychological embedding -----------------------------------------------------------
def _fit(ctx: Context, ds: str, trials: pd.DataFrame, opts: dict, trial_sig: str) -> None:
    fitted = trials[~trials["is_catch"] & (trials["split"] == "train")]
    if fitted.empty:
        raise WorkspaceError(
            f"{ctx.ws.partition_dir('similarity_trials', dataset=ds)}: no "
            "non-catch trial of split `train` to fit"
        )
    stimuli = sorted(set(fitted["query"]) | {i for refs in fitted["references"] for i in refs})
    index = {s: k for k, s in enumerate(stimuli)}
    stim, sel = encode(fitted, index)
    train = P.Trials(stim, sel, fitted["weight"].to_numpy(np.float64))
    test = trials[~trials["is_catch"] & (trials["split"] == "test")]
    test_trials = None
    if len(test):
        tstim, tsel = encode(test, index)
        ok = tstim[:, 0] >= 0
        if (~ok).any():
            ctx.note(
                f"similarity {ds}: {int((~ok).sum())} test trial(s) show images no train "
                "trial shows; they are not scored"
            )
        if ok.any():
            test_trials = P.Trials(tstim[ok], tsel[ok], test["weight"].to_numpy(np.float64)[ok])
    if not 0 < opts["holdout"] < 1:
        raise ValueError(f"--holdout must be in (0, 1), got {opts['holdout']}")
    ens = P.fit_ensemble(
        train,
        len(stimuli),
        dims=opts["dims"],
        members=opts["members"],
        holdout=opts["holdout"],
        test=test_trials,
        beta=opts["beta"],
        seed=opts["seed"],
        progress=ctx.progress,
        label=f"similarity {ds}",
        screen=opts["screen_members"],
        max_epochs=opts["max_epochs"],
        batch_size=opts["batch_trials"],
    )
    rows, fits = ens.rows, ens.members()
    # A stimulus none of a member's trials shows keeps its prior: mean 0, sd = the prior's.
    for m, f in enumerate(fits):
        keep = np.setdiff1d(np.arange(len(train)), ens.heldout[m])
        seen = np.zeros(len(stimuli), bool)
        shown = stim[keep]
        seen[shown[shown >= 0]] = True
        f.mu[~seen] = 0.0
        f.sigma[~seen] = f.prior_scale
    ids = pa.array(stimuli, pa.string())
    emb = pa.concat_tables(
        [
            pa.table(
                {
                    "member": pa.array(np.full(len(stimuli), m, np.int64)),
                    "image_id": ids,
                    "mu": _lists(f.mu),
                    "sigma": _lists(f.sigma),
                },
                schema=schema.arrow_schema("psych_embedding", partition=False),
            )
            for m, f in enumerate(fits)
        ]
    )
    ctx.ws.write("psych_embedding", emb, dataset=ds)
    xy = umap_euclidean(np.hstack([f.mu for f in fits]) / np.sqrt(len(fits)), opts["seed"])
    ctx.ws.write(
        "projections",
        pa.table(
            {"image_id": ids, "x": xy[:, 0].astype(np.float64), "y": xy[:, 1].astype(np.float64)},
            schema=schema.arrow_schema("projections", partition=False),
        ),
        checkpoint_id=psych_id(ds),
        method="umap",
    )
    fit_md = {
        "trials": trial_sig,
        "options": {k: opts[k] for k in FIT_OPTIONS},
        "selected_dim": ens.selected_dim,
    }
    ctx.ws.write(
        "similarity_fit",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_fit", partition=False)),
        metadata=fit_md,
        dataset=ds,
    )
    ctx.note(
        f"similarity {ds}: {len(stimuli)} images, {len(train)} trials fitted; dimensionality "
        f"{ens.selected_dim} kept (mean held-out log-likelihood per trial "
        f"{np.mean([r['heldout_loglik'] for r in rows if r['selected']]):.3f})"
    )


def _lists(M: np.ndarray) -> pa.Array:
    n, d = M.shape
    offsets = pa.array(np.arange(0, n * d + 1, d, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(M, np.float32).ravel()))


def umap_euclidean(X: np.ndarray, seed: int) -> np.ndarray:
    """2-D UMAP with Euclidean distances (similarity decays with them), on an exact
    neighbour graph handed to UMAP (it then skips its approximate search and its JIT)."""
    import umap
    from sklearn.neighbors import NearestNeighbors

    if len(X) < 4:
        return np.zeros((len(X), 2)) if len(X) < 2 else np.column_stack([X[:, 0], np.zeros(len(X))])
    k = max(2, min(15, len(X) - 1))
    dist, idx = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(X)
    kw = dict(
        n_components=2,
        n_neighbors=k,
        metric="euclidean",
        random_state=seed,
        n_jobs=1,
        n_epochs=200,
        init="spectral" if len(X) > k + 1 else "random",
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*knn_search_index.*")
        warnings.filterwarnings("ignore", message=".*n_jobs value.*")
        return umap.UMAP(precomputed_knn=(idx, dist.astype(np.float32)), **kw).fit_transform(X)


# ---- agreement of a checkpoint with people -------------------------------------------------
class Scorer:
    """What every checkpoint of a dataset is scored against: the trials and the embedding."""

    def __init__(self, ctx: Context, ds: str, trials: pd.DataFrame, opts: dict):
        self.opts = opts
        scored = trials[~trials["is_catch"]].reset_index(drop=True)
        images = ctx.images.set_index("image_id")
        self.universe = sorted(set(scored["query"]) | {i for r in scored["references"] for i in r})
        self.index = {s: k for k, s in enumerate(self.universe)}
        self.stim, self.sel = encode(scored, self.index)
        self.weight = scored["weight"].to_numpy(np.float64)
        self.label_of = images["label"].reindex(self.universe)
        self.names = (
            images.loc[images["dataset"] == ds]
            .dropna(subset=["label"])
            .groupby("label")["label_name"]
            .first()
            .to_dict()
        )
        self.query_label = self.label_of.to_numpy()[self.stim[:, 0]]
        ids, members = read_embedding(ctx.ws, ds)
        self.emb_ids = ids
        self.members = members
        self._rsa: dict = {}
        self.P = P

    def _rsa_for(self, items: list[str]):
        """The RSA bootstrap against people for this set of images (cached: checkpoints
        usually share it)."""
        key = tuple(items)
        if key not in self._rsa:
            pos = {s: k for k, s in enumerate(self.emb_ids)}
            rows = [pos[i] for i in items]
            ref = self.P.ensemble_similarity(
                [(m[rows], s[rows]) for m, s in self.members], self.opts["beta"], seed=self.opts["seed"]
            )
            labels = self.label_of.reindex(items).to_numpy()
            groups = {int(lab): np.flatnonzero(labels == lab) for lab in np.unique(labels[~pd.isna(labels)])}
            self._rsa = {key: S.RSABootstrap(ref, groups, self.opts["n_boot"], self.opts["seed"])}
        return self._rsa[key]

    def score(self, ids: np.ndarray, X: np.ndarray, checkpoint_id: str) -> list[dict]:
        """The rows of one checkpoint (`checkpoint_id` names its resample streams)."""
        rows = []
        pos = {s: k for k, s in enumerate(ids)}
        # Triplet accuracy: the trials whose images all have features.
        have = np.array([pos.get(s, -1) for s in self.universe], np.int64)
        mapped = np.where(self.stim >= 0, have[np.maximum(self.stim, 0)], -1)
        ok = (self.stim[:, 0] >= 0) & ((mapped >= 0) | (self.stim < 0)).all(axis=1)
        if ok.any():
            stim, sel, w = mapped[ok], self.sel[ok], self.weight[ok]
            num = []
            for dist in S.DISTANCES:
                c, n = S.triplet_scores(S.query_distances(X, stim, dist), sel)
                num.append(w * c)
            rows += self._triplet_rows(np.column_stack(num), w * n, n, self.query_label[ok], checkpoint_id)
        # RSA: the embedded images with features, at most rsa_max of them (a seeded sample).
        items = [s for s in self.emb_ids if s in pos]
        if len(items) > self.opts["rsa_max"]:
            pick = rngs.stream(self.opts["seed"], "similarity.rsa_items").choice(
                len(items), self.opts["rsa_max"], replace=False
            )
            items = [items[k] for k in np.sort(pick)]
        if len(items) >= 3:
            boot = self._rsa_for(items)
            Xs = X[[pos[s] for s in items]]
            for dist in S.DISTANCES:
                for lab, (v, lo, hi, n) in boot.score(S.similarity_matrix(Xs, dist)).items():
                    if not np.isnan(v):
                        rows.append(self._row("rsa", dist, lab, v, lo, hi, n, len(items)))
        return rows

    def _triplet_rows(
        self, num: np.ndarray, den: np.ndarray, n_triplets: np.ndarray, labels: np.ndarray, checkpoint_id: str
    ) -> list[dict]:
        """Weighted triplet accuracy per distance (columns of num), overall and per label of
        the query; the bootstrap resamples trials (within the label for a label), from the
        stream of this checkpoint and label."""
        out = []
        groups = [(None, np.arange(len(den)))]
        groups += [(int(lab), np.flatnonzero(labels == lab)) for lab in np.unique(labels[~pd.isna(labels)])]
        for lab, idx in groups:
            if den[idx].sum() <= 0:
                continue
            value = num[idx].sum(axis=0) / den[idx].sum()
            boot = S.bootstrap_ratio(
                num[idx],
                den[idx],
                self.opts["n_boot"],
                rngs.stream(
                    self.opts["seed"],
                    "similarity.triplet_accuracy",
                    {"checkpoint_id": checkpoint_id, "label": lab},
                ),
            )
            for k, dist in enumerate(S.DISTANCES):
                lo, hi = S.percentile_interval(boot[:, k])
                out.append(
                    self._row(
                        "triplet_accuracy", dist, lab, value[k], lo, hi, int(n_triplets[idx].sum()), len(idx)
                    )
                )
        return out

    def _row(self, metric, dist, lab, v, lo, hi, n, units) -> dict:
        return {
            "metric": metric,
            "distance": dist,
            "label": None if lab is None else int(lab),
            "label_name": None if lab is None else self.names.get(lab),
            "value": float(v),
            "lo": None if np.isnan(lo) else float(lo),
            "hi": None if np.isnan(hi) else float(hi),
            "n": int(n),
            "n_units": int(units),
        }


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    ds = unit.partition["dataset"]
    fingerprint = _fingerprint(ctx, unit)
    trial_sig = files_signature(ctx.ws.partition_files("similarity_trials", dataset=ds))
    trials = read_trials(ctx, ds)
    fit_md = ctx.ws.read_metadata("similarity_fit", dataset=ds)
    refit = (
        scope.force
        or fit_md.get("trials") != trial_sig
        or fit_md.get("options") != json.loads(json.dumps({k: opts[k] for k in FIT_OPTIONS}))
        or not ctx.ws.has("psych_embedding", dataset=ds)
    )
    if refit:
        _fit(ctx, ds, trials, opts, trial_sig)
        fit_md = ctx.ws.read_metadata("similarity_fit", dataset=ds)
    fit_sig = files_signature(ctx.ws.partition_files("psych_embedding", dataset=ds))
    score_opts = json.loads(json.dumps({k: opts[k] for k in SCORE_OPTIONS}))

    # Checkpoints whose features, the fit and the options are unchanged keep their rows.
    old_md = ctx.ws.read_metadata("human_alignment", dataset=ds)
    old = None
    if (
        ctx.ws.has("human_alignment", dataset=ds)
        and old_md.get("fit") == fit_sig
        and old_md.get("options") == score_opts
        and not scope.force
    ):
        old = ctx.ws.read("human_alignment", dataset=ds).to_pandas()
        old = old.astype(object).where(old.notna(), None)  # nulls stay nulls, not NaN
    scorer = None
    rows, sigs = [], {}
    for cid in _checkpoints_of(ctx, ds):
        sigs[cid] = files_footprint(ctx.ws.partition_files("features", checkpoint_id=cid))
        if old is not None and old_md.get("features", {}).get(cid) == sigs[cid]:
            rows += old[old["checkpoint_id"] == cid].drop(columns="dataset").to_dict("records")
            continue
        scorer = scorer or Scorer(ctx, ds, trials, opts)
        ids, X = ctx.features(cid)
        rows += [{"checkpoint_id": cid, **r} for r in scorer.score(ids, X, cid)]
    md = {"fit": fit_sig, "options": score_opts, "features": sigs}
    md.update(ANALYSIS.done_metadata(opts, fingerprint))
    ctx.ws.write(
        "human_alignment",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("human_alignment", partition=False)),
        metadata=md,
        dataset=ds,
    )
    return fingerprint


ANALYSIS = Analysis(
    name="similarity",
    title="Psychological embedding of similarity judgments and each checkpoint's agreement with people",
    writes=("psych_embedding", "projections", "similarity_fit", "human_alignment"),
    tables=(PSYCH_EMBEDDING, SIMILARITY_FIT, HUMAN_ALIGNMENT),
    units=_units,
    run=_run,
    inputs=_fingerprint,
    mtime_inputs_before_2_3=True,
    options=(
        Option(
            "dims",
            int,
            (2, 4, 8, 16),
            "candidate dimensionalities of the psychological embedding (the best on held-out trials is kept)",
            multiple=True,
            minimum=1,
        ),
        Option("members", int, 3, "ensemble members (each its own seed and held-out trials)", minimum=1),
        Option(
            "screen_members",
            int,
            0,
            "members fitted at every candidate dimensionality; the "
            "others only at the chosen one (0 = all: the slowest, the fullest diagnostics)",
            minimum=0,
        ),
        Option("holdout", float, 0.1, "share of the train trials each member holds out", minimum=0.01),
        BETA,
        MAX_EPOCHS,
        Option("batch_trials", int, 8192, "trials per optimisation step", minimum=1),
        Option("n_boot", int, 500, "bootstrap resamples of the agreement intervals", minimum=0),
        Option("rsa_max", int, 1000, "RSA uses at most this many images (a seeded sample)", minimum=3),
    ),
    doc=__doc__.splitlines()[0],
)
