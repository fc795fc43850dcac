"""`conceptlens demo scale`: a large synthetic workspace, deterministic from a seed, for
measuring ConceptLens at ImageNet size (bench/ uses it).

The structure is ImageNet-like: a label hierarchy (super-classes of fine classes, 50
images per class up to 1,000 classes), factor columns (background, size, pose,
brightness), 16-pixel thumbnails and ground-truth captions. Checkpoints are training
runs of four methods at increasing epochs: each embeds a latent code of every image
(its class, super-class, factors and an identity of its own, shared by all
checkpoints) mixed with checkpoint noise by the run's quality at that epoch, through a
random ReLU layer into `dim` features. Everything derived (clusters, metrics,
projections, captions, comparisons) comes from the real analyses.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
from PIL import Image

from .. import schema
from ..analysis import runner
from ..extract import features_table
from ..workspace import Workspace, atomic_write_bytes

DATASET = "scale"
SUPER = (
    "mammal",
    "bird",
    "fish",
    "reptile",
    "insect",
    "vehicle",
    "instrument",
    "tool",
    "food",
    "plant",
    "building",
    "furniture",
    "clothing",
    "container",
    "device",
    "ball",
    "boat",
    "aircraft",
    "toy",
    "fungus",
)
BACKGROUNDS = ("grass", "water", "sky", "indoor", "sand", "snow")
SIZES = ("small", "medium", "large")
# (method, quality reached when trained long): a run's checkpoints approach it with epochs.
RUNS = (("supervised", 0.95), ("dino", 0.85), ("simclr", 0.7), ("mae", 0.5))
EPOCHS = (0, 1, 3, 10, 30, 100, 300, 1000)
LATENT = 48
THUMB = 16
TEST_FRACTION = 0.2
CREATED = "2026-11-22T00:00:00+00:00"
CHUNK = 8192  # images per generated block: memory stays bounded at any size


def default_classes(n_images: int) -> int:
    return int(min(1000, max(4, n_images // 50)))


def checkpoint_plan(n_checkpoints: int) -> list[dict]:
    """Checkpoint j: run j % 4 at its (j // 4)-th epoch; quality grows with epochs, and a
    run's last checkpoint is its best trained."""
    n_runs = min(len(RUNS), n_checkpoints)
    per_run = math.ceil(n_checkpoints / n_runs)
    if per_run <= len(EPOCHS):
        epochs = [EPOCHS[i] for i in np.round(np.linspace(0, len(EPOCHS) - 1, per_run + 1)[1:]).astype(int)]
        epochs = sorted(set(epochs))
        epochs = [0] * (per_run - len(epochs)) + epochs  # short plans keep their best epochs
    else:
        epochs = []
        for x in np.geomspace(1, 1000, per_run):
            epochs.append(max(int(round(x)), epochs[-1] + 1 if epochs else 1))
    out = []
    for j in range(n_checkpoints):
        method, q_max = RUNS[j % n_runs]
        epoch = int(epochs[j // n_runs])
        quality = 0.03 + (q_max - 0.03) * (1 - math.exp(-epoch / 20))
        out.append(
            {
                "checkpoint_id": f"{method}-e{epoch:04d}",
                "method": method,
                "epoch": epoch,
                "run": f"{method}-run",
                "quality": quality,
            }
        )
    return out


def _images(n: int, n_classes: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n_super = min(len(SUPER), max(2, n_classes // 10))
    y = rng.permutation(np.arange(n) % n_classes)
    sup = y * n_super // n_classes
    # Backgrounds follow the super-class half of the time (birds in the sky...).
    bg = np.where(rng.random(n) < 0.5, sup % len(BACKGROUNDS), rng.integers(0, len(BACKGROUNDS), n))
    test = np.zeros(n, bool)
    test[rng.permutation(n)[: int(round(n * TEST_FRACTION))]] = True
    return {
        "label": y,
        "super": sup,
        "background": bg,
        "size": rng.integers(0, len(SIZES), n),
        "pose": rng.uniform(0, 360, n),
        "brightness": rng.uniform(0.2, 1.0, n),
        "test": test,
    }


def _latent(f: dict, n_classes: int, seed: int) -> np.ndarray:
    """Every image's latent code: class (within its super-class), factors, own identity."""
    rng = np.random.default_rng([seed, 7])
    n_super = int(f["super"].max()) + 1
    sup_c = 2.0 * rng.normal(size=(n_super, LATENT))
    cls_c = sup_c[np.arange(n_classes) * n_super // n_classes] + 0.8 * rng.normal(size=(n_classes, LATENT))
    bg_c, size_c = rng.normal(size=(len(BACKGROUNDS), LATENT)), rng.normal(size=(len(SIZES), LATENT))
    pose_ax = rng.normal(size=(2, LATENT))
    a = np.deg2rad(f["pose"])
    z = cls_c[f["label"]] + 0.5 * bg_c[f["background"]] + 0.4 * size_c[f["size"]]
    z += 0.4 * (np.cos(a)[:, None] * pose_ax[0] + np.sin(a)[:, None] * pose_ax[1])
    z += 0.3 * (f["brightness"][:, None] - 0.6) * pose_ax.sum(axis=0)
    # Identity noise as large as a class offset: the best run reaches ~85% 20-NN accuracy.
    z += 1.0 * rng.normal(size=z.shape)
    return z.astype(np.float32)


def _features(z: np.ndarray, quality: float, dim: int, seed: int, j: int) -> np.ndarray:
    """One checkpoint's features: the latent mixed with checkpoint noise, through a random
    ReLU layer, plus a little isotropic noise. Generated in blocks."""
    rng = np.random.default_rng([seed, 100 + j])
    P = rng.normal(size=(LATENT, dim)).astype(np.float32) / np.sqrt(LATENT)
    b = 0.3 * rng.normal(size=dim).astype(np.float32)
    out = np.empty((len(z), dim), np.float32)
    for s in range(0, len(z), CHUNK):
        e = min(s + CHUNK, len(z))
        h = quality * z[s:e] + (1 - quality) * 2.0 * rng.standard_normal((e - s, LATENT), dtype=np.float32)
        x = h @ P + b
        np.maximum(x, 0, out=x)
        x += 0.05 * rng.standard_normal(x.shape, dtype=np.float32)
        out[s:e] = x
    return out


def _thumbnail(f: dict, i: int, n_classes: int) -> np.ndarray:
    """A square of the class's colour (hue: super-class) on the background's colour, placed
    by the pose and sized by the size factor."""
    bg_rgb = np.array(
        [(60, 150, 60), (40, 90, 180), (150, 200, 240), (140, 120, 100), (220, 200, 140), (240, 240, 245)]
    )
    img = np.empty((THUMB, THUMB, 3), np.uint8)
    img[:] = (bg_rgb[f["background"][i]] * f["brightness"][i]).astype(np.uint8)
    n_super = int(f["super"].max()) + 1
    hue = f["super"][i] / n_super
    shade = 0.45 + 0.55 * ((f["label"][i] % 7) / 6)
    rgb = 255 * shade * (0.5 + 0.5 * np.cos(2 * np.pi * (hue + np.array([0, 1 / 3, 2 / 3]))))
    half = 2 + f["size"][i]
    a = np.deg2rad(f["pose"][i])
    cx, cy = int(THUMB / 2 + 3 * np.cos(a)), int(THUMB / 2 + 3 * np.sin(a))
    img[max(0, cy - half) : cy + half, max(0, cx - half) : cx + half] = rgb.astype(np.uint8)
    return img


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def build_scale(
    out: str | Path,
    n_images: int = 50_000,
    n_checkpoints: int = 28,
    dim: int = 512,
    n_classes: int | None = None,
    seed: int = 0,
    analyses: str | list[str] = "all",
    progress: bool = True,
) -> Workspace:
    """Write the workspace at `out`; `analyses`: `all`, `none` or a list of analysis names."""
    from tqdm import tqdm

    if n_images < 8:
        raise ValueError(f"--images must be at least 8, got {n_images}")
    if n_checkpoints < 1:
        raise ValueError(f"--checkpoints must be at least 1, got {n_checkpoints}")
    if dim < 2:
        raise ValueError(f"--dim must be at least 2, got {dim}")
    n_classes = default_classes(n_images) if n_classes is None else int(n_classes)
    if not 2 <= n_classes <= n_images // 2:
        raise ValueError(f"--classes must be in [2, {n_images // 2}], got {n_classes}")
    ws = Workspace.create(
        out,
        name=f"ConceptLens scale ({n_images} images x {n_checkpoints} checkpoints x {dim}-d)",
        description="Synthetic ImageNet-sized workspace for benchmarks: a label hierarchy, "
        "factor columns, and training runs of four methods at increasing epochs.",
        provenance={
            "generator": "conceptlens demo scale",
            "seed": seed,
            "images": n_images,
            "checkpoints": n_checkpoints,
            "dim": dim,
            "classes": n_classes,
        },
        created=CREATED,
    )
    rng = np.random.default_rng([seed, 1])
    f = _images(n_images, n_classes, rng)
    width = len(str(n_images - 1))
    ids = [f"img-{i:0{width}d}" for i in range(n_images)]
    names = [f"{SUPER[s % len(SUPER)]} {y}" for s, y in zip(f["super"], f["label"])]
    thumbs = []
    for i in tqdm(range(n_images), desc="scale: thumbnails", disable=not progress):
        rel = f"thumbnails/{i // 1000:04d}/{i:0{width}d}.png"
        atomic_write_bytes(ws.root / rel, _png(_thumbnail(f, i, n_classes)), fsync=False)
        thumbs.append(rel)
    sizes = np.array(SIZES, dtype=object)[f["size"]]
    bgs = np.array(BACKGROUNDS, dtype=object)[f["background"]]
    images = pa.table(
        {
            "image_id": pa.array(ids, pa.string()),
            "dataset": pa.array([DATASET] * n_images, pa.string()),
            "label": pa.array(f["label"], pa.int64()),
            "label_name": pa.array(names, pa.string()),
            "split": pa.array(np.where(f["test"], "test", "train"), pa.string()),
            "thumbnail": pa.array(thumbs, pa.string()),
            "width": pa.array(np.full(n_images, THUMB), pa.int32()),
            "height": pa.array(np.full(n_images, THUMB), pa.int32()),
            "superclass": pa.array(np.array(SUPER, dtype=object)[f["super"] % len(SUPER)], pa.string()),
            "background": pa.array(bgs, pa.string()),
            "size": pa.array(sizes, pa.string()),
            "pose": pa.array(f["pose"], pa.float64()),
            "brightness": pa.array(f["brightness"], pa.float64()),
        }
    )
    ws.write("images", images)
    texts = [f"a {s} {n} on {b}" for s, n, b in zip(sizes, names, bgs)]
    ws.write(
        "captions",
        pa.table({"image_id": ids, "captioner": ["groundtruth"] * n_images, "text": texts}),
    )
    z = _latent(f, n_classes, seed)
    plan = checkpoint_plan(n_checkpoints)
    rows = []
    for j, ck in enumerate(tqdm(plan, desc="scale: features", disable=not progress)):
        X = _features(z, ck["quality"], dim, seed, j)
        ws.write("features", features_table(ids, X), checkpoint_id=ck["checkpoint_id"])
        rows.append(
            {
                "checkpoint_id": ck["checkpoint_id"],
                "dataset": DATASET,
                "model": "synthetic-relu",
                "method": ck["method"],
                "epoch": ck["epoch"],
                "feature_dim": dim,
                "source": f"synthetic:quality={ck['quality']:.3f}",
                "run": ck["run"],
                "created": CREATED,
            }
        )
        del X
    fields = [f for f in schema.arrow_schema("checkpoints") if f.name in rows[0]]
    ws.write("checkpoints", pa.Table.from_pylist(rows, schema=pa.schema(fields)))
    if analyses != "none" and analyses != ["none"]:
        runner.run(ws.root, analyses, {"seed": seed}, progress_bars=progress)
    return ws
