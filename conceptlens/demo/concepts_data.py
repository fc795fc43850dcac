"""The concept-quality paper's datasets, generated from a seed: TabularToy(delta) and dSprites(lambda).

Both follow the paper's appendix 6.8.1; what it leaves open is said where it is decided.

* **TabularToy(delta)**: three latents z ~ N(0, Sigma), Sigma = 1 on the diagonal and
  delta off it; seven features sin(z_i) + z_i, cos(z_i) + z_i for each latent and
  z_1^2 + z_2^2 + z_3^2 (Mahinpei et al. 2021); concepts 1[z_i > 0]; label 1 when at
  least two concepts are 1; 2,000 train and 1,000 test rows. The five levels share
  their noise (common random numbers), so they differ only through delta.
* **dSprites(lambda)**: sprites rendered here (no download) from the dSprites factor
  grid: shape (square, ellipse, heart), scale (6), rotation (40), x (32), y (32), binary
  64 x 64 images. Concepts 1[shape < 2], 1[scale < 3], 1[rotation < 20], 1[x < 16],
  1[y < 16]; eight labels: [c2 c4] in base 2 when c1 = 1, else 4 + [c3 c5]. lambda
  random conditional dependencies (z_i -> z_i+1 for i <= lambda), every other factor
  thinned to every other value, so each level's grid holds the same number of factor
  tuples (3 x 3 x 20 x 16 x 16 = 46,080); each level is a uniform sample of
  `DSPRITES_N` tuples of its grid (the paper uses the whole grid; two cores cannot).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from itertools import product

import numpy as np
from PIL import Image

from .. import schema
from ..workspace import atomic_write_bytes

TOY_DELTAS = (0.0, 0.25, 0.5, 0.75, 1.0)
TOY_N_TRAIN, TOY_N_TEST = 2000, 1000
TOY_CONCEPTS = ("z1_gt0", "z2_gt0", "z3_gt0")
TOY_LABELS = ("fewer than two latents positive", "at least two latents positive")
TOY_SIDE = 32  # thumbnail: a bar chart of the seven features

DSPRITES_LAMBDAS = (0, 1, 2, 3, 4)
# (factor, number of values, concept threshold: concept = value < threshold)
DSPRITES_FACTORS = (("shape", 3, 2), ("scale", 6, 3), ("rotation", 40, 20), ("x", 32, 16), ("y", 32, 16))
DSPRITES_CONCEPTS = tuple(f"{f}_lt{t}" for f, _, t in DSPRITES_FACTORS)
DSPRITES_SHAPES = ("square", "ellipse", "heart")
DSPRITES_SIDE = 64
DSPRITES_N = 3000
DSPRITES_N_TEST = 1000
# Sprite radius at scale 1, position range of its centre: fractions of the image side.
SPRITE_RADIUS = 0.18
SPRITE_POS = (0.2, 0.8)


@dataclass
class ConceptData:
    """One concept dataset at one dependency level, in memory."""

    name: str  # images.dataset, e.g. toy-d0.50 / dsprites-l2
    family: str  # tabular_toy | dsprites
    dependency: str  # delta | lambda
    level: float
    x: np.ndarray  # inputs: (n, 7) float64 features, or (n, S, S) uint8 images in {0, 255}
    concepts: np.ndarray  # (n, k) int
    concept_names: tuple[str, ...]
    labels: np.ndarray  # (n,) int
    label_names: tuple[str, ...]
    split: np.ndarray  # (n,) "train" / "test"
    factors: dict[str, np.ndarray] = field(default_factory=dict)  # extra images columns

    @property
    def n_labels(self) -> int:
        return len(self.label_names)

    @property
    def train(self) -> np.ndarray:
        return np.flatnonzero(self.split == "train")


# ---------------------------------------------------------------- TabularToy
def toy_name(delta: float) -> str:
    return f"toy-d{delta:.2f}"


def toy_covariance(delta: float) -> np.ndarray:
    return np.full((3, 3), float(delta)) + (1.0 - delta) * np.eye(3)


def toy_latents(delta: float, shared: np.ndarray, own: np.ndarray) -> np.ndarray:
    """z = sqrt(delta) s + sqrt(1 - delta) e with s (n, 1) and e (n, 3) standard normal.

    Its covariance is exactly `toy_covariance(delta)`, and unlike a Cholesky factor it
    stays defined at delta = 1 (three equal latents).
    """
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must be in [0, 1], got {delta}")
    return np.sqrt(delta) * shared + np.sqrt(1.0 - delta) * own


def toy_features(z: np.ndarray) -> np.ndarray:
    cols = []
    for i in range(3):
        cols += [np.sin(z[:, i]) + z[:, i], np.cos(z[:, i]) + z[:, i]]
    cols.append((z**2).sum(axis=1))
    return np.stack(cols, axis=1)


def toy_concepts(z: np.ndarray) -> np.ndarray:
    return (z > 0).astype(np.int64)


def toy_labels(concepts: np.ndarray) -> np.ndarray:
    return (concepts.sum(axis=1) >= 2).astype(np.int64)


def tabular_toy(delta: float, seed: int = 0) -> ConceptData:
    """TabularToy(delta): the first 2,000 rows are the train split, the last 1,000 the test split."""
    rng = np.random.default_rng([seed, 9, 1])
    n = TOY_N_TRAIN + TOY_N_TEST
    z = toy_latents(delta, rng.standard_normal((n, 1)), rng.standard_normal((n, 3)))
    c = toy_concepts(z)
    split = np.array(["train"] * TOY_N_TRAIN + ["test"] * TOY_N_TEST, dtype=object)
    return ConceptData(
        name=toy_name(delta),
        family="tabular_toy",
        dependency="delta",
        level=float(delta),
        x=toy_features(z),
        concepts=c,
        concept_names=TOY_CONCEPTS,
        labels=toy_labels(c),
        label_names=TOY_LABELS,
        split=split,
        factors={"z1": z[:, 0], "z2": z[:, 1], "z3": z[:, 2]},
    )


def toy_conditional_pair(z: np.ndarray, keep: np.ndarray, delta: float, rng: np.random.Generator):
    """For each row, a second latent vector that equals it in factor `keep[row]` and draws the
    others from their conditional law given that factor (for Ada-GVAE's pairs): given z_j,
    the others are delta z_j + sqrt(delta - delta^2) s + sqrt(1 - delta) e."""
    n = len(z)
    zj = z[np.arange(n), keep]
    out = delta * zj[:, None] + np.sqrt(delta - delta**2) * rng.standard_normal((n, 1))
    out = out + np.sqrt(1.0 - delta) * rng.standard_normal((n, 3))
    out[np.arange(n), keep] = zj
    return out


# Fixed bar scales: features 1-6 lie mostly in [-4, 4], feature 7 (a sum of squares) in [0, 12].
_BAR_SCALE = np.array([4.0] * 6 + [12.0])


def toy_thumbnail(features: np.ndarray, side: int = TOY_SIDE) -> np.ndarray:
    """A greyscale bar chart of the seven features: bars up or down from a middle line."""
    img = np.full((side, side), 255, np.uint8)
    mid = side // 2
    img[mid, 1 : side - 1] = 160
    h = np.clip(features / _BAR_SCALE, -1, 1) * (mid - 1)
    for i, v in enumerate(h):
        x0 = 2 + 4 * i
        top, bottom = (mid - int(round(v)), mid) if v >= 0 else (mid, mid - int(round(v)))
        img[top : bottom + 1, x0 : x0 + 3] = 0
    return img


# ---------------------------------------------------------------- dSprites
def dsprites_name(lam: int) -> str:
    return f"dsprites-l{lam}"


def dependency_sets(seed: int, i: int) -> dict[int, np.ndarray]:
    """Allowed values of factor i+1 given each value a of factor i (0-based), as in appendix
    6.8.1: floor(T/2) values drawn without replacement from {0..floor(3T/4)} when concept i
    is 1 at a, else from {floor(T/4)..T-1}. Drawn from (seed, i) alone, so level lambda keeps
    the dependencies of level lambda - 1 and adds one."""
    _, t_a, thr_a = DSPRITES_FACTORS[i]
    _, t, _ = DSPRITES_FACTORS[i + 1]
    rng = np.random.default_rng([seed, 10, i])
    out = {}
    for a in range(t_a):
        pool = np.arange(0, 3 * t // 4 + 1) if a < thr_a else np.arange(t // 4, t)
        out[a] = np.sort(rng.choice(pool, size=t // 2, replace=False))
    return out


def dsprites_grid(lam: int, seed: int = 0) -> np.ndarray:
    """Every allowed factor tuple (rows of shape, scale, rotation, x, y) of dSprites(lambda)."""
    if lam not in DSPRITES_LAMBDAS:
        raise ValueError(f"lambda must be one of {DSPRITES_LAMBDAS}, got {lam}")
    deps = {i: dependency_sets(seed, i) for i in range(lam)}
    every_other = [np.arange(0, t, 2) for _, t, _ in DSPRITES_FACTORS]
    rows = [(a,) for a in range(DSPRITES_FACTORS[0][1])]
    for j in range(1, len(DSPRITES_FACTORS)):
        if j - 1 in deps:
            rows = [r + (int(v),) for r in rows for v in deps[j - 1][r[-1]]]
        else:
            rows = [r + (int(v),) for r, v in product(rows, every_other[j])]
    return np.array(rows, dtype=np.int64)


def dsprites_concepts(z: np.ndarray) -> np.ndarray:
    thr = np.array([t for _, _, t in DSPRITES_FACTORS])
    return (z < thr).astype(np.int64)


def dsprites_labels(c: np.ndarray) -> np.ndarray:
    return np.where(c[:, 0] == 1, 2 * c[:, 1] + c[:, 3], 4 + 2 * c[:, 2] + c[:, 4]).astype(np.int64)


DSPRITES_LABELS = tuple(
    [f"square or ellipse, {s}, {h}" for s in ("large", "small") for h in ("right", "left")]
    + [f"heart, rotation {r} 180 deg, {v}" for r in (">=", "<") for v in ("bottom", "top")]
)


def _sprite_mask(shape: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Inside-test in the sprite's own unit coordinates (y up)."""
    if shape == 0:  # square
        return np.maximum(np.abs(x), np.abs(y)) <= 0.75
    if shape == 1:  # ellipse, long axis along x
        return (x / 1.0) ** 2 + (y / 0.5) ** 2 <= 1.0
    if shape == 2:  # heart: (u^2 + v^2 - 1)^3 - u^2 v^3 <= 0, fitted into the unit disc
        u, v = x * 1.2, y * 1.2 + 0.1
        return (u * u + v * v - 1) ** 3 - u * u * v**3 <= 0
    raise ValueError(f"unknown sprite shape {shape}")


def render_sprite(z, side: int = DSPRITES_SIDE, supersample: int = 3) -> np.ndarray:
    """Binary sprite image (uint8 0/255) of factor tuple z = (shape, scale, rotation, x, y);
    a pixel is on when the sprite covers at least half of it."""
    shape, scale, rot, xi, yi = (int(v) for v in z)
    r = SPRITE_RADIUS * (0.5 + 0.1 * scale)  # scales 0.5, 0.6, ..., 1.0 as in dSprites
    lo, hi = SPRITE_POS
    cx = lo + (hi - lo) * xi / (DSPRITES_FACTORS[3][1] - 1)
    cy = lo + (hi - lo) * yi / (DSPRITES_FACTORS[4][1] - 1)  # y index 0 = top row
    a = 2 * np.pi * rot / DSPRITES_FACTORS[2][1]
    n = side * supersample
    c = (np.arange(n) + 0.5) / n
    gx, gy = np.meshgrid(c, c)
    dx, dy = (gx - cx) / r, (cy - gy) / r  # y up inside the sprite
    u = np.cos(a) * dx + np.sin(a) * dy
    v = -np.sin(a) * dx + np.cos(a) * dy
    cover = _sprite_mask(shape, u, v).reshape(side, supersample, side, supersample).mean(axis=(1, 3))
    return np.where(cover >= 0.5, 255, 0).astype(np.uint8)


def dsprites(lam: int, seed: int = 0, n: int | None = None, n_test: int | None = None) -> ConceptData:
    """dSprites(lambda): `n` tuples (default `DSPRITES_N`) drawn uniformly without replacement
    from the level's grid, `n_test` of them (default `DSPRITES_N_TEST`) in the test split."""
    n = DSPRITES_N if n is None else n
    n_test = DSPRITES_N_TEST if n_test is None else n_test
    grid = dsprites_grid(lam, seed)
    if n > len(grid):
        raise ValueError(f"n = {n} exceeds the {len(grid)} factor tuples of dSprites({lam})")
    rng = np.random.default_rng([seed, 11, lam])
    z = grid[np.sort(rng.choice(len(grid), size=n, replace=False))]
    split = np.array(["train"] * n, dtype=object)
    split[rng.permutation(n)[:n_test]] = "test"
    c = dsprites_concepts(z)
    return ConceptData(
        name=dsprites_name(lam),
        family="dsprites",
        dependency="lambda",
        level=float(lam),
        x=np.stack([render_sprite(t) for t in z]),
        concepts=c,
        concept_names=DSPRITES_CONCEPTS,
        labels=dsprites_labels(c),
        label_names=DSPRITES_LABELS,
        split=split,
        factors={f"{f}_index": z[:, i] for i, (f, _, _) in enumerate(DSPRITES_FACTORS)},
    )


def dsprites_thumbnail_name(z) -> str:
    """One file per factor tuple: levels that draw the same tuple share its image."""
    s, c, r, x, y = (int(v) for v in z)
    return f"{DSPRITES_SHAPES[s]}-s{c}-r{r:02d}-x{x:02d}-y{y:02d}.png"


# ---------------------------------------------------------------- shapes (probe concepts)
# Binary concepts of the existing shapes world, from its factor columns: the label is
# colour x shape, so the first four bear on it and the last two are nuisances.
SHAPES_CONCEPTS = {
    "is_red": ("color", "red"),
    "is_blue": ("color", "blue"),
    "is_circle": ("shape", "circle"),
    "is_star": ("shape", "star"),
    "is_large": ("size", "large"),
    "is_striped": ("pattern", "striped"),
}


def shapes_concepts(frame) -> dict[str, np.ndarray]:
    """{concept: 0/1 per row} from the factor columns of the shapes rows of images.parquet."""
    return {k: (frame[col].to_numpy() == v).astype(np.int64) for k, (col, v) in SHAPES_CONCEPTS.items()}


# ---------------------------------------------------------------- writing into a workspace
DATA_VERSION = 1
# A fixed creation time keeps rebuilds byte-identical (as the rest of the demo).
CREATED = "2026-11-22T00:00:00+00:00"


def dataset_names() -> list[str]:
    return [toy_name(d) for d in TOY_DELTAS] + [dsprites_name(lam) for lam in DSPRITES_LAMBDAS]


def _unknown(name: str) -> ValueError:
    names = ", ".join(dataset_names())
    return ValueError(f"{name!r} is not a concept dataset of the demo; choose from {names}")


def family_of(name: str) -> str:
    if name in {toy_name(d) for d in TOY_DELTAS}:
        return "tabular_toy"
    if name in {dsprites_name(lam) for lam in DSPRITES_LAMBDAS}:
        return "dsprites"
    raise _unknown(name)


def generate(name: str, seed: int) -> ConceptData:
    """The dataset called `name` (e.g. toy-d0.50, dsprites-l2)."""
    for d in TOY_DELTAS:
        if toy_name(d) == name:
            return tabular_toy(d, seed)
    for lam in DSPRITES_LAMBDAS:
        if dsprites_name(lam) == name:
            return dsprites(lam, seed)
    raise _unknown(name)


def image_ids(data: ConceptData) -> list[str]:
    return [f"{data.name}-{i:04d}" for i in range(len(data.labels))]


def _png(arr: np.ndarray) -> bytes:

    buf = io.BytesIO()
    Image.fromarray(arr, mode="L").save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _shapes_frame(ws):
    df = ws.read("images").to_pandas()
    return df[df["dataset"] == "shapes"].sort_values("image_id")


def stamp(ws, seed: int) -> dict:
    """Everything the written concept data depends on; stored with `concept_datasets`."""
    shapes = _shapes_frame(ws)
    h = hashlib.sha1()
    if len(shapes):
        h.update("".join(shapes["image_id"]).encode())
        for v in shapes_concepts(shapes).values():
            h.update(v.tobytes())
    return {
        **generator_stamp(seed),
        "shapes_concepts": {k: list(v) for k, v in SHAPES_CONCEPTS.items()},
        "shapes_sha1": h.hexdigest(),
    }


def generator_stamp(seed: int) -> dict:
    """What the generated datasets depend on (the concept models' data)."""
    return {
        "version": DATA_VERSION,
        "seed": seed,
        "toy": {"deltas": list(TOY_DELTAS), "n_train": TOY_N_TRAIN, "n_test": TOY_N_TEST},
        "dsprites": {"lambdas": list(DSPRITES_LAMBDAS), "n": DSPRITES_N, "n_test": DSPRITES_N_TEST},
        "side": DSPRITES_SIDE,
        "sprite": {"radius": SPRITE_RADIUS, "pos": list(SPRITE_POS)},
    }


def data_done(ws, seed: int) -> bool:
    """concept_datasets written last with this stamp, and images still hold every concept row
    (a rerun of the `data` stage rewrites images.parquet without them)."""
    if not ws.table_path("concept_datasets").exists() or not ws.table_path("concept_labels").exists():
        return False
    if ws.read_metadata("concept_datasets").get("stamp") != stamp(ws, seed):
        return False
    ids = set(ws.read("images", columns=["image_id"])["image_id"].to_pylist())
    n = len(TOY_DELTAS) * (TOY_N_TRAIN + TOY_N_TEST) + len(DSPRITES_LAMBDAS) * DSPRITES_N
    prefixes = tuple(f"{d}-" for d in dataset_names())
    return sum(1 for i in ids if i.startswith(prefixes)) == n


def _rows(data: ConceptData) -> tuple[list[dict], list[tuple[str, np.ndarray]]]:
    """images rows and (thumbnail path, pixels) of one dataset."""
    rows, files = [], []
    for i, iid in enumerate(image_ids(data)):
        if data.family == "tabular_toy":
            rel, px = f"thumbnails/{data.name}/{i:04d}.png", toy_thumbnail(data.x[i])
        else:
            z = [data.factors[f"{f}_index"][i] for f, _, _ in DSPRITES_FACTORS]
            rel, px = f"thumbnails/dsprites/{dsprites_thumbnail_name(z)}", data.x[i]
        files.append((rel, px))
        row = {
            "image_id": iid,
            "dataset": data.name,
            "label": int(data.labels[i]),
            "label_name": data.label_names[data.labels[i]],
            "split": str(data.split[i]),
            "thumbnail": rel,
            "width": px.shape[1],
            "height": px.shape[0],
        }
        row.update({k: v[i].item() for k, v in data.factors.items()})
        rows.append(row)
    return rows, files


def _remove_stale_thumbnails(ws, keep: set[str]) -> int:
    removed = 0
    for name in ["dsprites", *[toy_name(d) for d in TOY_DELTAS]]:
        folder = ws.root / "thumbnails" / name
        if folder.is_dir():
            for p in folder.glob("*.png"):
                if p.relative_to(ws.root).as_posix() not in keep:
                    p.unlink()
                    removed += 1
    return removed


def write_data(ws, datasets: list[ConceptData], seed: int, progress: bool = True) -> None:
    """Add the concept datasets to a built workspace: thumbnails, their rows of images.parquet
    (other rows kept as they are), concept_labels (with the shapes concepts) and, last,
    concept_datasets. Nothing else is read or changed."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from tqdm import tqdm

    names = [d.name for d in datasets]
    rows, files = [], {}
    for d in datasets:
        r, f = _rows(d)
        rows += r
        files.update(f)
    for rel, px in tqdm(sorted(files.items()), desc="concepts: thumbnails", disable=not progress):
        atomic_write_bytes(ws.root / rel, _png(px), fsync=False)
    _remove_stale_thumbnails(ws, set(files))

    old = ws.read("images")
    old = old.filter(pc.invert(pc.is_in(old["dataset"], value_set=pa.array(names))))
    keys = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist reads the first row's keys only
    new = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])
    types = {n: old.schema.field(n).type for n in old.column_names}
    new = new.cast(pa.schema([pa.field(n, types.get(n, new.schema.field(n).type)) for n in new.column_names]))
    ws.write("images", pa.concat_tables([old, new], promote_options="default"))

    shapes = _shapes_frame(ws)
    ids, concept, value = [], [], []
    for d in datasets:
        di = image_ids(d)
        for j, cname in enumerate(d.concept_names):
            ids += di
            concept += [cname] * len(di)
            value += d.concepts[:, j].tolist()
    for cname, v in shapes_concepts(shapes).items():
        ids += shapes["image_id"].tolist()
        concept += [cname] * len(v)
        value += v.tolist()
    labels = pa.table(
        {"image_id": ids, "concept": concept, "value": pa.array(value, pa.int64())},
        schema=schema.arrow_schema("concept_labels"),
    )
    ws.write("concept_labels", labels)
    table = pa.Table.from_pylist(
        [
            {"dataset": d.name, "family": d.family, "dependency": d.dependency, "level": d.level}
            for d in datasets
        ],
        schema=schema.arrow_schema("concept_datasets"),
    )
    ws.write("concept_datasets", table, metadata={"stamp": stamp(ws, seed)})
    meta = ws.meta()
    meta.setdefault("provenance", {})["concept_datasets"] = {
        "generator": "conceptlens demo build --stages concepts (conceptlens/demo/concepts_data.py)",
        "seed": seed,
        "tabular_toy": {"deltas": list(TOY_DELTAS), "train": TOY_N_TRAIN, "test": TOY_N_TEST},
        "dsprites": {
            "lambdas": list(DSPRITES_LAMBDAS),
            "images_per_level": DSPRITES_N,
            "test": DSPRITES_N_TEST,
            "side": DSPRITES_SIDE,
            "note": "sprites rendered procedurally from the dSprites factor grid, not the original files",
        },
        "shapes_concepts": sorted(SHAPES_CONCEPTS),
    }
    ws.write_meta(meta)
