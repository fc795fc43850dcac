"""The `models` stage of `conceptlens demo build`: train the demo's checkpoints and VL models.

Everything is trained here on CPU, deterministically from the seed, and every
checkpoint's features go through `conceptlens.extract.extract` - the same path a
user's model takes (`torch:conceptlens.demo.encoders:ConvEncoder` + weights file,
`open_clip:models/vl-<dataset>.json` + weights file).

Resumable: a checkpoint whose weights file exists with the SHA-256 recorded in
checkpoints.parquet and whose features file exists is skipped; a weights file
without features is extracted again without retraining.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import schema
from ..extract import extract
from ..vl import CAPTIONER_PREFIX, VLModel, write_captions
from ..workspace import Workspace, sha256_file

MODEL_NAME = "ConvEncoder"  # checkpoints.model of the conv encoders
EMBED_DIM = 64
WIDTH = 16


@dataclass(frozen=True)
class Run:
    """One training run; `epochs` are the stages saved as checkpoints."""

    dataset: str
    method: str  # simclr | simsiam | autoencoder | vae | rotation | supervised
    # | random | pca
    epochs: tuple[int, ...] = (0,)
    tag: str = ""  # extra name part: the supervised factors, a replicate (s1)...
    options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def run(self) -> str:
        return "-".join(p for p in (self.dataset, self.method, self.tag) if p)

    def checkpoint_ids(self) -> list[str]:
        if self.method in ("random", "pca"):
            return [self.run]
        return [f"{self.run}-e{e:02d}" for e in self.epochs]


RUNS: tuple[Run, ...] = (
    Run("shapes", "simclr", (1, 5, 20)),
    Run("shapes", "autoencoder", (1, 10)),
    Run("shapes", "supervised", (1, 5), tag="shape-size", options={"factors": ("shape", "size")}),
    Run("shapes", "random"),
    Run("shapes", "pca", options={"pool": 4}),
    # A population of self-supervised checkpoints (methods x epochs x seeds x widths) for
    # lu2022's question: do CL, ID and CLID rank checkpoints like kNN accuracy does? A
    # tag `s1` is a second seed (the seed derives from the run name), `w8` half the width.
    Run("shapes", "simclr", (2, 8), tag="s1"),
    Run("shapes", "simclr", (3, 10), tag="w8", options={"width": 8}),
    Run("shapes", "simsiam", (1, 3, 8)),
    Run("shapes", "simsiam", (2, 5), tag="s1"),
    Run("shapes", "autoencoder", (2, 5), tag="s1"),
    Run("shapes", "vae", (1, 3, 8)),
    Run("shapes", "rotation", (1, 3, 10)),
    Run("shapes", "rotation", (2, 6), tag="s1"),
    Run("digits", "simclr", (5, 30), options={"flip": False, "color": 0.0}),
    Run("digits", "autoencoder", (20,)),
    Run("digits", "supervised", (10,), tag="label", options={"factors": ("label",)}),
    Run("digits", "random"),
    Run("digits", "pca", options={"pool": 2}),
)

VL_EPOCHS = {"shapes": 100, "digits": 30}


def _log(progress: bool, msg: str) -> None:
    if progress:
        from tqdm import tqdm

        tqdm.write(msg)


def _rows(ws: Workspace, table: str, key: str) -> dict:
    p = ws.table_path(table)
    if not p.exists():
        return {}
    return {r[key]: r for r in ws.read(table).to_pylist()}


def checkpoint_done(ws: Workspace, cid: str) -> bool:
    """Weights file present with the hash recorded for `cid`, and its features written."""
    row = _rows(ws, "checkpoints", "checkpoint_id").get(cid)
    w = ws.root / "models" / f"{cid}.pt"
    return bool(
        row
        and w.exists()
        and ws.table_path("features", checkpoint_id=cid).exists()
        and row.get("weights_sha256") == sha256_file(w)
    )


def _extract(ws: Workspace, run: Run, cid: str, epoch, progress: bool, created: str | None = None) -> str:
    from .encoders import ENCODER_SPEC, PCA_SPEC

    spec = PCA_SPEC if run.method == "pca" else ENCODER_SPEC
    model = "PixelPCA" if run.method == "pca" else MODEL_NAME
    meta = {"model": model, "method": run.method, "epoch": epoch, "run": run.run}
    if created is not None:  # a fixed time keeps a rebuild byte-identical
        meta["created"] = created
    return extract(
        ws,
        run.dataset,
        spec,
        weights=ws.root / "models" / f"{cid}.pt",
        batch_size=256,
        checkpoint_id=cid,
        metadata=meta,
        progress=progress,
    )


def _targets(images, factors) -> dict:
    import pandas as pd
    import torch

    out = {}
    for f in factors:
        col = images.frame[f]
        codes = col.to_numpy() if f == "label" else pd.Categorical(col, categories=sorted(set(col))).codes
        out[f] = torch.tensor(np.array(codes, dtype=np.int64))
    return out


def _train_run(run: Run, images, mean, std, seed: int, progress: bool) -> dict:
    """Train `run` on the train split; return {epoch: model}."""
    from . import encoders as E

    tr = images.train
    px = images.pixels[tr]
    s = E.stable_seed(seed, run.run)
    size = px.shape[-1]
    o = run.options
    desc = run.run
    width = o.get("width", WIDTH)
    if run.method in ("simclr", "simsiam"):
        train = E.train_simclr if run.method == "simclr" else E.train_simsiam
        snaps = train(
            px.float() / 255.0,
            mean,
            std,
            seed=s,
            epochs=run.epochs,
            width=width,
            embed_dim=EMBED_DIM,
            flip=o.get("flip", True),
            color=o.get("color", 0.4),
            progress=progress,
            desc=desc,
        )
    elif run.method in ("autoencoder", "vae", "rotation"):
        train = {"autoencoder": E.train_autoencoder, "vae": E.train_vae, "rotation": E.train_rotation}[
            run.method
        ]
        snaps = train(
            E.normalise(px, mean, std),
            seed=s,
            epochs=run.epochs,
            width=width,
            embed_dim=EMBED_DIM,
            progress=progress,
            desc=desc,
        )
    elif run.method == "supervised":
        tg = {k: v[tr] for k, v in _targets(images, o["factors"]).items()}
        snaps = E.train_supervised(
            E.normalise(px, mean, std),
            tg,
            seed=s,
            epochs=run.epochs,
            width=WIDTH,
            embed_dim=EMBED_DIM,
            progress=progress,
            desc=desc,
        )
    elif run.method == "random":
        return {0: E.random_encoder(size, seed=s, width=WIDTH, embed_dim=EMBED_DIM)}
    elif run.method == "pca":
        return {None: E.fit_pca(E.normalise(px, mean, std), pool=o["pool"], n_components=EMBED_DIM)}
    else:
        raise ValueError(f"unknown method {run.method!r}")
    return {sn.epoch: sn.model for sn in snaps}


def _init_kwargs(model) -> dict:
    from .encoders import PixelPCA

    if isinstance(model, PixelPCA):
        return {
            "in_size": model.in_size,
            "pool": model.pool,
            "n_components": model.n_components,
            "in_channels": model.mean.numel() // (model.in_size // model.pool) ** 2,
        }
    return {"in_size": model.in_size, "width": model.width, "embed_dim": model.embed_dim}


def build_encoders(
    ws: Workspace, seed: int, runs=RUNS, progress: bool = True, created: str | None = None
) -> list[str]:
    """Train (or reuse) every run's checkpoints and extract their features (`created`: the
    checkpoints' creation time, default now)."""
    from . import encoders as E

    done_ids, cache = [], {}
    for run in runs:
        cids = run.checkpoint_ids()
        epochs = [None] if run.method == "pca" else list(run.epochs)
        if all(checkpoint_done(ws, c) for c in cids):
            _log(progress, f"{run.run}: up to date")
            done_ids += cids
            continue
        t0 = time.time()
        if not all((ws.root / "models" / f"{c}.pt").exists() for c in cids):
            if run.dataset not in cache:
                imgs = E.load_imageset(ws, run.dataset)
                cache[run.dataset] = (imgs, *E.channel_stats(imgs.pixels[imgs.train]))
            imgs, mean, std = cache[run.dataset]
            models = _train_run(run, imgs, mean, std, seed, progress)
            pp = {"size": int(imgs.pixels.shape[-1]), "mean": mean, "std": std}
            for cid, ep in zip(cids, epochs):
                E.save_weights(ws.root / "models" / f"{cid}.pt", models[ep], _init_kwargs(models[ep]), pp)
        for cid, ep in zip(cids, epochs):
            if not checkpoint_done(ws, cid):
                _extract(ws, run, cid, ep, progress, created)
        _log(progress, f"{run.run}: {len(cids)} checkpoint(s) in {time.time() - t0:.0f}s")
        done_ids += cids
    return done_ids


# ---------------------------------------------------------------- VL models
def _upsert_vl_row(ws: Workspace, row: dict) -> None:
    import pyarrow as pa

    t = pa.Table.from_pylist([row], schema=schema.arrow_schema("vl_models"))
    p = ws.table_path("vl_models")
    if p.exists():
        ws.upsert("vl_models", t, {"vl_model_id": row["vl_model_id"]})
    else:
        ws.write("vl_models", t)


def vl_done(ws: Workspace, vl_id: str) -> bool:
    row = _rows(ws, "vl_models", "vl_model_id").get(vl_id)
    w = ws.root / "models" / f"{vl_id}.pt"
    return bool(
        row
        and w.exists()
        and (ws.root / "models" / f"{vl_id}.json").exists()
        and row.get("weights_sha256") == sha256_file(w)
    )


def build_vl(ws: Workspace, dataset: str, seed: int, epochs: int | None = None, progress: bool = True) -> str:
    """Train (or reuse) `vl-<dataset>`, write its retrieval captions and its `clip` checkpoint."""
    from . import encoders as E
    from . import vl_train as V

    vl_id = f"vl-{dataset}"
    cfg_rel, w_rel = f"models/{vl_id}.json", f"models/{vl_id}.pt"
    fresh = False
    t0 = time.time()
    if not vl_done(ws, vl_id):
        imgs = E.load_imageset(ws, dataset)
        config = V.shapes_config() if dataset == "shapes" else V.digits_config()
        if imgs.pixels.shape[-1] != config["vision_cfg"]["image_size"]:
            raise ValueError(
                f"{dataset}: thumbnails are {imgs.pixels.shape[-1]} px, "
                f"VL config expects {config['vision_cfg']['image_size']}"
            )
        caps = ws.read("captions").to_pandas()
        gt = dict(zip(*[caps.loc[caps.captioner == "groundtruth", c] for c in ("image_id", "text")]))
        tr = imgs.train
        texts = [gt[imgs.ids[i]] for i in tr]
        model = V.train_clip(
            imgs.pixels[tr],
            texts,
            config,
            seed=E.stable_seed(seed, vl_id),
            epochs=epochs or VL_EPOCHS[dataset],
            progress=progress,
            desc=vl_id,
        )
        V.save_clip(model, config, ws.root / cfg_rel, ws.root / w_rel)
        _upsert_vl_row(
            ws,
            {
                "vl_model_id": vl_id,
                "dataset": dataset,
                "spec": f"open_clip:{cfg_rel}",
                "config": cfg_rel,
                "weights": w_rel,
                "weights_sha256": sha256_file(ws.root / w_rel),
            },
        )
        fresh = True
        _log(progress, f"{vl_id}: trained in {time.time() - t0:.0f}s")
    captioner = CAPTIONER_PREFIX + vl_id
    caps = ws.read("captions", columns=["captioner"])["captioner"].to_pylist()
    if fresh or captioner not in caps:
        vl = VLModel.from_workspace(ws.root, vl_id)
        n = write_captions(ws, vl, dataset)
        _log(progress, f"{vl_id}: {n} retrieval captions written")
    cid = f"{dataset}-clip"
    row = _rows(ws, "checkpoints", "checkpoint_id").get(cid)
    if fresh or not (
        row
        and ws.table_path("features", checkpoint_id=cid).exists()
        and row.get("weights_sha256") == sha256_file(ws.root / w_rel)
    ):
        extract(
            ws,
            dataset,
            f"open_clip:{cfg_rel}",
            weights=ws.root / w_rel,
            batch_size=256,
            checkpoint_id=cid,
            progress=progress,
            metadata={"model": vl_id, "method": "clip", "epoch": epochs or VL_EPOCHS[dataset], "run": vl_id},
        )
    return vl_id


def build_models(ws: Workspace, seed: int, progress: bool = True) -> None:
    """The `models` stage: conv-encoder checkpoints, VL models, retrieval captions, clip features."""
    import torch

    from .encoders import set_determinism

    prev = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    set_determinism()
    t0 = time.time()
    try:
        build_encoders(ws, seed, progress=progress)
        for ds in ("shapes", "digits"):
            build_vl(ws, ds, seed, progress=progress)
    finally:
        torch.set_num_threads(prev[0])
        torch.use_deterministic_algorithms(prev[1])
    _log(progress, f"models stage: {time.time() - t0:.0f}s")
