"""Sequences across depth as well as time (issue 27 items 5-6): what a sequence is from the
checkpoint table's run, epoch, layer and depth; concept events and learning curves along a
hand-built depth sequence; saved selections' learning curves (item 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens.analysis.base import EVERYTHING, Scope, run_checkpoints, run_units, sequences
from conceptlens.analysis.common import Context
from conceptlens.analysis.runner import missing, run
from conceptlens.metrics import selection as S
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from harness.factory import factor_workspace, make_workspace
from tests.test_training_analyses import N, _hand_built, _summary, _write_clusters
from tests.training_factory import add_depth_sequence

# toy-run: ck2 (epoch 1) -> ck1 (2) -> ck0 (3), the default embedding. Its layers at epoch 3:
# toy-l0 (blocks.0, depth 0) -> toy-l1 (blocks.1, depth 1) -> ck0 (the embedding, depth 2).
LAYERS = {"toy-l0": ("ck2", "blocks.0", 0), "toy-l1": ("ck1", "blocks.1", 1)}


@pytest.fixture(scope="module")
def depth_ws(tmp_path_factory) -> Workspace:
    ws = make_workspace(tmp_path_factory.mktemp("depth") / "ws", n_images=N, n_checkpoints=3)
    add_depth_sequence(ws, LAYERS, run="toy-run", epoch=3, base="ck0")
    ids = sorted(ws.read("images")["image_id"].to_pylist())
    before, after = _hand_built()
    # The training run keeps its own clusterings: ck2 == ck1 == ck0 up to relabelling.
    _write_clusters(ws, "ck2", ids, after)
    _write_clusters(ws, "ck1", ids, after)
    _write_clusters(ws, "ck0", ids, np.array([7, 3, 9, 0, 1, 2, 4, 5, 6, 8])[after])
    # Along depth: toy-l0 -> toy-l1 holds the known split, merge, birth and death.
    _write_clusters(ws, "toy-l0", ids, before)
    _write_clusters(ws, "toy-l1", ids, after)
    run(ws.root, ["concept_events"], progress_bars=False, with_dependencies=False)
    return ws


def test_units_are_the_training_run_and_the_depth_sequence(depth_ws):
    ctx = Context(depth_ws, progress=False)
    assert [u.label for u in run_units(ctx, {}, EVERYTHING)] == [
        "dataset=toy/run=toy-run",
        "dataset=toy/run=toy-run@depth.e3",
    ]
    seqs = {s.name: s for s in sequences(ctx)}
    # The training sequence is the default embedding's (layer null): the layers stay out.
    assert list(seqs["toy-run"].checkpoints["checkpoint_id"]) == ["ck2", "ck1", "ck0"]
    assert seqs["toy-run"].axis == "epoch" and seqs["toy-run"].axis_name == "epoch"
    d = seqs["toy-run@depth.e3"]
    assert (d.axis, d.axis_name, d.run, d.at) == ("depth", "layer", "toy-run", 3)
    assert list(d.checkpoints["checkpoint_id"]) == ["toy-l0", "toy-l1", "ck0"]
    assert list(d.checkpoints["order"]) == [0, 1, 2]
    assert list(d.checkpoints["layer"]) == ["blocks.0", "blocks.1", None]
    # The function other analyses call: ordered ids with their order value and the axis.
    from conceptlens.analysis.base import Unit

    rc = run_checkpoints(ctx, Unit({"dataset": "toy", "run": "toy-run@depth.e3"}))
    assert list(rc["checkpoint_id"]) == ["toy-l0", "toy-l1", "ck0"] and list(rc["order"]) == [0, 1, 2]
    assert rc.attrs["axis"] == "depth"
    # Asked for one layer checkpoint: only its depth sequence.
    assert [u.label for u in run_units(ctx, {}, Scope(checkpoint="toy-l0"))] == [
        "dataset=toy/run=toy-run@depth.e3"
    ]


def test_depth_events_found_and_nothing_else(depth_ws):
    t = depth_ws.read("concept_events", dataset="toy", run="toy-run@depth.e3").to_pandas()
    assert set(t["axis"]) == {"depth"}
    step1 = t[t["step"] == 1]
    assert set(step1["checkpoint_from"]) == {"toy-l0"} and set(step1["checkpoint_to"]) == {"toy-l1"}
    assert (set(step1["epoch_from"]), set(step1["epoch_to"])) == ({0}, {1})
    assert (set(step1["layer_from"]), set(step1["layer_to"])) == ({"blocks.0"}, {"blocks.1"})
    kinds = sorted(k for k, *_ in _summary(step1) if k != "continuation")
    assert kinds == ["birth", "death", "merge", "split"]
    found = {(k, b, a) for k, b, a in _summary(step1) if k != "continuation"}
    assert found == {
        ("split", (0,), (0, 3)),
        ("merge", (1, 2), (1,)),
        ("death", (3,), ()),
        ("birth", (), (2,)),
    }
    # toy-l1 -> ck0 is a relabelling: continuations only, to the embedding (layer null).
    step2 = t[t["step"] == 2]
    assert set(step2["kind"]) == {"continuation"} and step2["layer_to"].isna().all()
    assert set(step2["epoch_to"]) == {2}


def test_training_run_unit_unchanged_by_the_layers(depth_ws):
    t = depth_ws.read("concept_events", dataset="toy", run="toy-run").to_pandas()
    assert set(t["axis"]) == {"epoch"} and set(t["kind"]) == {"continuation"}
    assert set(t["checkpoint_from"]) | set(t["checkpoint_to"]) == {"ck2", "ck1", "ck0"}
    assert missing(depth_ws.root, ["concept_events"])["concept_events"] == []
    assert [p for p in validate(depth_ws.root) if "concept_events" in str(p) or "checkpoints" in str(p)] == []


def test_extract_depth_recorded_and_derived(tmp_path):
    """`extract --layer X` stores the layer's position in the model's module order as depth,
    `--depth N` overrides it."""
    from conceptlens.extract import module_depth

    torch = pytest.importorskip("torch")
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3))
    assert [module_depth(m, n) for n in ("0", "1", "2")] == [0, 1, 2]
    with pytest.raises(ValueError, match="not a module"):
        module_depth(m, "3")


# ---- learning curves over depth, and of saved selections ----------------------------------------
@pytest.fixture(scope="module")
def curves_depth_ws(tmp_path_factory) -> Workspace:
    """factor_workspace's three checkpoints (noise 0.05, 0.3, 1.5) as the layers of one
    network without epochs, the noisiest shallowest: depth 0 = toy-ckpt2, 2 = toy-ckpt0;
    a saved selection `squares` (the images of one shape) and `noise` (a random set)."""
    from conceptlens import selections

    ws = factor_workspace(tmp_path_factory.mktemp("curves-depth") / "ws", n=240)
    ck = ws.read("checkpoints").to_pandas()
    ck["run"] = "net"
    ck["layer"] = ck["checkpoint_id"].map({"toy-ckpt2": "b0", "toy-ckpt1": "b1", "toy-ckpt0": None})
    ck["depth"] = ck["checkpoint_id"].map({"toy-ckpt2": 0, "toy-ckpt1": 1, "toy-ckpt0": 2}).astype("int64")
    ck["epoch"] = pd.array([None] * len(ck), dtype="Int64")
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    img = ws.read("images").to_pandas()
    shape = sorted(set(img["shape"]))[0]
    selections.save(ws.root, "one shape", "toy", img.loc[img["shape"] == shape, "image_id"].tolist(), "test")
    rnd = np.random.default_rng(0).choice(img["image_id"], 40, replace=False).tolist()
    selections.save(ws.root, "noise", "toy", rnd, "test")
    run(ws.root, ["learning_curves"], {"curve_boot": 50}, progress_bars=False, with_dependencies=False)
    return ws


def test_learning_curves_along_depth(curves_depth_ws):
    t = curves_depth_ws.read("learning_curves", dataset="toy", run="net@depth").to_pandas()
    assert set(t["axis"]) == {"depth"}
    assert set(zip(t["checkpoint_id"], t["epoch"])) == {("toy-ckpt2", 0), ("toy-ckpt1", 1), ("toy-ckpt0", 2)}
    assert set(t.loc[t["checkpoint_id"] == "toy-ckpt2", "layer"]) == {"b0"}
    shape = t[(t["factor"] == "shape") & t["value"].isna()].sort_values("epoch")
    assert shape["auc"].iloc[2] > shape["auc"].iloc[0]  # less noise deeper
    for _, g in t.groupby(["factor", t["value"].fillna("")]):
        g = g.sort_values("epoch")
        first = g.loc[g["learned"], "epoch"]
        expected = first.iloc[0] if len(first) else None
        got = g["learned_at"].iloc[0]
        assert (None if pd.isna(got) else got) == expected
    label = t[(t["factor"] == "label") & t["value"].isna()].sort_values("epoch")
    assert label["accuracy"].iloc[2] > label["accuracy"].iloc[0]  # 12 labels: the noise shows


def test_saved_selection_curves_equal_the_selection_score(curves_depth_ws):
    t = curves_depth_ws.read("learning_curves", dataset="toy", run="net@depth").to_pandas()
    sel = t[t["factor"] == "saved selection"]
    assert set(sel["value"]) == {"one shape", "noise"}
    ctx = Context(curves_depth_ws, progress=False)
    img = curves_depth_ws.read("images").to_pandas()
    ids, Xn = ctx.normalized("toy-ckpt0")
    meta = ctx.image_meta(ids)
    members = set(img.loc[img["shape"] == sorted(set(img["shape"]))[0], "image_id"])
    rows = np.array([n for n, i in enumerate(ids) if i in members])
    ref = S.Scorer(S.Population(Xn, meta["label"].to_numpy(np.int64)), rows, n_null=0, nulls=()).run(
        bootstrap=50
    )
    ref = next(r for r in ref["scores"] if r["score"] == "learnability")
    got = sel[(sel["value"] == "one shape") & (sel["checkpoint_id"] == "toy-ckpt0")].iloc[0]
    assert got["auc"] == pytest.approx(ref["value"]) and got["auc_lo"] == pytest.approx(ref["lo"])
    # One shape is learnable at the deepest layer; a random set is not at any depth.
    assert got["learned"] and got["auc"] > 0.9
    noise = sel[sel["value"] == "noise"]
    assert not noise["learned"].any() and noise["learned_at"].isna().all()
    assert noise["auc"].between(0.3, 0.7).all()
    assert [p for p in validate(curves_depth_ws.root) if "learning_curves" in str(p)] == []


def test_a_newly_saved_selection_makes_the_unit_due(curves_depth_ws, tmp_path):
    import shutil

    from conceptlens import selections

    root = tmp_path / "copy"
    shutil.copytree(curves_depth_ws.root, root)
    assert missing(root, ["learning_curves"])["learning_curves"] == []
    img = Workspace(root).read("images").to_pandas()
    selections.save(root, "first ten", "toy", img["image_id"].tolist()[:10], "test")
    assert missing(root, ["learning_curves"])["learning_curves"] == ["dataset=toy/run=net@depth"]


# ---- views, figures and the page's tables on a depth sequence ----------------------------------
def test_views_and_figures_name_the_layers(depth_ws, curves_depth_ws):
    from components.training_section import event_table, learned_table, sequence_label
    from conceptlens.db import WorkspaceDB
    from conceptlens.figures.training import event_timeline, learning_curves
    from conceptlens.views import training as T

    db = WorkspaceDB(depth_ws.root)
    assert T.runs(db, "toy") == ["toy-run", "toy-run@depth.e3"]  # training runs first
    assert (T.axis("toy-run"), T.axis("toy-run@depth.e3")) == ("epoch", "depth")
    ep = T.epochs(db, "toy", "toy-run@depth.e3")
    assert list(ep["checkpoint_id"]) == ["toy-l0", "toy-l1", "ck0"] and list(ep["epoch"]) == [0, 1, 2]
    assert list(ep["tick"]) == ["blocks.0", "blocks.1", "embedding"]
    # The training run's own checkpoints: the layers at epoch 3 are not among them.
    assert list(T.epochs(db, "toy", "toy-run")["checkpoint_id"]) == ["ck2", "ck1", "ck0"]
    ev = T.events(db, "toy", "toy-run@depth.e3")
    fig = event_timeline(ev, ep, axis="depth")
    assert fig.layout.xaxis.title.text == "layer (input → output)"
    assert list(fig.layout.xaxis.ticktext) == ["blocks.0", "blocks.1", "embedding"]
    assert "depth 0 → 1" in next(t for t in fig.data if t.name == "split").text[0]
    table = event_table(ev, "depth", dict(zip(ep["epoch"], ep["tick"])))
    assert set(table["layers"]) == {"blocks.0 → blocks.1"}
    assert sequence_label("toy-run@depth.e3") == "toy-run: layers by depth (epoch 3)"
    assert sequence_label("toy-run") == "toy-run: training, by epoch"

    db2 = WorkspaceDB(curves_depth_ws.root)
    curves = T.curves(db2, "toy", "net@depth", factor=None)
    fig = learning_curves(curves, by="factor", axis="depth")
    assert fig.layout.xaxis.title.text == "layer (input → output)"
    assert list(fig.layout.xaxis.ticktext) == ["b0", "b1", "embedding"]
    assert "saved selection" in T.factors(db2, "toy", "net@depth")
    ticks = dict(zip(*(T.epochs(db2, "toy", "net@depth")[c] for c in ("epoch", "tick"))))
    lt = learned_table(T.learned(db2, "toy", "net@depth"), "depth", ticks)
    assert "learned at layer" in lt.columns
    assert set(lt["learned at layer"].dropna()) <= {"b0", "b1", "embedding"}


def test_baselines_rerun_a_layer_checkpoint_through_its_layer(tmp_path):
    """Alignment, rotation and transfer embed images again: for a layer's checkpoint they
    must go through that layer (its 32 channels), not the default 64-d embedding."""
    torch = pytest.importorskip("torch")
    from conceptlens.analysis import baselines
    from conceptlens.demo import encoders as E
    from conceptlens.workspace import sha256_file

    ws = make_workspace(tmp_path / "ws", n_images=20, n_checkpoints=1)
    torch.manual_seed(0)
    model = E.ConvEncoder(in_size=32, width=8)
    path = ws.root / "models" / "enc.pt"
    path.parent.mkdir(exist_ok=True)
    E.save_weights(
        path, model, {"in_size": 32, "width": 8}, {"size": 32, "mean": [0.5] * 3, "std": [0.5] * 3}
    )
    ck = ws.read("checkpoints").to_pandas()
    base = {**ck.iloc[0].to_dict(), "source": E.ENCODER_SPEC, "weights": "models/enc.pt"}
    base["weights_sha256"] = sha256_file(path)
    rows = [
        {**base, "checkpoint_id": "enc-d1", "layer": "features.5", "depth": 1},
        {**base, "checkpoint_id": "enc", "layer": None, "depth": 2},
    ]
    ws.write("checkpoints", pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False))
    ctx = Context(ws, progress=False)
    x = torch.zeros(2, 3, 32, 32)
    assert tuple(baselines._load_model(ctx, "enc-d1").embed(x).shape) == (2, 16)  # features.5: 2 x width
    assert tuple(baselines._load_model(ctx, "enc").embed(x).shape) == (2, 64)


def test_the_demo_holds_its_depth_sequences_analysed(demo_ws):
    """The committed demo: the shapes encoder's layers and EfficientNet-Lite0's stages are
    depth sequences whose events and curves are stored, and the shapes training run is
    still the three SimCLR checkpoints by epoch."""
    ws = Workspace(demo_ws)
    seqs = {(s.dataset, s.name): s for s in sequences(Context(ws, progress=False))}
    shapes = seqs["shapes", "shapes-simclr@depth.e20"]
    assert list(shapes.checkpoints["layer"]) == [
        "features.2",
        "features.5",
        "features.8",
        "features.11",
        None,
    ]
    assert list(seqs["shapes", "shapes-simclr"].checkpoints["order"]) == [1, 5, 20]
    for ds in ("fashion", "clipart"):
        s = seqs[ds, "imagenet-tf_efficientnet_lite0@depth"]
        assert list(s.checkpoints["checkpoint_id"])[-1] == f"{ds}-effnet-lite0"
    for ds, name in (
        ("shapes", "shapes-simclr@depth.e20"),
        ("clipart", "imagenet-tf_efficientnet_lite0@depth"),
    ):
        t = ws.read("learning_curves", dataset=ds, run=name).to_pandas()
        assert set(t["axis"]) == {"depth"} and set(t["epoch"]) == {0, 1, 2, 3, 4}
        assert set(ws.read("concept_events", dataset=ds, run=name).to_pandas()["axis"]) == {"depth"}
    # The shapes encoder loses shape in its last block (docs/analysis.md): AUC falls.
    t = ws.read("learning_curves", dataset="shapes", run="shapes-simclr@depth.e20").to_pandas()
    shape = t[(t["factor"] == "shape") & t["value"].isna()].set_index("epoch")["auc_hi"]
    low = t[(t["factor"] == "shape") & t["value"].isna()].set_index("epoch")["auc_lo"]
    assert shape[3] < low[2]  # disjoint intervals: features.11 below features.8
