"""`conceptlens analyze compmap`: primitive concepts of each VL model (yun2023 CompMap).

One unit per VL model of `vl_models` whose dataset has `primitives` and `label_primitives`.
It scores every image of the dataset against every primitive's prompt (100 x cosine,
softmax within a group or raw, as `primitives.normalize` says: `compmap_activations`),
trains composition models from the activations (`prim`) and from the class-level ground
truth (`oracle`) in n-way k-shot episodes and in the full-shot setting, and measures the
interventions, Delta and the top-k weight accuracies (`compmap_scores`), keeping the
full-shot models' weights (`compmap_weights`). docs/compmap.md has the details.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..metrics import compmap as M
from ..schema import FLOAT, INT, NON_NEGATIVE, SIGNED_UNIT, STRING, Column, Table
from ..workspace import WorkspaceError, files_signature
from .base import Analysis, Option, Scope, Skipped, Unit
from .common import Context, progress

COMPMAP_ACTIVATIONS = Table(
    "compmap_activations",
    "compmap_activations",
    "CompMap: every image's primitive concept activations from one VL model.",
    (
        Column("vl_model", STRING, "VL model (partition folder).", references="vl_models.vl_model_id"),
        Column("image_id", STRING, "Image of the VL model's dataset.", references="images.image_id"),
        Column("primitive", STRING, "Primitive.", references="primitives.primitive"),
        Column(
            "logit",
            FLOAT,
            "100 x cosine(image embedding, prompt embedding).",
            bounds=(-100, 100),
            finite=True,
        ),
        Column(
            "activation",
            FLOAT,
            "What the composition models read: the logit, or its "
            "softmax over the group's values (`primitives.normalize`).",
            finite=True,
        ),
    ),
    key=("vl_model", "image_id", "primitive"),
    partition=("vl_model",),
)

COMPMAP_WEIGHTS = Table(
    "compmap_weights",
    "compmap_weights",
    "CompMap: the weights of the full-shot composition models (multinomial logistic "
    "regression), per class and primitive.",
    (
        Column("vl_model", STRING, "VL model (partition folder).", references="vl_models.vl_model_id"),
        Column(
            "model",
            STRING,
            "`prim`: learned from the VL model's activations; `oracle`: from the ground-truth primitives.",
            allowed=("prim", "oracle"),
        ),
        Column("label", INT, "Class index.", bounds=NON_NEGATIVE),
        Column("primitive", STRING, "Primitive.", references="primitives.primitive"),
        Column("weight", FLOAT, "Coefficient of the primitive for the class.", finite=True),
    ),
    key=("vl_model", "model", "label", "primitive"),
    partition=("vl_model",),
)

COMPMAP_SCORES = Table(
    "compmap_scores",
    "compmap_scores",
    "CompMap: accuracy of the composition models, interventions, Delta and weight accuracy, "
    "per n-way k-shot setting (mean over episodes) and the full-shot setting (`shots` = 0).",
    (
        Column("vl_model", STRING, "VL model (partition folder).", references="vl_models.vl_model_id"),
        Column(
            "model",
            STRING,
            "`prim` (learned, on activations), `interv_full` (learned, on "
            "ground-truth primitives), `interv_partial` (learned, ground-truth positives set "
            "to 1, the rest activations), `oracle` (trained and tested on ground truth).",
            allowed=("prim", "interv_full", "interv_partial", "oracle"),
        ),
        Column("ways", INT, "Classes per episode (full shot: every class).", positive=True),
        Column(
            "shots",
            INT,
            "Training images per class; 0 = full shot (the train split).",
            bounds=NON_NEGATIVE,
        ),
        Column(
            "metric",
            STRING,
            "`accuracy`; `delta` = accuracy(oracle) - accuracy("
            "interv_full) (on `prim`); `acc_instance` / `acc_class`: top-k weights vs the "
            "class's k ground-truth primitives (yun2023 Table 4).",
            allowed=("accuracy", "delta", "acc_instance", "acc_class"),
        ),
        Column("value", FLOAT, "Mean.", bounds=SIGNED_UNIT, at_most=("hi",)),
        Column("lo", FLOAT, "95% interval, lower end.", bounds=SIGNED_UNIT, at_most=("value",)),
        Column("hi", FLOAT, "95% interval, upper end.", bounds=SIGNED_UNIT),
        Column("episodes", INT, "Episodes averaged (1 for full shot).", positive=True),
        Column(
            "n",
            INT,
            "Test images (accuracy, delta) or classes (weight accuracy) per episode.",
            positive=True,
        ),
    ),
    key=("vl_model", "model", "ways", "shots", "metric"),
    partition=("vl_model",),
)

BATCH = 256


# ---- inputs -------------------------------------------------------------------------------------
def _vl_rows(ctx: Context, opts: dict, scope: Scope) -> pd.DataFrame:
    vl = ctx.table("vl_models", required=False)
    if vl is None:
        if opts.get("vl"):
            raise WorkspaceError(
                f"{ctx.ws.table_path('vl_models')}: no vl_models table, so no VL model {opts['vl'][0]!r}"
            )
        return pd.DataFrame(columns=["vl_model_id", "dataset"])
    if opts.get("vl"):
        unknown = sorted(set(opts["vl"]) - set(vl["vl_model_id"]))
        if unknown:
            raise WorkspaceError(
                f"{ctx.ws.table_path('vl_models')}: no VL model {unknown[0]!r} "
                f"(--vl); available: {', '.join(vl['vl_model_id']) or 'none'}"
            )
        vl = vl[vl["vl_model_id"].isin(opts["vl"])]
    if scope.checkpoint is not None:
        vl = vl[vl["dataset"] == ctx.checkpoint_row(scope.checkpoint)["dataset"]]
    return vl.sort_values("vl_model_id")


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    out = []
    for r in _vl_rows(ctx, opts, scope).itertuples(index=False):
        missing = [t for t in ("primitives", "label_primitives") if not ctx.ws.has(t, dataset=r.dataset)]
        if missing:
            msg = (
                f"compmap: VL model {r.vl_model_id} skipped: dataset {r.dataset!r} has no "
                f"{' and no '.join(missing)} partition"
            )
            if opts.get("vl"):
                raise WorkspaceError(f"{ctx.ws.partition_dir(missing[0], dataset=r.dataset)}: {msg}")
            ctx.note(msg)
            continue
        out.append(Unit({"vl_model": r.vl_model_id}))
    return out


def _vl_row(ctx: Context, vl_model: str) -> dict:
    vl = ctx.table("vl_models")
    return vl[vl["vl_model_id"] == vl_model].iloc[0].to_dict()


def _fingerprint(ctx: Context, unit: Unit, opts: dict | None = None) -> str:
    row = _vl_row(ctx, unit.partition["vl_model"])
    ds = row["dataset"]
    files = (
        ctx.ws.partition_files("primitives", dataset=ds)
        + ctx.ws.partition_files("label_primitives", dataset=ds)
        + ctx.ws.files("images")
    )
    h = hashlib.sha1(files_signature(files).encode())
    h.update(json.dumps(row, sort_keys=True, default=str).encode())
    return h.hexdigest()


def read_primitives(ws, dataset: str) -> pd.DataFrame:
    """The vocabulary in `position` order; a group must be normalised one way."""
    p = ws.read("primitives", dataset=dataset).to_pandas().sort_values("position", kind="stable")
    where = ws.partition_dir("primitives", dataset=dataset)
    if p.empty:
        raise WorkspaceError(f"{where}: no primitives for dataset {dataset!r}")
    mixed = p.groupby("group")["normalize"].nunique()
    if (mixed > 1).any():
        raise WorkspaceError(f"{where}: column normalize differs within group {mixed[mixed > 1].index[0]!r}")
    return p.reset_index(drop=True)


def truth_matrix(ws, dataset: str, prims: pd.DataFrame) -> pd.DataFrame:
    """label_primitives as a (label x primitive) frame of values (absent = 0), `label_name` kept."""
    lp = ws.read("label_primitives", dataset=dataset).to_pandas()
    unknown = sorted(set(lp["primitive"]) - set(prims["primitive"]))
    if unknown:
        raise WorkspaceError(
            f"{ws.partition_dir('label_primitives', dataset=dataset)}: column "
            f"primitive holds {unknown[0]!r}, which is not in primitives"
        )
    wide = lp.pivot_table(index="label", columns="primitive", values="value", aggfunc="max")
    return wide.reindex(columns=list(prims["primitive"])).fillna(0.0).sort_index()


# ---- VL models ------------------------------------------------------------------------------
class _OpenClip:
    """An open_clip model with its own preprocessing and tokenizer (pretrained, not shipped)."""

    def __init__(self, model, preprocess, tokenizer):
        self.model, self.preprocess, self.tokenizer = model.eval(), preprocess, tokenizer

    def encode_text(self, texts):
        import torch

        with torch.no_grad():
            return self.model.encode_text(self.tokenizer(list(texts))).float().numpy()

    def encode_images(self, paths):
        import torch
        from PIL import Image  # local: off the dashboard's cold start

        ims = []
        for p in paths:
            with Image.open(p) as im:
                ims.append(self.preprocess(im.convert("RGB")))
        with torch.no_grad():
            return self.model.encode_image(torch.stack(ims)).float().numpy()


def _features(out):
    # transformers 5 returns a model output where 4.x returned the tensor.
    return out if hasattr(out, "dim") else out.pooler_output


class _HFClip:
    """A Hugging Face CLIP-style model (`get_text_features` / `get_image_features`)."""

    def __init__(self, name: str, root):
        from transformers import AutoModel, AutoProcessor

        from ..models import resolve_path  # local: off the dashboard's cold start
        from ..models.base import (  # local: off the dashboard's cold start
            ModelLoadError,
            hf_cache_dir,
            missing_weights,
            offline,
        )

        local = resolve_path(name, root)
        src = str(local) if local is not None else name
        local_only = local is not None or offline()
        try:
            self.model = AutoModel.from_pretrained(src, local_files_only=local_only).eval()
            self.processor = AutoProcessor.from_pretrained(src, local_files_only=local_only)
        except OSError as e:
            if local is not None:
                raise ModelLoadError(
                    f"hf:{name}: {local} holds no CLIP model and processor (save_pretrained of both): {e}"
                ) from None
            raise missing_weights(
                f"hf:{name}",
                f"the Hugging Face cache {hf_cache_dir()}",
                e,
                "pass a local directory written by save_pretrained",
            ) from None
        if not hasattr(self.model, "get_text_features"):
            raise ModelLoadError(
                f"hf:{name}: {type(self.model).__name__} has no text tower "
                "(get_text_features): not a vision-language model"
            )

    def encode_text(self, texts):
        import torch

        t = self.processor(text=list(texts), padding=True, truncation=True, return_tensors="pt")
        with torch.no_grad():
            return (
                _features(
                    self.model.get_text_features(
                        input_ids=t["input_ids"], attention_mask=t.get("attention_mask")
                    )
                )
                .float()
                .numpy()
            )

    def encode_images(self, paths):
        import torch
        from PIL import Image  # local: off the dashboard's cold start

        ims = []
        for p in paths:
            with Image.open(p) as im:
                ims.append(im.convert("RGB"))
        x = self.processor(images=ims, return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            return _features(self.model.get_image_features(pixel_values=x)).float().numpy()


def load_vl(ws, row: dict):
    """A VL model of `vl_models`: shipped (config + weights in the workspace, `vl.VLModel`),
    `hf:NAME` (transformers CLIP) or `open_clip:NAME` (a pretrained `ARCH@TAG`, or an
    architecture or config JSON with the row's `weights` file)."""
    from ..models import parse_spec  # local: off the dashboard's cold start

    if row.get("config") and row.get("weights"):
        from ..vl import VLModel  # local: off the dashboard's cold start

        return VLModel.from_workspace(ws.root, row["vl_model_id"])
    family, name = parse_spec(row["spec"])
    if family == "hf":
        return _HFClip(name, ws.root)
    if family == "open_clip":
        import open_clip

        from ..models.openclip import create  # local: off the dashboard's cold start

        weights = ws.resolve(row["weights"]) if row.get("weights") else None
        model, preprocess, arch, _ = create(name, weights=weights, root=ws.root)
        return _OpenClip(model, preprocess, open_clip.get_tokenizer(arch))
    raise WorkspaceError(
        f"{ws.table_path('vl_models')}: VL model {row['vl_model_id']!r} has spec "
        f"{row['spec']!r} and no config + weights; CompMap reads shipped models, "
        "`hf:NAME` or `open_clip:ARCH@TAG`"
    )


def image_embeddings(ctx: Context, model, images: pd.DataFrame, desc: str) -> np.ndarray:
    from ..extract import image_path  # local: off the dashboard's cold start

    src = images["source_path"] if "source_path" in images.columns else [None] * len(images)
    paths = [
        image_path(ctx.ws, t, s if isinstance(s, str) else None) for t, s in zip(images["thumbnail"], src)
    ]
    batches = range(0, len(paths), BATCH)
    out = [
        np.asarray(model.encode_images(paths[i : i + BATCH]), np.float64)
        for i in progress(batches, desc, ctx.progress, total=len(batches))
    ]
    return np.concatenate(out)


def compute_activations(
    ctx: Context, model, images: pd.DataFrame, prims: pd.DataFrame, desc: str = "compmap: images"
) -> tuple[np.ndarray, np.ndarray]:
    """(logits, activations), rows in `images` order, columns in `prims` order."""
    text = np.asarray(model.encode_text(list(prims["prompt"])), np.float64)
    logits = M.prompt_logits(image_embeddings(ctx, model, images, desc), text)
    return logits, M.activations(logits, prims["group"].to_numpy(), prims["normalize"].to_numpy())


# ---- scores ------------------------------------------------------------------------------------
def _rows(ways: int, shots: int, per: dict, episodes: int, n_images: int, n_classes: int) -> list:
    """Score rows from per-episode values {(model, metric): [values]}."""
    out = []
    for (model, metric), values in per.items():
        bounds = (-1.0, 1.0) if metric == "delta" else (0.0, 1.0)
        value, lo, hi = M.mean_interval(values, bounds)
        if np.isnan(value):
            continue
        out.append(
            {
                "model": model,
                "ways": ways,
                "shots": shots,
                "metric": metric,
                "value": value,
                "lo": lo,
                "hi": hi,
                "episodes": episodes,
                "n": n_classes if metric.startswith("acc_") else n_images,
            }
        )
    return out


def _collect(per: dict, correct: dict, weights: dict) -> None:
    for m in M.MODELS:
        per.setdefault((m, "accuracy"), []).append(float(correct[m].mean()))
    per.setdefault(("prim", "delta"), []).append(
        float(correct["oracle"].mean() - correct["interv_full"].mean())
    )
    for m in ("prim", "oracle"):
        inst, cls, _, _ = weights[m]
        per.setdefault((m, "acc_instance"), []).append(inst)
        per.setdefault((m, "acc_class"), []).append(cls)


def episode_scores(
    X, G, y, truth_of, ways: int, shots: int, queries: int, episodes: int, seed: int, bar: bool = False
) -> list[dict]:
    from threadpoolctl import threadpool_limits

    eps = M.sample_episodes(y, ways, shots, queries, episodes, seed)
    per: dict = {}
    # An episode's problem is tiny: BLAS threads only add overhead (6x slower measured on 2
    # busy cores).
    with threadpool_limits(1):
        for e in progress(eps, f"compmap: {ways}-way {shots}-shot", bar):
            correct, weights, _ = M.score_models(
                X[e.support], G[e.support], y[e.support], X[e.query], G[e.query], y[e.query], truth_of, seed
            )
            _collect(per, correct, weights)
    return _rows(ways, shots, per, episodes, ways * queries, ways)


def full_shot(X, G, y, train: np.ndarray, truth_of, seed: int):
    """Train on the `train` rows (every class they have), test on the other rows of those
    classes.

    Returns (score rows, {"prim"/"oracle": (classes, weights)}); with no such split the
    models are fitted on every row, for their weights only, and no score is returned.
    """
    classes = np.unique(y[train])
    te = ~train & np.isin(y, classes)
    rows = []
    if len(classes) >= 2 and te.any():
        correct, weights, models = M.score_models(
            X[train], G[train], y[train], X[te], G[te], y[te], truth_of, seed
        )
        ways, n = len(classes), int(te.sum())
        for m in M.MODELS:
            v, lo, hi = M.wilson(float(correct[m].sum()), n)
            rows.append({"model": m, "metric": "accuracy", "value": v, "lo": lo, "hi": hi, "n": n})
        d = correct["oracle"].astype(float) - correct["interv_full"].astype(float)
        v, lo, hi = M.mean_interval(d, (-1.0, 1.0))
        rows.append({"model": "prim", "metric": "delta", "value": v, "lo": lo, "hi": hi, "n": n})
        for m in ("prim", "oracle"):
            inst, cls, n_inst, n_cls = weights[m]
            for metric, v, size in (("acc_instance", inst, n_inst), ("acc_class", cls, n_cls)):
                if n_cls:
                    p, lo, hi = M.wilson(v * size, size)
                    rows.append({"model": m, "metric": metric, "value": p, "lo": lo, "hi": hi, "n": n_cls})
        rows = [{**r, "ways": ways, "shots": 0, "episodes": 1} for r in rows]
    else:
        models = {"prim": M.fit_composition(X, y, seed), "oracle": M.fit_composition(G, y, seed)}
    return rows, {k: M.class_weights(m) for k, m in models.items()}


# ---- the unit ---------------------------------------------------------------------------------
def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    vl_model = unit.partition["vl_model"]
    fingerprint = _fingerprint(ctx, unit)
    row = _vl_row(ctx, vl_model)
    ds = row["dataset"]
    prims = read_primitives(ctx.ws, ds)
    truth = truth_matrix(ctx.ws, ds, prims)
    img = ctx.images
    img = img[(img["dataset"] == ds) & img["label"].notna()].sort_values("image_id").reset_index(drop=True)
    if img.empty:
        raise WorkspaceError(f"{ctx.ws.table_path('images')}: dataset {ds!r} has no labelled image")
    y = img["label"].astype(np.int64).to_numpy()
    no_truth = sorted(set(y) - set(truth.index))
    if no_truth:
        ctx.note(
            f"compmap {vl_model}: {len(no_truth)} class(es) of {ds} have no row in "
            f"label_primitives (all-zero ground truth), e.g. label {no_truth[0]}"
        )
    T = M.class_truth(truth.reindex(sorted(set(y) | set(truth.index))).fillna(0.0).to_numpy())
    t_index = {c: i for i, c in enumerate(sorted(set(y) | set(truth.index)))}

    def truth_of(c):
        return T[t_index[int(c)]]

    from ..models import ModelLoadError  # local: off the dashboard's cold start

    try:
        model = load_vl(ctx.ws, row)
    except ModelLoadError as e:  # the unit waits for its model (nothing written yet)
        raise Skipped(f"VL model {row['spec']!r} could not be loaded ({str(e).splitlines()[0][:200]})") from e
    logits, act = compute_activations(ctx, model, img, prims, f"compmap {vl_model}: images")
    n, p = act.shape
    ctx.ws.write(
        "compmap_activations",
        pa.table(
            {
                "image_id": pa.array(np.repeat(img["image_id"].to_numpy(), p), pa.string()),
                "primitive": pa.array(np.tile(prims["primitive"].to_numpy(), n), pa.string()),
                "logit": logits.ravel(),
                "activation": act.ravel(),
            },
            schema=schema.arrow_schema("compmap_activations", partition=False),
        ),
        vl_model=vl_model,
    )

    G = np.stack([truth_of(c) for c in y])
    seed = opts["seed"]
    train = (img["split"] == "train").to_numpy()
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # see episode_scores
        rows, weights = full_shot(act, G, y, train, truth_of, seed)
    # Episodes come from the images the VL model and the full-shot models were not trained on.
    pool = ~train if (~train).any() else np.ones(n, bool)
    Xp, Gp, yp = act[pool], G[pool], y[pool]
    for ways in opts["ways"]:
        for shots in opts["shots"]:
            have = len(M.eligible_classes(yp, shots, opts["queries"]))
            if have < ways:
                ctx.note(
                    f"compmap {vl_model}: {ways}-way {shots}-shot skipped: {have} class(es) "
                    f"have {shots} + {opts['queries']} test images"
                )
                continue
            rows += episode_scores(
                Xp,
                Gp,
                yp,
                truth_of,
                ways,
                shots,
                opts["queries"],
                opts["episodes"],
                seed + 1000 * ways + shots,
                ctx.progress,
            )
    w_rows = []
    for name, (classes, W) in weights.items():
        for c, w in zip(classes, W):
            w_rows += [
                {"model": name, "label": int(c), "primitive": pr, "weight": float(v)}
                for pr, v in zip(prims["primitive"], w)
            ]
    ctx.ws.write(
        "compmap_weights",
        pa.Table.from_pylist(w_rows, schema=schema.arrow_schema("compmap_weights", partition=False)),
        vl_model=vl_model,
    )
    ctx.ws.write(
        "compmap_scores",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("compmap_scores", partition=False)),
        metadata=ANALYSIS.done_metadata(opts, fingerprint),
        vl_model=vl_model,
    )
    return fingerprint


ANALYSIS = Analysis(
    name="compmap",
    title="CompMap: primitive concepts of VL models, composition models, interventions",
    writes=("compmap_activations", "compmap_weights", "compmap_scores"),
    tables=(COMPMAP_ACTIVATIONS, COMPMAP_WEIGHTS, COMPMAP_SCORES),
    units=_units,
    run=_run,
    inputs=_fingerprint,
    options=(
        Option(
            "vl",
            str,
            None,
            "VL models (vl_models.vl_model_id) to analyse (default: every VL "
            "model whose dataset has primitives and label_primitives)",
            multiple=True,
            changes_result=False,  # each VL model is its own unit
        ),
        Option("ways", int, (5, 10), "classes per few-shot episode", multiple=True, minimum=2),
        Option("shots", int, (1, 5), "training images per class in an episode", multiple=True, minimum=1),
        Option("queries", int, 15, "test images per class in an episode", minimum=1),
        Option("episodes", int, 600, "episodes per (ways, shots) setting (yun2023: 600)", minimum=1),
    ),
    doc=__doc__.splitlines()[0],
)
