"""The demo generator: deterministic, and its factor columns match its pixels."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from conceptlens.demo import shapes as sh
from conceptlens.demo.build import build_data
from conceptlens.validate import validate
from harness.factory import snapshot


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo") / "a"
    build_data(root, seed=7, n_shapes=120, progress=False)
    return root


def test_same_seed_gives_identical_files(built, tmp_path):
    build_data(tmp_path / "b", seed=7, n_shapes=120, progress=False)
    a, b = snapshot(built), snapshot(tmp_path / "b")
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] for k in a), [k for k in a if a[k] != b[k]][:5]


def test_other_seed_differs(built, tmp_path):
    build_data(tmp_path / "c", seed=8, n_shapes=120, progress=False)
    a, c = snapshot(built), snapshot(tmp_path / "c")
    assert a["images.parquet"] != c["images.parquet"]


def test_built_data_is_valid(built):
    assert validate(built) == []


def test_factor_columns_match_pixels(built):
    imgs = pd.read_parquet(built / "images.parquet")
    shapes = imgs[imgs.dataset == "shapes"]
    assert len(shapes) == 120
    for r in shapes.itertuples():
        px = np.asarray(Image.open(built / r.thumbnail).convert("RGB")).astype(int)
        f = sh.Factors(r.shape, r.color, r.size, r.pos_x, r.pos_y, r.orientation, r.pattern, r.background)
        _, cover = sh.render(f, r.width)
        obj = np.array(sh.COLORS[r.color])
        core = px[cover == 1.0]
        assert len(core) > 20, r.image_id
        # Inside the object every pixel is its colour, darkened by the pattern at most to the
        # pattern shade (pattern edges mix the two): px = t * colour, t in [shade, 1].
        t = core @ obj / (obj @ obj)
        assert ((t > sh.PATTERN_SHADE - 0.01) & (t < 1.01)).all(), r.image_id
        assert np.abs(core - np.outer(t, obj)).max() <= 2, f"{r.image_id}: object pixels are not {r.color}"
        if r.pattern == "plain":
            assert (np.abs(core - obj).max(1) <= 1).all()
        bg = px[cover == 0.0]
        assert (np.abs(bg - np.array(sh.BACKGROUNDS[r.background])).max(1) <= 1).all(), r.image_id
        # Where the mask says the object is, and it is centred on (pos_x, pos_y).
        if r.shape in ("circle", "square", "cross"):
            yy, xx = np.nonzero(cover > 0.5)
            assert abs((xx.mean() + 0.5) / r.width - r.pos_x) < 0.03
            assert abs((yy.mean() + 0.5) / r.height - r.pos_y) < 0.03


def test_size_factor_orders_areas(built):
    imgs = pd.read_parquet(built / "images.parquet")
    s = imgs[(imgs.dataset == "shapes")]
    area = {}
    for r in s.itertuples():
        cover = np.asarray(Image.open(built / r.thumbnail).convert("RGB")).astype(int)
        bg = np.array(sh.BACKGROUNDS[r.background])
        area.setdefault((r.shape, r.size), []).append((np.abs(cover - bg).max(2) > 1).mean())
    for shape in sh.SHAPES:
        means = [np.mean(area[(shape, z)]) for z in sh.SIZES if (shape, z) in area]
        assert means == sorted(means), shape


def test_labels_are_colour_by_shape(built):
    imgs = pd.read_parquet(built / "images.parquet")
    s = imgs[imgs.dataset == "shapes"]
    assert (s["label_name"] == s["color"] + " " + s["shape"]).all()
    assert s.label.between(0, sh.N_LABELS - 1).all()
    assert s.groupby("label_name").label.nunique().max() == 1


def test_captions_follow_factors(built):
    caps = pd.read_parquet(built / "captions.parquet")
    imgs = pd.read_parquet(built / "images.parquet").set_index("image_id")
    s = caps[caps.image_id.str.startswith("shapes")]
    for r in s.itertuples():
        im = imgs.loc[r.image_id]
        for w in (im["shape"], im["color"], im["size"], im["pattern"], im["background"]):
            assert w in r.text


def test_digits_attributes(built):
    imgs = pd.read_parquet(built / "images.parquet")
    d = imgs[imgs.dataset == "digits"]
    assert len(d) == 1797 and d.label.nunique() == 10
    # Ones are narrower than zeros; eights carry more ink than ones.
    assert d[d.label == 1].ink_width.mean() < d[d.label == 0].ink_width.mean()
    assert d[d.label == 8].stroke_mass.mean() > d[d.label == 1].stroke_mass.mean()
    caps = pd.read_parquet(built / "captions.parquet").set_index("image_id")
    for r in d.head(50).itertuples():
        assert caps.loc[r.image_id, "text"].endswith(r.label_name)
