"""The `compmap` analysis (conceptlens/analysis/compmap.py): its helpers on hand-built inputs and a run
end to end with a stand-in VL model. Each test is written against a data-flow bug (issue 29;
tools/dataflow_mutants.py): a filter not applied, the first element used for every one, two
arguments swapped, a sort the wrong way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.base import EVERYTHING
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
        _vl_rows(ctx, {"vl": ["vl-z", "vl-a", "vl-0"]}, EVERYTHING)


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
    from harness.factory import make_workspace
    from tests.compmap_factory import write_compmap

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
