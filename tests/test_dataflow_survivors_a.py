"""Data-flow survivors of issue 29 (part a): compmap, concepts, learning_curves,
cluster_captions, common and baselines. Each test names the data-flow bug it catches (a
filter not applied, the first element used for every one, two arguments swapped, a sort the
wrong way); values come from a property or a direct computation on the rows that should be
used, on tiny hand-built inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.common import Context
from conceptlens.metrics import compmap as M
from conceptlens.workspace import Workspace, WorkspaceError

# ---- compmap: helpers on hand-built inputs --------------------------------------------------------


def _write(ws, name: str, rows: list[dict], **partition) -> None:
    ws.write(name, pa.Table.from_pylist(rows, schema=schema.arrow_schema(name, partition=False)), **partition)


def _prim(name: str, group: str, position: int, normalize: str = "softmax") -> dict:
    return {
        "primitive": name,
        "group": group,
        "value": name.split(":")[1],
        "prompt": f"a {name}",
        "position": position,
        "normalize": normalize,
    }


def test_read_primitives_keeps_position_order_and_names_the_mixed_group(tmp_path):
    """The vocabulary comes back in `position` order (written shuffled), and the error for a
    group normalised two ways names that group, not the first group of all. Catches the
    position sort reversed and the `mixed > 1` filter dropped from the message."""
    from conceptlens.analysis.compmap import read_primitives

    ws = Workspace.create(tmp_path / "ws", name="t")
    rows = [_prim("shape:b", "shape", 3), _prim("color:a", "color", 0), _prim("shape:a", "shape", 2)]
    rows.append(_prim("color:b", "color", 1))
    _write(ws, "primitives", rows, dataset="d")
    got = read_primitives(ws, "d")
    assert list(got["position"]) == sorted(r["position"] for r in rows)
    assert list(got["primitive"]) == ["color:a", "color:b", "shape:a", "shape:b"]
    rows[0]["normalize"] = "raw"  # only `shape` mixes; `color` comes first in the groupby
    _write(ws, "primitives", rows, dataset="d")
    with pytest.raises(WorkspaceError, match="differs within group 'shape'"):
        read_primitives(ws, "d")


def test_truth_matrix_error_names_the_first_unknown_primitive(tmp_path):
    """Unknown primitives in label_primitives: the message names the first in sorted order
    (the package's messages list bad values in order). Catches the sort reversed."""
    from conceptlens.analysis.compmap import read_primitives, truth_matrix

    ws = Workspace.create(tmp_path / "ws", name="t")
    _write(ws, "primitives", [_prim("color:a", "color", 0), _prim("color:b", "color", 1)], dataset="d")
    lp = [
        {"label": 0, "label_name": "x", "primitive": p, "value": 1.0}
        for p in ("color:a", "zz:unknown", "aa:unknown")
    ]
    _write(ws, "label_primitives", lp, dataset="d")
    with pytest.raises(WorkspaceError, match="holds 'aa:unknown', which is not in primitives"):
        truth_matrix(ws, "d", read_primitives(ws, "d"))


class _Ctx:
    """The two things `_vl_rows` / `_vl_row` read from a Context."""

    def __init__(self, ws, vl: pd.DataFrame):
        self.ws, self._vl = ws, vl

    def table(self, name, required=True):
        assert name == "vl_models"
        return self._vl


def _vl_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"vl_model_id": ["vl-a", "vl-b", "vl-c"], "dataset": ["d1", "d2", "d3"], "spec": ["x", "y", "z"]}
    )


def test_vl_row_is_the_asked_models_row(tmp_path):
    """`_vl_row` returns the row of the VL model asked for (its dataset, spec). Catches the
    `vl_model_id ==` filter dropped: every model would get the first row's dataset."""
    from conceptlens.analysis import compmap

    _vl_row = compmap._vl_row

    ctx = _Ctx(Workspace.create(tmp_path / "ws", name="t"), _vl_frame())
    for r in _vl_frame().to_dict("records"):
        assert _vl_row(ctx, r["vl_model_id"]) == r


def test_unknown_vl_models_error_names_the_first_in_order(tmp_path):
    """`--vl` with two unknown names: the message names the first in sorted order. Catches the
    sort reversed."""
    from conceptlens.analysis import compmap

    _vl_rows = compmap._vl_rows

    ctx = _Ctx(Workspace.create(tmp_path / "ws", name="t"), _vl_frame())
    with pytest.raises(WorkspaceError, match="no VL model 'vl-0' "):
        _vl_rows(ctx, {"vl": ["vl-z", "vl-a", "vl-0"]})


def test_collect_appends_each_models_own_values():
    """One episode's values go under each model's own key: accuracy = mean of its own
    correctness, the weight accuracies its own. Catches the loops over M.MODELS and over
    ("prim", "oracle") reading the first model for every one."""
    from conceptlens.analysis import compmap

    _collect = compmap._collect

    correct = {
        "prim": np.array([1, 0, 0, 0]),
        "interv_full": np.array([1, 1, 0, 0]),
        "interv_partial": np.array([1, 1, 1, 0]),
        "oracle": np.array([1, 1, 1, 1]),
    }
    weights = {"prim": (0.25, 0.5, 4, 2), "oracle": (0.75, 1.0, 4, 2)}
    per: dict = {}
    _collect(per, correct, weights)
    for m in M.MODELS:
        assert per[m, "accuracy"] == [correct[m].mean()]
    assert per["prim", "delta"] == [1.0 - 0.5]
    for m in ("prim", "oracle"):
        assert per[m, "acc_instance"] == [weights[m][0]]
        assert per[m, "acc_class"] == [weights[m][1]]


def _noisy(n_per: int = 8, classes: int = 3, p: int = 4, seed: int = 0):
    """Activations X (noisy class centres), ground truth G (class indicator), labels y."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), n_per)
    centres = rng.standard_normal((classes, p))
    X = centres[y] + 1.5 * rng.standard_normal((len(y), p))
    T = np.eye(classes, p)
    G = T[y]
    return X, G, y, (lambda c: T[int(c)])


def test_episode_scores_average_every_episode():
    """The few-shot accuracy is the mean over the sampled episodes, each scored on its own
    support and query rows (a direct loop over M.sample_episodes / M.score_models). Catches
    the first episode scored `episodes` times."""
    from conceptlens.analysis.compmap import episode_scores

    X, G, y, truth_of = _noisy()
    ways, shots, queries, episodes, seed = 3, 1, 3, 6, 5
    rows = episode_scores(X, G, y, truth_of, ways, shots, queries, episodes, seed)
    got = {(r["model"], r["metric"]): r["value"] for r in rows}
    per = []
    for e in M.sample_episodes(y, ways, shots, queries, episodes, seed):
        correct, _, _ = M.score_models(
            X[e.support], G[e.support], y[e.support], X[e.query], G[e.query], y[e.query], truth_of, seed
        )
        per.append(correct["prim"].mean())
    assert len(set(per)) > 1  # the episodes differ, so the first one alone gives another mean
    assert got["prim", "accuracy"] == pytest.approx(np.mean(per))
    assert all(r["episodes"] == episodes and r["ways"] == ways for r in rows)


def test_full_shot_tests_only_the_classes_it_trained_on():
    """Full shot: the classes are those of the train rows; test rows of a class without
    training rows are not scored (n counts the test rows of the trained classes). Catches
    `y[train]` -> `y`."""
    from conceptlens.analysis.compmap import full_shot

    X, G, y, truth_of = _noisy(n_per=8)
    train = np.zeros(len(y), bool)
    train[(y < 2) & (np.arange(len(y)) % 8 < 5)] = True  # classes 0 and 1: 5 train, 3 test each
    rows, weights = full_shot(X, G, y, train, truth_of, 0)
    acc = [r for r in rows if r["metric"] == "accuracy"]
    assert {r["ways"] for r in rows} == {2}
    assert {r["n"] for r in acc} == {6}
    assert list(weights["prim"][0]) == [0, 1]


def test_full_shot_without_test_rows_fits_on_every_row():
    """No test row: no score, the weights of models fitted on all rows (X for prim, G for
    the oracle): one row per class and primitive, and the oracle's largest weight of a class
    is its own ground-truth primitive. Catches fit_composition given (y, X) or (y, G)."""
    from conceptlens.analysis.compmap import full_shot

    X, G, y, truth_of = _noisy(n_per=6)
    rows, weights = full_shot(X, G, y, np.ones(len(y), bool), truth_of, 0)
    assert rows == []
    for name, data in (("prim", X), ("oracle", G)):
        classes, W = weights[name]
        assert list(classes) == [0, 1, 2] and W.shape == (3, data.shape[1])
    W = weights["oracle"][1]
    assert list(W.argmax(axis=1)) == [0, 1, 2]


def test_hf_clip_encodes_each_image_of_its_own(tmp_path):
    """`_HFClip.encode_images` embeds every path given, in order. Catches the first image
    read for every path. (Model and processor replaced by stand-ins: the mean colour of an
    image is its embedding.)"""
    import torch
    from PIL import Image

    from conceptlens.analysis import compmap

    _HFClip = compmap._HFClip

    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    paths = []
    for i, c in enumerate(colours):
        paths.append(tmp_path / f"{i}.png")
        Image.new("RGB", (4, 4), c).save(paths[-1])

    class Processor:
        def __call__(self, images, return_tensors):
            return {
                "pixel_values": torch.tensor(
                    np.array([np.asarray(im, float).mean(axis=(0, 1)) for im in images])
                )
            }

    class Model:
        def get_image_features(self, pixel_values):
            return pixel_values

    clip = object.__new__(_HFClip)
    clip.processor, clip.model = Processor(), Model()
    assert np.array_equal(clip.encode_images(paths), np.array(colours, float))


# ---- compmap: the analysis end to end -----------------------------------------------------------
class FakeVL:
    """A prompt is its primitive's indicator; an image is the indicator of its colour and
    shape (`perfect`) or the same vector for every image (`constant`): activations then
    carry nothing, so a composition model on them is at chance."""

    def __init__(self, ws, constant: bool):
        from tests.compmap_factory import COLORS, SHAPES

        self.prims = [f"color:{c}" for c in COLORS] + [f"shape:{s}" for s in SHAPES]
        img = ws.read("images").to_pandas()
        self.names = {
            str(ws.resolve(t)): (f"color:{COLORS[int(lab)]}", f"shape:{s}")
            for t, lab, s in zip(img["thumbnail"], img["label"].fillna(0), img["shape"])
        }
        self.constant = constant

    def _onehot(self, names):
        v = np.zeros(len(self.prims))
        v[[self.prims.index(n) for n in names]] = 1
        return v

    def encode_text(self, texts):
        by_value = {n.split(":")[1]: n for n in self.prims}  # the factory's prompt is "a VALUE"
        return np.stack([self._onehot([by_value[t[2:]]]) for t in texts])

    def encode_images(self, paths):
        if self.constant:
            return np.ones((len(paths), len(self.prims)))
        return np.stack([self._onehot(self.names[str(p)]) for p in paths])


def _compmap_ws(root, images=None) -> Workspace:
    from tests.compmap_factory import write_compmap
    from tests.factory import make_workspace

    ws = make_workspace(root, n_images=36, n_checkpoints=1)
    write_compmap(ws)
    if images is not None:
        img = images(ws.read("images").to_pandas())
        ws.write("images", pa.Table.from_pandas(img, schema=ws.read("images").schema, preserve_index=False))
    return ws


def _run_compmap(ws, monkeypatch, constant: bool, **opts):
    from conceptlens.analysis import compmap

    monkeypatch.setattr(compmap, "load_vl", lambda w, row: FakeVL(w, constant))
    opts = {"episodes": 3, "ways": [2], "shots": [1], "queries": 2, **opts}
    return runner.run(ws.root, "compmap", opts, progress_bars=False)


def test_compmap_run_uses_the_datasets_labelled_images_and_every_setting(tmp_path, monkeypatch):
    """Activations for the labelled images of the VL model's dataset only (an unlabelled
    image and another dataset's image are left out); a score row per `ways` asked; the
    few-shot `prim` model trained on the (uninformative) activations is at chance, exactly
    1/ways (one prediction for identical inputs), while the oracle on the ground truth is
    right. Catches the dataset/label filter dropped, the first `ways` used for every one,
    and the activations and ground truth swapped in the episodes."""

    def extra(img):
        add = img.iloc[[0, 1]].copy()
        add["image_id"] = ["toy-9998", "zz-other"]
        add.loc[add.index[0], "label"] = None
        add.loc[add.index[1], "dataset"] = "other"
        return pd.concat([img, add])

    ws = _compmap_ws(tmp_path / "ws", extra)
    _run_compmap(ws, monkeypatch, True, ways=[2, 3])
    img = ws.read("images").to_pandas()
    want = img[(img["dataset"] == "toy") & img["label"].notna()]["image_id"]
    act = ws.read("compmap_activations", vl_model="vl-toy").to_pandas()
    assert sorted(set(act["image_id"])) == sorted(want) and len(act) == 5 * len(want)
    s = ws.read("compmap_scores", vl_model="vl-toy").to_pandas()
    few = s[s["shots"] > 0]
    assert set(few["ways"]) == {2, 3}
    acc = few[few["metric"] == "accuracy"].set_index(["model", "ways"])["value"]
    for ways in (2, 3):
        assert acc["prim", ways] == pytest.approx(1 / ways)
        assert acc["oracle", ways] == pytest.approx(1.0)


def test_compmap_run_with_every_image_in_train(tmp_path, monkeypatch):
    """Every image in the train split: no full-shot score, the models fitted on every image
    for their weights (each class' largest weight is its colour), episodes drawn from all
    images. Catches `np.ones(n, bool)` given its arguments the other way round."""
    from tests.compmap_factory import COLORS

    def all_train(img):
        return img.assign(split="train")

    ws = _compmap_ws(tmp_path / "ws", all_train)
    _run_compmap(ws, monkeypatch, False)
    s = ws.read("compmap_scores", vl_model="vl-toy").to_pandas()
    assert set(s["shots"]) == {1}
    w = ws.read("compmap_weights", vl_model="vl-toy").to_pandas()
    assert len(w) == 2 * 3 * 5
    top = w.loc[w.groupby(["model", "label"])["weight"].idxmax()]
    assert all(p == f"color:{COLORS[c]}" for c, p in zip(top["label"], top["primitive"]))


def test_compmap_notes_the_first_class_without_ground_truth(tmp_path, monkeypatch):
    """Classes with no label_primitives row: the note counts them and names the first in
    order. Catches the sort reversed."""
    from tests.compmap_factory import COLORS

    ws = _compmap_ws(tmp_path / "ws")
    _write(
        ws,
        "label_primitives",
        [{"label": 0, "label_name": "red", "primitive": f"color:{COLORS[0]}", "value": 1.0}],
        dataset="toy",
    )
    ctx = _run_compmap(ws, monkeypatch, False)
    assert any("2 class(es) of toy have no row" in n and "e.g. label 1" in n for n in ctx.notes), ctx.notes


# ---- concepts --------------------------------------------------------------------------------
def test_probes_predict_each_true_concept_of_its_own(tmp_path):
    """Without declared concepts a checkpoint gets one probe per true concept, fitted on that
    concept: probe j separates concept j (AUC > 0.9 on the images, sklearn's roc_auc_score).
    Catches every probe fitted on the first concept."""
    from sklearn.metrics import roc_auc_score

    from conceptlens.analysis.concepts import Truth, probe_concepts
    from tests.concepts_factory import concept_workspace

    ws = concept_workspace(tmp_path / "ws", n=90, levels=(0.0,))
    truth = Truth(Context(ws, progress=False), "toy-d0.00")
    rng = np.random.default_rng(0)
    X = truth.C + 0.3 * rng.standard_normal(truth.C.shape)
    out = probe_concepts(X, truth, 0)
    assert len(out) == len(truth.names) >= 2
    for j in range(len(truth.names)):
        assert roc_auc_score(truth.C[:, j], out[j][:, 0]) > 0.9, truth.names[j]


def test_nis_area_is_over_the_public_grid_only(tmp_path):
    """nis_area is the area (trapezoid over the range) of the mean NIS per beta of the public
    grid CQ.BETAS, computed here from the written niche_scores rows; a niche_beta off the grid
    (0.27, where a niche changes) adds a curve point that must not enter it. Catches the
    `isin(CQ.BETAS)` filter dropped."""
    from conceptlens.metrics import concepts as CQ
    from tests.concepts_factory import concept_workspace

    ws = concept_workspace(tmp_path / "ws", n=90, levels=(0.0,))
    cid = "vae-toy-d0.00-s0"
    opts = {"concept_seeds": 1, "niche_beta": 0.27, "purity_steps": 5}
    runner.run(ws.root, "concepts", opts, checkpoint=cid, progress_bars=False, with_dependencies=False)
    curve = ws.read("niche_scores", checkpoint_id=cid).to_pandas()
    at = curve[np.isclose(curve["beta"], 0.27)]["nis"].mean()
    lo, hi = (curve[np.isclose(curve["beta"], b)]["nis"].mean() for b in (0.25, 0.3))
    assert not np.isclose(at, (lo * 3 + hi * 2) / 5)  # the extra point bends the curve: it would show
    on_grid = curve[np.isclose(curve["beta"].to_numpy()[:, None], np.array(CQ.BETAS)[None, :]).any(axis=1)]
    grid = on_grid.groupby("beta")["nis"].mean()
    b, v = grid.index.to_numpy(), grid.to_numpy()
    want = np.sum((v[1:] + v[:-1]) / 2 * np.diff(b)) / (b[-1] - b[0])
    got = ws.read("concept_scores", checkpoint_id=cid).to_pandas()["nis_area"]
    assert got.to_numpy() == pytest.approx([want])


# ---- learning_curves ----------------------------------------------------------------------------
def test_per_class_rows_are_each_classes_own():
    """A factor's per-value rows: one per value, each with its own test count (a hand count
    of the test split) and its own AUC. Catches the first class reported for every class."""
    from conceptlens.analysis.learning_curves import checkpoint_rows

    n = 40
    rng = np.random.default_rng(0)
    y = np.array(["a", "b", "c", "a"] * (n // 4), dtype=object)
    centres = {"a": [1.0, 0, 0], "b": [0, 1.0, 0], "c": [0, 0, 1.0]}
    X = np.array([centres[v] for v in y]) + 0.2 * rng.standard_normal((n, 3))
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    meta = pd.DataFrame({"split": ["test" if i % 3 == 0 else "train" for i in range(n)]})
    rows = checkpoint_rows(
        [f"i{i}" for i in range(n)],
        Xn,
        meta,
        (3, None),
        {"f": pd.Series(y)},
        {"seed": 0, "curve_boot": 20},
    )
    per = [r for r in rows if r["value"] is not None]
    test = y[meta["split"].to_numpy() == "test"]
    assert sorted(r["value"] for r in per) == ["a", "b", "c"]
    for r in per:
        assert r["n_positive"] == int((test == r["value"]).sum())
    assert len({r["n_positive"] for r in per}) > 1  # the counts differ, so a reused class shows


# ---- cluster_captions ---------------------------------------------------------------------------
def test_describability_only_for_clusters_with_a_caption(tmp_path, monkeypatch):
    """Describability scores the clusters that have a caption: only their captions go to the
    VL model, a cluster without one keeps empty describability columns, the others get
    theirs. Catches the `caption is not None` filter dropped. (Captioning stubbed: cluster 1
    has none; the VL model is a stand-in.)"""
    import conceptlens.vl as vl
    from conceptlens.analysis import cluster_captions as cc
    from conceptlens.analysis.base import Unit
    from tests.test_dataflow_analysis_a import build, write_clusters

    texts_seen = []

    class Fake:
        def encode_images(self, paths):
            return np.array([[1.0, float(p.name.split(".")[0]) % 3, 0.5] for p in paths])

        def encode_text(self, texts):
            texts_seen.extend(texts)
            assert all(isinstance(t, str) for t in texts), texts
            return np.array([[1.0, float(len(t) % 3), 0.5] for t in texts])

    monkeypatch.setattr(vl.VLModel, "from_workspace", classmethod(lambda cls, root, ds: Fake()))
    monkeypatch.setattr(
        cc, "caption_columns", lambda ctx, ids, labels, k, opts: {"caption": ["c0", None, "cc2"]}
    )
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], n=9)
    write_clusters(ws, "a", 3)
    ctx = Context(ws, progress=False)
    ctx._small["vl_models"] = pd.DataFrame({"dataset": ["toy"], "vl_model_id": ["v"]})
    opts = {**cc.ANALYSIS.option_defaults(), "describability": True}
    cc._run(ctx, Unit({"checkpoint_id": "a", "k": 3}, "a"), opts)
    assert texts_seen == ["c0", "cc2"]
    out = ws.read("cluster_captions", checkpoint_id="a", k=3).to_pandas().set_index("cluster")
    assert out.loc[1, "describability_hits"] is None or pd.isna(out.loc[1, "describability_hits"])
    assert out.loc[[0, 2], "describability_hits"].notna().all()


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
