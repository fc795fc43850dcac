"""conceptlens/analysis/baselines.py's helpers (units, fingerprints, twins, transfer targets, splits,
samples, image batches) and a unit run with a stand-in model; `conceptlens analyze baselines` end to
end is tests/test_baselines_analysis.py's. Each test is written against a data-flow bug (issue 29;
tools/dataflow_mutants.py): a filter not applied, the first element used for every one, two
arguments swapped, a sort the wrong way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conceptlens.analysis import baselines as BL  # noqa: E402
from conceptlens.analysis import by_name
from conceptlens.analysis.base import EVERYTHING, Unit
from tests.helpers_analysis_workspace import build, ctx_of, write_clusters


@pytest.fixture
def bl_ws(tmp_path):
    labels = {"toy": [0, 1] * 4, "other": [0, 1, 2, None, 0, 1, 2, 0], "third": [None] * 8}
    ws = build(
        tmp_path / "ws",
        [
            {"checkpoint_id": "b", "weights_sha256": "s", "layer": None, "preprocessing": "p"},
            {"checkpoint_id": "a", "weights_sha256": "s", "layer": None, "preprocessing": "p"},
            {"checkpoint_id": "c", "weights_sha256": "s", "layer": None, "preprocessing": "p"},
            # twins on `other`: u (first by id) has no features; y and x do
            {
                "checkpoint_id": "u",
                "dataset": "other",
                "weights_sha256": "s",
                "preprocessing": "p",
                "_features": False,
            },
            {"checkpoint_id": "y", "dataset": "other", "weights_sha256": "s", "preprocessing": "p"},
            {"checkpoint_id": "x", "dataset": "other", "weights_sha256": "s", "preprocessing": "p"},
            # not twins: another hash, another layer
            {"checkpoint_id": "w", "dataset": "other", "weights_sha256": "t", "preprocessing": "p"},
            {
                "checkpoint_id": "v",
                "dataset": "other",
                "weights_sha256": "s",
                "preprocessing": "p",
                "layer": "L",
            },
        ],
        datasets=("toy", "other", "third"),
        labels=labels,
    )
    write_clusters(ws, "a", 4)
    write_clusters(ws, "a", 2)
    write_clusters(ws, "b", 3)
    return ws


def test_baseline_units_and_ks_are_each_checkpoints_clusterings(bl_ws):
    ctx = ctx_of(bl_ws)
    assert [u.checkpoint_id for u in BL._units(ctx, {}, EVERYTHING)] == ["a", "b"]  # c has no clustering
    assert BL._ks(ctx, "a") == [2, 4]
    assert BL._ks(ctx, "b") == [3]


def test_baseline_fingerprint_covers_every_clustering_of_the_checkpoint(bl_ws):
    ctx = ctx_of(bl_ws)
    u = Unit({"checkpoint_id": "a"}, "a")
    before = BL._fingerprint(ctx, u)
    write_clusters(bl_ws, "a", 4, [1, 0, 1, 0, 3, 2, 3, 2])  # the second k's clusters
    assert BL._fingerprint(ctx, u) != before


def test_twin_is_the_first_same_model_checkpoint_with_features(bl_ws):
    ctx = ctx_of(bl_ws)
    row = ctx.checkpoint_row("a")
    assert BL._twin(ctx, row, "other") == "x"
    assert BL._twin(ctx, row, "third") is None


def test_transfer_targets_are_other_labelled_datasets_in_order(bl_ws):
    ctx = ctx_of(bl_ws)
    assert BL._targets(ctx, "toy", []) == ["other"]  # third has no label
    assert BL._targets(ctx, "other", []) == ["toy"]
    assert BL._targets(ctx, "toy", ["toy", "other"]) == ["other"]
    with pytest.raises(ValueError, match="dataset.s. nope, third$"):
        BL._targets(ctx, "toy", ["third", "other", "nope"])
    ctx._small["concept_datasets"] = pd.DataFrame({"dataset": ["other"]})
    assert BL._targets(ctx, "toy", []) == []


def test_labelled_and_split_ids(bl_ws):
    ctx = ctx_of(bl_ws)
    t = BL._labelled(ctx, "other")
    assert t["image_id"].tolist() == [f"other-{i}" for i in (0, 1, 2, 4, 5, 6, 7)]
    ids = np.array([f"toy-{i}" for i in range(8)], dtype=object)
    tr, te = BL._split_ids(ctx, ids)
    assert tr.tolist() == ["toy-0", "toy-2", "toy-4", "toy-6"]
    assert te.tolist() == ["toy-1", "toy-3", "toy-5", "toy-7"]


def test_sample_is_a_sorted_seeded_subset():
    ids = np.array([f"i{j:02d}" for j in range(20)], dtype=object)
    s = BL._sample(ids, 5, 0, 1)
    assert len(s) == 5 and set(s) <= set(ids) and list(s) == sorted(s)
    assert list(BL._sample(ids, 5, 0, 1)) == list(s)
    assert list(BL._sample(ids[:3], 5, 0, 1)) == list(ids[:3])


# ---- baselines.py: a unit run with a stand-in model -------------------------------------------
class FakeAdapter:
    """Embeds an image as its mean colour and the mean colour of its top-left quarter."""

    def preprocess(self, im):
        import torch

        return torch.from_numpy(np.asarray(im, np.float32) / 255.0).permute(2, 0, 1)

    def embed(self, batch):
        import torch

        return torch.cat([batch.mean(dim=(2, 3)), batch[:, :, :4, :4].mean(dim=(2, 3))], dim=1)


def _img_of(iid: str):
    from PIL import Image

    rng = np.random.default_rng(int(iid.rsplit("-", 1)[1]) + 100 * len(iid))
    return Image.fromarray(rng.integers(0, 255, (8, 8, 3)).astype(np.uint8))


def test_a_baselines_unit_probes_each_targets_own_splits_and_measures_each_k(tmp_path, monkeypatch):
    from conceptlens.metrics import baselines as B

    labels = {"toy": [0, 1] * 4, "other": [0, 1, 2, None, 0, 1, 2, 1], "third": [0, 0, 1, 1, 0, 0, 1, 1]}
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], datasets=("toy", "other", "third"), labels=labels)
    write_clusters(ws, "a", 2, [0, 1, 0, 1, 1, 1, 0, 0])
    write_clusters(ws, "a", 4, [0, 1, 2, 3, 3, 2, 1, 0])
    monkeypatch.setattr(BL, "_load_model", lambda ctx, cid: FakeAdapter())
    monkeypatch.setattr(BL, "_pil_images", lambda ctx, ids, row=None: [_img_of(str(i)) for i in ids])
    a = by_name()["baselines"]
    opts = {**a.option_defaults(), "baseline_images": 8}
    a.run(ctx_of(ws), Unit({"checkpoint_id": "a"}, "a"), opts, EVERYTHING)

    def emb(ids):
        return BL._embed(FakeAdapter(), [_img_of(i) for i in ids])

    t = ws.read("transfer_scores", checkpoint_id="a").to_pandas().set_index("target_dataset")
    assert sorted(t.index) == ["other", "third"]
    for target, tr, te in (
        ("other", [0, 2, 4, 6], [1, 5, 7]),  # other-3 has no label
        ("third", [0, 2, 4, 6], [1, 3, 5, 7]),
    ):
        y = labels[target]
        want = B.linear_probe(
            emb([f"{target}-{i}" for i in tr]),
            np.array([y[i] for i in tr]),
            emb([f"{target}-{i}" for i in te]),
            np.array([y[i] for i in te]),
            0,
        )
        assert (t.loc[target, "n_train"], t.loc[target, "n_test"]) == (len(tr), len(te))
        assert t.loc[target, "accuracy"] == pytest.approx(want["accuracy"])
        assert t.loc[target, "target_neg_entropy"] == pytest.approx(want["neg_entropy"])
    s = ws.read("baseline_scores", checkpoint_id="a").to_pandas().set_index("k")
    ids, X = ctx_of(ws).features("a")
    for k in (2, 4):
        part, _ = ctx_of(ws).clusters("a", k)
        assert s.loc[k, "mcr2"] == pytest.approx(B.rate_reduction(X, part, BL.EPS2))
    assert s.loc[2, "mcr2"] != pytest.approx(s.loc[4, "mcr2"])


def test_batches_of_images_are_embedded_in_order():
    ims = [_img_of(f"toy-{i}") for i in range(5)]
    one = np.concatenate([BL._embed(FakeAdapter(), [im]) for im in ims])
    np.testing.assert_allclose(BL._embed(FakeAdapter(), ims, batch_size=2), one, rtol=1e-6)


def test_augmented_views_are_two_views_of_each_image_in_order(monkeypatch):
    import conceptlens.models.augment as aug

    seen = []

    def fake_augment(x, g):
        assert x.ndim == 4 and hasattr(g, "manual_seed")
        seen.append(float(x.sum()))
        return x

    monkeypatch.setattr(aug, "augment", fake_augment)
    ims = [_img_of(f"toy-{i}") for i in range(3)]
    v0, v1 = BL._augmented_views(ims, 0)
    for a, b, im in zip(v0, v1, ims):
        assert np.array_equal(np.asarray(a), np.asarray(im)) and np.array_equal(np.asarray(b), np.asarray(im))
    assert len(v0) == len(v1) == 3 and len(seen) == 6


def test_pil_images_load_each_image_with_its_own_path_and_background(tmp_path, monkeypatch):
    import conceptlens.extract as ex

    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], datasets=("toy", "other"))
    monkeypatch.setattr(ex, "image_path", lambda ws, thumb, sp: (thumb, sp))
    monkeypatch.setattr(ex, "load_rgb", lambda path, bg: (path, bg))
    monkeypatch.setattr(ex, "model_background", lambda ws, ds, row=None: "bg-" + ds)
    got = BL._pil_images(ctx_of(ws), ["other-1", "toy-2"])
    assert got == [(("thumbnails/other/1.png", None), "bg-other"), (("thumbnails/toy/2.png", None), "bg-toy")]


def test_load_model_probes_a_layer_through_the_checkpoints_adapter(tmp_path, monkeypatch):
    import conceptlens.models as models

    ws = build(tmp_path / "ws", [{"checkpoint_id": "a", "layer": "blocks.3"}, {"checkpoint_id": "b"}])
    adapter = FakeAdapter()

    class Probe:
        def __init__(self, adapter, layer):
            self.adapter, self.layer = adapter, layer

    monkeypatch.setattr(models, "parse_spec", lambda s: s)
    monkeypatch.setattr(models, "load_checkpoint_model", lambda ws, row: adapter)
    monkeypatch.setattr(models, "LayerProbe", Probe)
    p = BL._load_model(ctx_of(ws), "a")
    assert isinstance(p, Probe) and p.adapter is adapter and p.layer == "blocks.3"
    assert p.preprocess == adapter.preprocess
    assert BL._load_model(ctx_of(ws), "b") is adapter


# ---- baselines ----------------------------------------------------------------------------------
class _ImagesCtx:
    def __init__(self, images: pd.DataFrame):
        self.images = images

    def table(self, name, required=True):
        return None


def test_transfer_targets_come_in_sorted_order():
    """The datasets to transfer to, wanted or all, come sorted by name whatever the order
    asked (the transfer rows are written in that order). Catches either sort reversed."""
    from conceptlens.analysis import baselines

    _targets = baselines._targets

    img = pd.DataFrame({"dataset": ["src", "b", "c", "a", "none"], "label": [0, 1, 0, 1, None]})
    ctx = _ImagesCtx(img)
    assert _targets(ctx, "src", []) == ["a", "b", "c"]
    assert _targets(ctx, "src", ["c", "src", "a", "b"]) == ["a", "b", "c"]
