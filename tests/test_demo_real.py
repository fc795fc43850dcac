"""The demo's real part (conceptlens/demo/real.py): its readers of the Debian files, its
selection rules (symlinks, duplicates, huge and flat images), the build path on a tiny
subset (deterministic), and what the committed demo's real checkpoints measure."""

import gzip
import hashlib
import struct
import zlib

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptlens.demo import real as R
from conceptlens.demo.images import IMAGE_COLUMNS
from conceptlens.workspace import Workspace


# ---------------------------------------------------------------- readers and rules
def _idx(path, arr: np.ndarray) -> None:
    head = b"\x00\x00\x08" + bytes([arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(head + arr.astype(np.uint8).tobytes())


def test_read_idx_round_trips_and_refuses_other_files(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    _idx(tmp_path / "a.gz", a)
    assert np.array_equal(R.read_idx(tmp_path / "a.gz"), a)
    with gzip.open(tmp_path / "b.gz", "wb") as f:
        f.write(b"\x00\x00\x0d\x01" + struct.pack(">I", 2) + b"\x00" * 8)  # floats, not bytes
    with pytest.raises(ValueError, match="b.gz: not an idx file"):
        R.read_idx(tmp_path / "b.gz")


def test_fashion_subset_is_class_balanced_and_seeded(tmp_path):
    labels = np.repeat(np.arange(10), 7)
    images = np.stack([np.full((28, 28), i, np.uint8) for i in range(70)])
    _idx(tmp_path / "t10k-images-idx3-ubyte.gz", images)
    _idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels)
    idx, imgs, y = R.fashion_subset(3, per_class=4, root=tmp_path)
    assert np.bincount(y).tolist() == [4] * 10
    assert (labels[idx] == y).all() and (imgs[:, 0, 0] == idx).all()  # rows stay together
    assert np.array_equal(R.fashion_subset(3, 4, tmp_path)[0], idx)
    assert not np.array_equal(R.fashion_subset(4, 4, tmp_path)[0], idx)


def _png(path, size=(40, 30), mode="RGBA", colour=(200, 0, 0, 255)):
    im = Image.new(mode, size, (0, 0, 0, 0) if mode == "RGBA" else (255, 255, 255))
    im.paste(Image.new(mode, (size[0] // 2, size[1] // 2), colour), (5, 5))
    im.save(path)


def _huge_png_header(path, w, h) -> None:
    """A PNG whose IHDR claims w x h pixels (no image data): only its header may be read."""
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk)


def test_clipart_files_skip_symlinks_and_identical_files(tmp_path):
    a = tmp_path / "animals"
    (a / "mammals").mkdir(parents=True)
    (tmp_path / "food").mkdir()
    _png(a / "cat.png")
    _png(a / "mammals" / "dog.png", size=(50, 30))
    (a / "link.png").symlink_to(a / "cat.png")  # a symlinked duplicate
    (a / "linked_dir").symlink_to(a / "mammals", target_is_directory=True)
    (tmp_path / "food" / "copy.png").write_bytes((a / "cat.png").read_bytes())  # identical bytes
    _png(tmp_path / "food" / "pie.png", colour=(0, 0, 200, 255))
    (a / "notes.txt").write_text("not an image")
    got = R.clipart_files(tmp_path, ("animals", "food"))
    assert got == {"animals": ["animals/cat.png", "animals/mammals/dog.png"], "food": ["food/pie.png"]}
    with pytest.raises(FileNotFoundError, match="plants"):
        R.clipart_files(tmp_path, ("plants",))


def test_clipart_thumbnail_composites_on_white_and_skips_huge_and_flat(tmp_path):
    _png(tmp_path / "a.png", size=(40, 20))
    arr = R.clipart_thumbnail(tmp_path / "a.png", side=32)
    assert arr.shape == (32, 32, 3)
    assert tuple(arr[0, 0]) == (255, 255, 255)  # transparent corner and letterbox: white
    assert (arr == [200, 0, 0]).all(axis=2).any()  # the red square survives
    _huge_png_header(tmp_path / "huge.png", 20_000, 20_000)
    assert R.png_size(tmp_path / "huge.png") == (20_000, 20_000)
    assert R.clipart_thumbnail(tmp_path / "huge.png") is None  # refused from the header
    Image.new("RGBA", (30, 30), (0, 0, 0, 0)).save(tmp_path / "blank.png")  # white once composited
    assert R.clipart_thumbnail(tmp_path / "blank.png") is None
    (tmp_path / "x.png").write_bytes(b"GIF89a....")
    assert R.png_size(tmp_path / "x.png") is None and R.clipart_thumbnail(tmp_path / "x.png") is None


# ---------------------------------------------------------------- the build path, tiny
needs_sources = pytest.mark.skipif(
    bool(R.missing_sources()), reason=f"Debian packages missing: {R.missing_sources()} (make demo-deps)"
)


def _snapshot(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".parquet", ".png")
    }


def _tiny(root, seed=0, models=(R.IMAGENET_MODELS[0], R.IMAGENET_MODELS[3])):
    ws = Workspace.create(root, name="tiny", created=R.CREATED)
    R.write_data(ws, seed, fashion_per_class=1, clipart_per_category=1, progress=False)
    R.build_imagenet(ws, seed, datasets=("clipart",), progress=False, models=models)
    return ws


@needs_sources
def test_tiny_real_build_is_deterministic_and_valid(tmp_path):
    """Data of both datasets (1 image a class) and the seeded random-init MobileNetV2 on
    clipart, twice: the same bytes; another seed draws other images and another network."""
    from conceptlens.validate import validate

    a, b = _tiny(tmp_path / "a"), _tiny(tmp_path / "b")
    snap = _snapshot(a.root)
    assert snap == _snapshot(b.root)
    img = a.read("images").to_pandas()
    assert img.groupby("dataset").size().to_dict() == {"clipart": 10, "fashion": 10}
    clip = img[img.dataset == "clipart"]
    assert sorted(clip.label_name) == sorted(R.CLIPART_CATEGORIES)
    # the hierarchy: each path starts with its top-level category, the label
    assert all(p.split("/")[0] == n for p, n in zip(clip.category_path, clip.label_name))
    cid = "clipart-mobilenet-v2-random"
    row = a.read("checkpoints").to_pandas().set_index("checkpoint_id").loc[cid]
    assert row.method == "random" and row.feature_dim == 1280 and not row.source.startswith("torchvision:")
    f = pq.read_table(a.table_path("features", checkpoint_id=cid))
    X = np.stack(f["embedding"].to_pylist())
    # a random-init MobileNetV2's features (about 1e-9) are below float16's range: float32's
    # exponent with float16's mantissa
    assert f.schema.metadata[b"real_precision"] == b"float16-mantissa" and np.abs(X).max() > 0
    assert np.array_equal(X, R.round_mantissa(X))
    f = pq.read_table(a.table_path("features", checkpoint_id="clipart-effnet-lite0"))
    X = np.stack(f["embedding"].to_pylist())
    assert f.schema.metadata[b"real_precision"] == b"float16"
    assert np.array_equal(X, X.astype(np.float16).astype(np.float32))  # stored at float16 precision
    assert len(np.unique(X, axis=0)) == len(X)
    assert validate(a.root) == []
    # the imagenet: captions from the stored EfficientNet-Lite0 features are the captioner's
    from conceptlens.captioners import ImageNetCaptioner
    from conceptlens.extract import image_path
    from conceptlens.models.packages import package_weights

    spec, pkg = R.CAPTIONER_MODEL
    R.build_captions(a, 0, datasets=("clipart",), progress=False)
    caps = a.read("captions").to_pandas()
    caps = caps[caps.captioner == f"imagenet:{spec}"].set_index("image_id").text
    paths = [image_path(a, t, None) for t in clip.thumbnail]
    ran = ImageNetCaptioner(spec, package_weights(pkg), a.root).caption(paths)
    assert list(caps.loc[clip.image_id]) == ran
    files = a.meta()["provenance"]["real"]["clipart"]["files"]
    assert [f.rsplit("/", 1)[0] for f in files] == list(clip.category_path)
    assert set(img.columns) == {*IMAGE_COLUMNS, "category_path"}  # no per-image ids as factors
    assert [c[1] for c in R.clipart_subset(1, 1)[0]] != files  # another seed, other images


# ---------------------------------------------------------------- the committed demo's numbers
REAL = [
    (ds, m) for ds in R.DATASETS for m in ("effnet-lite0", "mobilenet-v2", "effnet-lite1", "effnet-lite2")
]


@pytest.fixture(scope="module")
def real_metrics(demo_ws):
    """Per checkpoint and k: kNN accuracy and the size-weighted mean purity of the clusters."""
    ck = pd.read_parquet(demo_ws / "checkpoint_metrics", columns=["checkpoint_id", "k", "knn_acc"])
    cl = pd.read_parquet(demo_ws / "cluster_metrics", columns=["checkpoint_id", "k", "size", "purity"])
    cl["w"] = cl["size"] * cl["purity"]
    pur = cl.groupby(["checkpoint_id", "k"])[["w", "size"]].sum()
    pur = (pur["w"] / pur["size"]).rename("purity").reset_index()
    return ck.astype({"checkpoint_id": str}).merge(
        pur.astype({"checkpoint_id": str}), on=["checkpoint_id", "k"]
    )


@pytest.mark.parametrize("dataset,model", REAL)
def test_real_checkpoints_beat_their_random_init_floor(real_metrics, dataset, model):
    """ImageNet features beat the same architecture at random init in kNN accuracy and in
    the purity of their k-means clusters, on every k (the committed demo's metrics)."""
    cm = real_metrics
    real, floor = f"{dataset}-{model}", f"{dataset}-{model}-random"
    a = cm[cm.checkpoint_id == real].set_index("k")
    b = cm[cm.checkpoint_id == floor].set_index("k")
    assert len(a) and a.index.equals(b.index)
    assert (a.knn_acc > b.knn_acc + 0.05).all(), (a.knn_acc, b.knn_acc)
    assert (a.purity > b.purity).all(), (a.purity, b.purity)


@needs_sources
def test_tiny_depth_sequence_of_the_real_build(tmp_path, monkeypatch):
    """build_layers: each layer of EfficientNet-Lite0 a checkpoint of the model's run with
    its layer and depth (pooled stage outputs: 24 and 40 channels), the default embedding
    the deepest; together one depth sequence of the analyses."""
    from conceptlens.analysis.base import sequences
    from conceptlens.analysis.common import Context
    from conceptlens.validate import validate

    ws = _tiny(tmp_path / "a", models=(R.IMAGENET_MODELS[0],))
    monkeypatch.setattr(R, "DEPTH_LAYERS", ((("clipart",), "effnet-lite0", ("blocks.1", "blocks.2")),))
    done = R.build_layers(ws, 0, progress=False)  # (no shapes-simclr-e20 here: its layers wait)
    assert done == ["clipart-effnet-lite0-d0", "clipart-effnet-lite0-d1"]
    ck = ws.read("checkpoints").to_pandas().set_index("checkpoint_id")
    assert list(ck.loc[done, "layer"]) == ["blocks.1", "blocks.2"]
    assert list(ck.loc[done, "feature_dim"]) == [24, 40]
    assert [int(ck.loc[c, "depth"]) for c in (*done, "clipart-effnet-lite0")] == [0, 1, 2]
    assert set(ck.loc[done, "run"]) == {ck.loc["clipart-effnet-lite0", "run"]}
    seqs = [s for s in sequences(Context(ws, progress=False)) if s.axis == "depth"]
    assert [(s.dataset, s.name) for s in seqs] == [("clipart", "imagenet-tf_efficientnet_lite0@depth")]
    assert list(seqs[0].checkpoints["checkpoint_id"]) == [*done, "clipart-effnet-lite0"]
    assert R.build_layers(ws, 0, progress=False) == done  # up to date: nothing extracted again
    assert validate(ws.root) == []


def test_round_mantissa_is_float16_precision_without_its_range():
    """`round_mantissa` keeps float16's 10 mantissa bits and float32's exponent: where
    float16 holds a value (its normal range) it gives float16's own rounding, and values far below float16's
    range (a random-init MobileNetV2's features, about 1e-9, which float16 turns to 0) keep the
    same relative error (at most 2^-11), sign included."""
    rng = np.random.default_rng(3)
    X = (rng.standard_normal((300, 40)) * rng.choice([1e-2, 1.0, 100.0], (300, 1))).astype(np.float32)
    normal = np.abs(X) >= np.finfo(np.float16).tiny  # float16's subnormals have fewer bits
    assert normal.mean() > 0.9
    np.testing.assert_array_equal(
        R.round_mantissa(X)[normal], X.astype(np.float16).astype(np.float32)[normal]
    )
    tiny = X * np.float32(1e-12)
    assert not tiny.astype(np.float16).any()  # float16 loses them all
    rt = R.round_mantissa(tiny)
    assert (np.sign(rt) == np.sign(tiny)).all()
    assert (np.abs(rt - tiny) <= np.abs(tiny) * 2.0**-11).all()
    assert not (rt.view(np.uint32) & np.uint32(0x1FFF)).any()  # the 13 low bits are zero
