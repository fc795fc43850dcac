"""The concept-quality demo data (TabularToy(delta), dSprites(lambda), shapes concepts) and
the concept models' build step."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from conceptlens.demo import concepts_data as cd
from conceptlens.demo import concepts_models as cm
from conceptlens.validate import validate
from harness.factory import shapes_workspace, snapshot


# ---------------------------------------------------------------- TabularToy
@pytest.mark.parametrize("delta", cd.TOY_DELTAS)
def test_toy_latent_covariance_is_the_papers(delta):
    # Sigma: 1 on the diagonal, delta off it; checked on a large sample of the same
    # construction (standard error of each entry ~0.003), and on the dataset itself.
    rng = np.random.default_rng(3)
    n = 200_000
    z = cd.toy_latents(delta, rng.standard_normal((n, 1)), rng.standard_normal((n, 3)))
    sigma = np.eye(3) + delta * (1 - np.eye(3))
    assert np.allclose(cd.toy_covariance(delta), sigma)
    assert np.abs(np.cov(z.T) - sigma).max() < 0.02
    assert np.abs(z.mean(0)).max() < 0.01
    d = cd.tabular_toy(delta, seed=0)
    zd = np.stack([d.factors[k] for k in ("z1", "z2", "z3")], axis=1)
    assert np.abs(np.cov(zd.T) - sigma).max() < 0.1  # 3,000 rows


def test_toy_extremes_are_exact():
    d0, d1 = cd.tabular_toy(0.0), cd.tabular_toy(1.0)
    z1 = np.stack([d1.factors[k] for k in ("z1", "z2", "z3")], axis=1)
    assert np.allclose(z1, z1[:, :1])  # delta = 1: three equal latents, equal concepts
    assert (d1.concepts == d1.concepts[:, :1]).all()
    c0 = np.corrcoef(d0.concepts.T)[np.triu_indices(3, 1)]
    assert np.abs(c0).max() < 0.06


def test_toy_features_concepts_labels_and_splits():
    d = cd.tabular_toy(0.5, seed=0)
    assert d.x.shape == (3000, 7) and d.name == "toy-d0.50"
    assert (d.split[:2000] == "train").all() and (d.split[2000:] == "test").all()
    for i in (0, 17, 2999):
        a, b, c = d.factors["z1"][i], d.factors["z2"][i], d.factors["z3"][i]
        want = [np.sin(a) + a, np.cos(a) + a, np.sin(b) + b, np.cos(b) + b, np.sin(c) + c, np.cos(c) + c]
        assert np.allclose(d.x[i], want + [a * a + b * b + c * c])
        pos = [v > 0 for v in (a, b, c)]
        assert list(d.concepts[i]) == [int(p) for p in pos]
        assert d.labels[i] == int(sum(pos) >= 2)
    assert d.concept_names == ("z1_gt0", "z2_gt0", "z3_gt0")


def test_toy_levels_share_their_noise():
    # Common random numbers: at delta = 0 and 0.5 the same rows, only mixed differently.
    a, b = cd.tabular_toy(0.0, seed=4), cd.tabular_toy(0.5, seed=4)
    za = np.stack([a.factors[k] for k in ("z1", "z2", "z3")], axis=1)
    zb = np.stack([b.factors[k] for k in ("z1", "z2", "z3")], axis=1)
    shared = (zb - np.sqrt(0.5) * za) / np.sqrt(0.5)  # = s, the same in every column
    assert np.allclose(shared, shared[:, :1])


def test_toy_pairs_share_one_latent_and_keep_the_joint_law():
    rng = np.random.default_rng(0)
    n, delta = 100_000, 0.5
    z = cd.toy_latents(delta, rng.standard_normal((n, 1)), rng.standard_normal((n, 3)))
    keep = rng.integers(0, 3, n)
    z2 = cd.toy_conditional_pair(z, keep, delta, rng)
    assert (z2[np.arange(n), keep] == z[np.arange(n), keep]).all()
    assert np.abs(np.cov(z2.T) - cd.toy_covariance(delta)).max() < 0.02
    # The other latents are redrawn given the kept one: correlated with their first draw only
    # through it, cov(z_i, delta z_j) = delta^2.
    other = (keep + 1) % 3
    r = np.corrcoef(z[np.arange(n), other], z2[np.arange(n), other])[0, 1]
    assert abs(r - delta**2) < 0.02


def test_toy_thumbnail_bars_follow_signs():
    img = cd.toy_thumbnail(np.array([3.0, -3.0, 0.0, 4.0, -4.0, 1.0, 12.0]))
    mid = cd.TOY_SIDE // 2
    for i, up in [(0, True), (1, False), (3, True), (4, False), (6, True)]:
        col = img[:, 2 + 4 * i]
        dark = np.flatnonzero(col == 0)
        assert (dark.max() <= mid) if up else (dark.min() >= mid), i
    # 4 and 12 are the full scales of their bars: both reach the border.
    assert (img[1, 2 + 4 * 3] == 0) and (img[1, 2 + 4 * 6] == 0)


# ---------------------------------------------------------------- dSprites
def test_dsprites_grid_has_constant_size_and_halved_supports():
    sizes = set()
    for lam in cd.DSPRITES_LAMBDAS:
        g = cd.dsprites_grid(lam, seed=0)
        sizes.add(len(g))
        assert len(np.unique(g, axis=0)) == len(g)
        assert set(g[:, 0]) == {0, 1, 2}  # shape keeps all its values
        for j in range(1, 5):
            name, t, _ = cd.DSPRITES_FACTORS[j]
            _, _, thr_prev = cd.DSPRITES_FACTORS[j - 1]
            for a in np.unique(g[:, j - 1]):
                allowed = set(g[g[:, j - 1] == a, j].tolist())
                assert len(allowed) == t // 2, (lam, name, a)  # halved support
                if j <= lam:  # conditional dependency on factor j-1 (appendix 6.8.1)
                    pool = range(0, 3 * t // 4 + 1) if a < thr_prev else range(t // 4, t)
                    assert allowed <= set(pool), (lam, name, a)
                else:  # thinned to every other value, independently of factor j-1
                    assert allowed == set(range(0, t, 2)), (lam, name, a)
    assert sizes == {3 * 3 * 20 * 16 * 16}


def test_dsprites_dependencies_are_nested_and_real():
    # Level lambda keeps lambda - 1's dependencies and adds one (the paper's recursion).
    for lam in range(1, 5):
        lo, hi = cd.dsprites_grid(lam - 1, seed=0), cd.dsprites_grid(lam, seed=0)
        for j in range(1, lam):
            for a in range(cd.DSPRITES_FACTORS[j - 1][1]):
                got_lo = set(lo[lo[:, j - 1] == a, j].tolist())
                got_hi = set(hi[hi[:, j - 1] == a, j].tolist())
                if got_lo and got_hi:
                    assert got_lo == got_hi
    # With a dependency the allowed set of scale depends on the shape; without, it does not.
    g0, g1 = cd.dsprites_grid(0, seed=0), cd.dsprites_grid(1, seed=0)
    sets0 = {frozenset(g0[g0[:, 0] == a, 1].tolist()) for a in range(3)}
    sets1 = {frozenset(g1[g1[:, 0] == a, 1].tolist()) for a in range(3)}
    assert len(sets0) == 1 and len(sets1) > 1


def test_dsprites_concepts_and_labels_follow_the_paper():
    d = cd.dsprites(3, seed=0, n=400, n_test=100)
    z = np.stack([d.factors[f"{f}_index"] for f, _, _ in cd.DSPRITES_FACTORS], axis=1)
    for row, c, y in zip(z, d.concepts, d.labels):
        want = [int(row[0] < 2), int(row[1] < 3), int(row[2] < 20), int(row[3] < 16), int(row[4] < 16)]
        assert list(c) == want
        bits = f"{want[1]}{want[3]}" if want[0] else f"{want[2]}{want[4]}"
        assert y == (0 if want[0] else 4) + int(bits, 2)
    assert set(d.labels) == set(range(8)) and len(d.label_names) == 8
    assert (d.split == "test").sum() == 100 and len(d.labels) == 400
    grid = {tuple(r) for r in cd.dsprites_grid(3, seed=0).tolist()}
    assert all(tuple(r) in grid for r in z.tolist())


def test_dsprites_size_is_constant_across_levels():
    assert {len(cd.dsprites(lam, seed=0, n=300, n_test=100).labels) for lam in cd.DSPRITES_LAMBDAS} == {300}


def test_sprite_pixels_follow_factors():
    side = cd.DSPRITES_SIDE
    areas = []
    for scale in range(6):
        img = cd.render_sprite((1, scale, 0, 16, 16))
        assert set(np.unique(img)) <= {0, 255}
        areas.append((img > 0).sum())
    assert areas == sorted(areas) and areas[0] > 10
    for x, y in [(0, 0), (31, 5), (10, 31)]:
        img = cd.render_sprite((0, 3, 0, x, y))
        yy, xx = np.nonzero(img)
        lo, hi = cd.SPRITE_POS
        assert abs((xx.mean() + 0.5) / side - (lo + (hi - lo) * x / 31)) < 0.02
        assert abs((yy.mean() + 0.5) / side - (lo + (hi - lo) * y / 31)) < 0.02
    # The heart has no rotational symmetry, so half a turn changes its image; the ellipse's does not.
    heart = [cd.render_sprite((2, 5, r, 16, 16)) for r in (0, 20)]
    ellipse = [cd.render_sprite((1, 5, r, 16, 16)) for r in (0, 20)]
    assert (heart[0] != heart[1]).sum() > 50
    assert (ellipse[0] != ellipse[1]).sum() < 10


# ---------------------------------------------------------------- determinism
def test_same_seed_same_data_other_seed_other_data():
    for make in (lambda s: cd.tabular_toy(0.25, s), lambda s: cd.dsprites(2, s, n=200, n_test=50)):
        a, b, c = make(5), make(5), make(6)
        for f in ("x", "concepts", "labels", "split"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert not np.array_equal(a.x, c.x)
    # dSprites: another seed draws other dependencies
    assert not np.array_equal(cd.dsprites_grid(4, seed=0), cd.dsprites_grid(4, seed=1))


def test_cbm_training_is_deterministic_and_aligned(monkeypatch):
    monkeypatch.setattr(cm, "EPOCHS", {"tabular_toy": {"cbm": 15}})
    d = cd.tabular_toy(0.0, seed=0)
    a = cm.train("cbm", d, seed=0, run="cbm-x")
    b = cm.train("cbm", d, seed=0, run="cbm-x")
    c = cm.train("cbm", d, seed=0, run="cbm-y")
    assert np.array_equal(a.features, b.features) and not np.array_equal(a.features, c.features)
    from sklearn.metrics import roc_auc_score

    te = d.split == "test"
    auc = [[roc_auc_score(d.concepts[te, j], a.features[te, i]) for j in range(3)] for i in range(3)]
    # Concept i of the bottleneck predicts ground-truth concept i (the names align them).
    assert a.concept_names == list(d.concept_names)
    assert all(auc[i][i] > 0.95 for i in range(3)), auc
    assert all(abs(auc[i][j] - 0.5) < 0.2 for i in range(3) for j in range(3) if i != j), auc


@pytest.mark.parametrize("method", ["vae", "beta_vae", "ada_gvae"])
def test_unsupervised_models_are_deterministic(method, monkeypatch):
    monkeypatch.setattr(cm, "EPOCHS", {"tabular_toy": dict.fromkeys(cm.METHODS, 2), "dsprites": {}})
    d = cd.tabular_toy(0.5, seed=0)
    a, b = (cm.train(method, d, seed=1, run="r") for _ in range(2))
    assert np.array_equal(a.features, b.features)
    assert a.features.shape == (3000, 3) and a.concept_names == ["c0", "c1", "c2"]
    assert np.isfinite(a.features).all() and a.features.std(0).min() > 0


def test_dsprites_pairs_share_a_factor():
    d = cd.dsprites(0, seed=0, n=300, n_test=100)
    inp = cm.inputs_of(d)
    x1, x2 = cm.pair_inputs(d, inp, np.random.default_rng(0))
    assert len(x1) == 2 * 200 // 3 and x1.shape[1:] == (1, 32, 32)
    # Recover each image's factor tuple by its pixels and check that the pair shares one.
    key = {inp.x[i].numpy().tobytes(): i for i in range(len(inp.x))}
    z = np.stack([d.factors[f"{f}_index"] for f, _, _ in cd.DSPRITES_FACTORS], axis=1)
    for a, b in zip(x1, x2):
        ia, ib = key[a.numpy().tobytes()], key[b.numpy().tobytes()]
        assert d.split[ia] == "train" and d.split[ib] == "train"
        assert (z[ia] == z[ib]).any()


# ---------------------------------------------------------------- the build step
@pytest.fixture
def small(monkeypatch):
    """Two levels of each family, tiny sizes, one epoch: the build step end to end in seconds."""
    monkeypatch.setattr(cd, "TOY_DELTAS", (0.0, 1.0))
    monkeypatch.setattr(cd, "TOY_N_TRAIN", 60)
    monkeypatch.setattr(cd, "TOY_N_TEST", 30)
    monkeypatch.setattr(cd, "DSPRITES_LAMBDAS", (0, 2))
    monkeypatch.setattr(cd, "DSPRITES_N", 60)
    monkeypatch.setattr(cd, "DSPRITES_N_TEST", 20)
    monkeypatch.setattr(cm, "EPOCHS", {f: dict.fromkeys(cm.METHODS, 1) for f in ("tabular_toy", "dsprites")})
    monkeypatch.setattr(cm, "REPLICATES", {"tabular_toy": 2, "dsprites": 1})


def _workspace(root):
    return shapes_workspace(root, n=30, dims=(8,))


def test_build_adds_valid_concept_part_and_leaves_the_rest(small, tmp_path):
    ws = _workspace(tmp_path / "a")
    before = snapshot(ws.root)
    old_images = pd.read_parquet(ws.root / "images.parquet")
    cm.build_concepts(ws, seed=0, progress=False)
    assert validate(ws.root) == []
    after = snapshot(ws.root)
    # Only the images and checkpoints tables change among the files that existed before.
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed <= {"images.parquet", "checkpoints.parquet", "workspace.json"}, changed
    images = pd.read_parquet(ws.root / "images.parquet")
    kept = images[images.dataset == "shapes"][old_images.columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, old_images)
    ck = pd.read_parquet(ws.root / "checkpoints.parquet").set_index("checkpoint_id")
    assert ck.loc["rand0", "concept_names"] is None
    assert list(ck.loc["cbm-toy-d0.00-s1", "concept_names"]) == list(cd.TOY_CONCEPTS)
    assert list(ck.loc["vae-dsprites-l2-s0", "concept_names"]) == [f"c{i}" for i in range(5)]
    assert (
        ck.loc["cbm-dsprites-l0-s0", "feature_dim"] == 5 and ck.loc["cbm-dsprites-l0-s0", "concept_dim"] == 1
    )
    assert len(ck) == 1 + 2 * 4 * 2 + 2 * 4 * 1
    labels = pd.read_parquet(ws.root / "concept_labels.parquet")
    assert len(labels) == 2 * 90 * 3 + 2 * 60 * 5 + 30 * len(cd.SHAPES_CONCEPTS)
    ds = pd.read_parquet(ws.root / "concept_datasets.parquet")
    assert ds.to_dict("list") == {
        "dataset": ["toy-d0.00", "toy-d1.00", "dsprites-l0", "dsprites-l2"],
        "family": ["tabular_toy"] * 2 + ["dsprites"] * 2,
        "dependency": ["delta"] * 2 + ["lambda"] * 2,
        "level": [0.0, 1.0, 0.0, 2.0],
    }
    # Thumbnails hold the very pixels the models saw; concept labels match the generator.
    d = cd.dsprites(2, seed=0)
    rows = images[images.dataset == "dsprites-l2"].reset_index(drop=True)
    for i in (0, 31, 59):
        px = np.asarray(Image.open(ws.root / rows.thumbnail[i]))
        assert np.array_equal(px, d.x[i])
    got = labels[labels.image_id.str.startswith("dsprites-l2-")].pivot(index="image_id", columns="concept")
    assert np.array_equal(got["value"][list(cd.DSPRITES_CONCEPTS)].to_numpy(), d.concepts)
    sh = images[images.dataset == "shapes"].set_index("image_id")
    red = labels[labels.concept == "is_red"].set_index("image_id")["value"]
    assert (red == (sh.loc[red.index, "color"] == "red").astype(int)).all()


def test_build_is_deterministic_and_resumable(small, tmp_path):
    a, b = _workspace(tmp_path / "a"), _workspace(tmp_path / "b")
    cm.build_concepts(a, seed=0, progress=False)
    cm.build_concepts(b, seed=0, progress=False)
    sa, sb = snapshot(a.root), snapshot(b.root)
    assert sa == sb
    # A rerun does nothing; a lost features file retrains that checkpoint only.
    assert set(cm.build_concepts(a, seed=0, progress=False)) == {"data"}
    assert snapshot(a.root) == sa
    for f in a.partition_files("features", checkpoint_id="ada_gvae-toy-d1.00-s1"):
        f.unlink()
    assert set(cm.build_concepts(a, seed=0, progress=False)) == {"data", "ada_gvae-toy-d1.00-s1"}
    assert snapshot(a.root) == sa
    # Another seed: other data, and every checkpoint is trained again.
    redo = cm.build_concepts(a, seed=1, progress=False)
    assert len(redo) == 1 + 2 * 4 * 2 + 2 * 4
    assert snapshot(a.root)["concept_labels.parquet"] != sa["concept_labels.parquet"]
    assert validate(a.root) == []


def test_build_restores_rows_a_data_rebuild_dropped(small, tmp_path):
    ws = _workspace(tmp_path / "a")
    cm.build_concepts(ws, seed=0, progress=False)
    full = snapshot(ws.root)
    images = pd.read_parquet(ws.root / "images.parquet")
    images[images.dataset == "shapes"].to_parquet(ws.root / "images.parquet", index=False)
    assert validate(ws.root) != []  # concept labels and features now point at missing images
    times = cm.build_concepts(ws, seed=0, progress=False)
    assert set(times) == {"data"}  # the models were fine: not retrained
    assert validate(ws.root) == []
    assert snapshot(ws.root)["concept_labels.parquet"] == full["concept_labels.parquet"]
