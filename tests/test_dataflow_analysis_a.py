"""Data flow of the analysis framework (issue 29): base.py (which checkpoints, clusterings and
sequences are units), runner.py (options given vs stored, the log, missing and skipped
units, the Ray driver loop), common.py (fingerprints, factor columns, captioner choice,
caches), engines.py (grouping and the Ray scheduling loop, with a stand-in Ray), and the
analyses clustering, cluster_metrics, cluster_captions, baselines, aligned_projections.

Every workspace here is tiny and built by hand (a few images, 4-d features), so each test
reads a Context or runs one analysis in well under a second; the expected values are
worked out from how the workspace was built, not from a previous run's output.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import schema
from conceptlens.analysis import base, by_name, common, engines, runner
from conceptlens.analysis.base import EVERYTHING, Option, Scope, Unit
from conceptlens.analysis.common import Context
from conceptlens.workspace import Workspace
from tests.factory import write_features

# ---- a hand-built workspace -------------------------------------------------------------
CK_FIELDS = [f for f in schema.arrow_schema("checkpoints")]


def build(root, checkpoints: list[dict], datasets=("toy",), n=8, labels=None, features=None, dim=4, seed=0):
    """Images `n` per dataset (ids `<ds>-<i>`, labels i % 2 unless given, split train/test
    alternating), one features file per checkpoint (unless its id is in `features` False),
    and a checkpoints table with the columns the dicts name."""
    rng = np.random.default_rng(seed)
    ws = Workspace.create(root, name="t", description="", provenance={}, created="2026-01-01T00:00:00+00:00")
    rows = []
    for ds in datasets:
        for i in range(n):
            rows.append(
                {
                    "image_id": f"{ds}-{i}",
                    "dataset": ds,
                    "label": (labels[ds][i] if labels else i % 2),
                    "label_name": None,
                    "split": "train" if i % 2 == 0 else "test",
                    "thumbnail": f"thumbnails/{ds}/{i}.png",
                    "width": 8,
                    "height": 8,
                }
            )
    ws.write("images", pa.Table.from_pylist(rows, schema=schema.arrow_schema("images")))
    cks = []
    for c in checkpoints:
        c = {
            "dataset": "toy",
            "model": "m",
            "method": "simclr",
            "feature_dim": dim,
            "source": "plain:toy",
            **c,
        }
        cks.append(c)
        if c.pop("_features", True):
            ids = [r["image_id"] for r in rows if r["dataset"] == c["dataset"]]
            write_features(ws, c["checkpoint_id"], ids, rng.normal(size=(len(ids), dim)))
    names = []
    for c in cks:
        names += [k for k in c if k not in names]
    fields = [f for f in schema.arrow_schema("checkpoints") if f.name in names]
    ws.write(
        "checkpoints",
        pa.Table.from_pylist([{k: c.get(k) for k in names} for c in cks], schema=pa.schema(fields)),
    )
    return ws


def ctx_of(ws) -> Context:
    return Context(ws, progress=False)


def write_clusters(ws, cid, k, labels=None):
    ids = ws.read("features", columns=["image_id"], checkpoint_id=cid)["image_id"].to_pylist()
    lab = np.arange(len(ids)) % k if labels is None else np.asarray(labels)
    ws.write(
        "clusters",
        pa.table({"image_id": ids, "cluster": lab.astype(np.int64), "distance": np.zeros(len(ids))}),
        checkpoint_id=cid,
        k=k,
    )


# ---- base.py: which checkpoints are units ------------------------------------------------
def test_checkpoints_with_features_leave_out_concept_models_featureless_and_unasked(tmp_path):
    ws = build(
        tmp_path / "ws",
        [
            {"checkpoint_id": "a"},
            {"checkpoint_id": "b", "concept_names": ["x", "y", "z", "w"]},
            {"checkpoint_id": "c", "_features": False},
            {"checkpoint_id": "d"},
        ],
    )
    ctx = ctx_of(ws)
    assert base.checkpoints_with_features(ctx, {}, EVERYTHING) == ["a", "d"]
    assert base.checkpoints_with_features(ctx, {}, Scope(checkpoint="d")) == ["d"]
    # Named, a concept model is clustered; a checkpoint without features never is.
    assert base.checkpoints_with_features(ctx, {}, Scope(checkpoint="b")) == ["b"]
    assert base.checkpoints_with_features(ctx, {}, Scope(checkpoint="c")) == []


def test_clustering_units_are_those_of_the_checkpoint_asked_for(tmp_path):
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}, {"checkpoint_id": "b"}])
    write_clusters(ws, "a", 2)
    write_clusters(ws, "b", 2)
    write_clusters(ws, "b", 3)
    ctx = ctx_of(ws)
    got = {(u.checkpoint_id, u.partition["k"]) for u in base.clustering_units(ctx, {}, EVERYTHING)}
    assert got == {("a", 2), ("b", 2), ("b", 3)}
    got = [(u.checkpoint_id, u.partition["k"]) for u in base.clustering_units(ctx, {}, Scope(checkpoint="b"))]
    assert sorted(got) == [("b", 2), ("b", 3)]


def test_sequence_k_is_the_k_most_checkpoints_of_the_sequence_have(tmp_path):
    ws = build(tmp_path / "ws", [{"checkpoint_id": c} for c in "abcd"])
    write_clusters(ws, "a", 2)  # one at 2
    for c in "bc":  # two at 3
        write_clusters(ws, c, 3)
    write_clusters(ws, "d", 4)
    write_clusters(ws, "d", 2)
    ctx = ctx_of(ws)
    # a:2, b:3, c:3, d:4 d:2 -> 2 twice, 3 twice: the smaller
    assert base.sequence_k(ctx, ["a", "b", "c", "d"], {}) == 2
    assert base.sequence_k(ctx, ["b", "c", "d"], {}) == 3
    assert base.sequence_k(ctx, ["d"], {}) == 2
    assert base.sequence_k(ctx, ["d"], {"sequence_k": 5}) == 5
    assert base.sequence_k(ctx, ["zz"], {}) is None


# ---- base.py: sequences -------------------------------------------------------------------
SEQ_CKS = [
    # run r1, default layer, epochs 5, 1, 3 (written out of order)
    {"checkpoint_id": "r1-e5", "run": "r1", "epoch": 5},
    {"checkpoint_id": "r1-e1", "run": "r1", "epoch": 1},
    {"checkpoint_id": "r1-e3", "run": "r1", "epoch": 3},
    # of run r1 too, without an epoch or a depth (a downloaded final model): in no sequence
    {"checkpoint_id": "r1-x", "run": "r1"},
    # run r1 at layer L: a training sequence of its own
    {"checkpoint_id": "r1-L-e1", "run": "r1", "epoch": 1, "layer": "L"},
    {"checkpoint_id": "r1-L-e2", "run": "r1", "epoch": 2, "layer": "L"},
    # run r0: a depth sequence at no epoch (depths 2, 0, 1), never a training sequence
    {"checkpoint_id": "r0-d2", "run": "r0", "depth": 2, "layer": "l2"},
    {"checkpoint_id": "r0-d0", "run": "r0", "depth": 0, "layer": "l0"},
    {"checkpoint_id": "r0-d1", "run": "r0", "depth": 1, "layer": "l1"},
    # run r5: a depth sequence at epoch 4 (each layer alone at its epoch: no training sequence)
    {"checkpoint_id": "r5-d1", "run": "r5", "epoch": 4, "depth": 1, "layer": "b"},
    {"checkpoint_id": "r5-d0", "run": "r5", "epoch": 4, "depth": 0, "layer": "a"},
    # no run: no sequence, even with epochs
    {"checkpoint_id": "free-1", "epoch": 1},
    {"checkpoint_id": "free-2", "epoch": 2},
    # a concept model of run r2: no sequence (r2 then has one checkpoint only)
    {"checkpoint_id": "r2-e1", "run": "r2", "epoch": 1},
    {"checkpoint_id": "r2-e2", "run": "r2", "epoch": 2, "concept_names": ["a", "b", "c", "d"]},
    # run r3 in dataset other
    {"checkpoint_id": "o-e1", "run": "r3", "epoch": 1, "dataset": "other"},
    {"checkpoint_id": "o-e2", "run": "r3", "epoch": 2, "dataset": "other"},
]


@pytest.fixture(scope="module")
def seq_ws(tmp_path_factory):
    return build(tmp_path_factory.mktemp("seq") / "ws", [dict(c) for c in SEQ_CKS], datasets=("toy", "other"))


def test_sequences_group_runs_layers_and_depths_in_order(seq_ws):
    ctx = ctx_of(seq_ws)
    got = [
        (s.dataset, s.name, s.axis, s.at, list(s.checkpoints["checkpoint_id"])) for s in base.sequences(ctx)
    ]
    assert got == [
        ("other", "r3", "epoch", None, ["o-e1", "o-e2"]),
        ("toy", "r0@depth", "depth", None, ["r0-d0", "r0-d1", "r0-d2"]),
        ("toy", "r1", "epoch", None, ["r1-e1", "r1-e3", "r1-e5"]),
        ("toy", "r1@layer=L", "epoch", "L", ["r1-L-e1", "r1-L-e2"]),
        ("toy", "r5@depth.e4", "depth", 4, ["r5-d0", "r5-d1"]),
    ]
    s = {s.name: s for s in base.sequences(ctx)}
    assert s["r1"].checkpoints["order"].tolist() == [1, 3, 5]
    assert s["r0@depth"].checkpoints["order"].tolist() == [0, 1, 2]
    assert s["r0@depth"].checkpoints["depth"].tolist() == [0, 1, 2]
    assert s["r0@depth"].checkpoints["epoch"].isna().all()
    assert s["r1"].checkpoints["epoch"].tolist() == [1, 3, 5]
    assert s["r1"].checkpoints["depth"].isna().all()
    assert [x.name for x in base.sequences(ctx, "other")] == ["r3"]
    assert [x.name for x in base.sequences(ctx, "toy")] == ["r0@depth", "r1", "r1@layer=L", "r5@depth.e4"]
    assert s["r5@depth.e4"].checkpoints["epoch"].tolist() == [4, 4]


def test_run_units_and_their_checkpoints(seq_ws):
    ctx = ctx_of(seq_ws)
    labels = [u.label for u in base.run_units(ctx, {}, EVERYTHING)]
    assert labels == [
        "dataset=other/run=r3",
        "dataset=toy/run=r0@depth",
        "dataset=toy/run=r1",
        "dataset=toy/run=r1@layer=L",
        "dataset=toy/run=r5@depth.e4",
    ]
    assert [u.label for u in base.run_units(ctx, {}, Scope(checkpoint="r1-e3"))] == ["dataset=toy/run=r1"]
    # Each unit's own sequence, not the dataset's first.
    ck = base.run_checkpoints(ctx, Unit({"dataset": "toy", "run": "r1@layer=L"}))
    assert ck["checkpoint_id"].tolist() == ["r1-L-e1", "r1-L-e2"] and ck.attrs["axis"] == "epoch"
    ck = base.run_checkpoints(ctx, Unit({"dataset": "toy", "run": "r1"}))
    assert ck["epoch"].tolist() == [1, 3, 5]
    # A unit whose sequence has gone: empty, of its own dataset and name.
    s = base.unit_sequence(ctx, Unit({"dataset": "toy", "run": "gone@depth.e4"}))
    assert (s.dataset, s.name, s.run, s.axis, s.at) == ("toy", "gone@depth.e4", "gone", "depth", 4)
    assert s.checkpoints.empty


# ---- base.py: options ----------------------------------------------------------------------
def test_an_option_checks_every_value_of_a_list_and_names_the_choices():
    k = Option("k", int, None, "", multiple=True, minimum=2)
    assert k.check([2, 5]) == [2, 5]
    with pytest.raises(ValueError, match=r"--k must be at least 2, got 1"):
        k.check([3, 1])
    c = Option("how", str, "a", "", choices=("a", 2))
    assert c.problem("b") == "must be one of a, 2, got 'b'"


def test_stored_options_fill_in_legacy_values_and_only_result_options():
    a = by_name()["cluster_metrics"]
    stored = a.stored_options(None)
    assert stored["bootstrap"] == 0  # legacy: units before 2.3 have no intervals
    assert stored["trials"] == 20 and stored["seed"] == 0
    assert all(v is not base.NO_LEGACY for v in stored.values())
    assert set(stored) == set(a.result_options(a.option_defaults()))
    c = by_name()["clustering"]
    assert "k" not in c.result_options(c.option_defaults())  # k chooses units only
    assert set(c.stored_options({})) == {"seed", "n_init", "kmeans"}


# ---- common.py ---------------------------------------------------------------------------
def _parquet(path, values, row_group_size):
    pq.write_table(
        pa.table({"a": pa.array(values[0], pa.float64()), "b": pa.array(values[1], pa.float64())}),
        path,
        row_group_size=row_group_size,
        use_dictionary=False,
        compression="NONE",
    )


def test_files_footprint_sees_every_file_row_group_and_column(tmp_path):
    """Two files of two row groups and two columns; a value changed in the second file, the
    second row group or the second column (same size: plain float64) changes the footprint."""
    base_vals = ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0])
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()

    def footprint(where, second):
        _parquet(tmp_path / where / "p0.parquet", base_vals, 2)
        _parquet(tmp_path / where / "p1.parquet", second, 2)
        return common.files_footprint([tmp_path / where / "p1.parquet", tmp_path / where / "p0.parquet"])

    same = footprint("x", base_vals)
    assert footprint("y", base_vals) == same  # a copy elsewhere: the same footprint
    assert footprint("y", ([1.0, 2.0, 3.0, 9.0], base_vals[1])) != same  # 2nd row group, column a
    assert footprint("y", (base_vals[0], [5.0, 6.0, 7.0, 9.0])) != same  # 2nd row group, column b
    assert footprint("y", (base_vals[0], [5.0, 9.0, 7.0, 8.0])) != same  # 1st row group, column b


@pytest.mark.parametrize("name", ["clustering", "concepts"])
def test_the_demos_stored_footprints_still_match(demo_ws, name):
    """The committed demo was analysed with files_footprint (concepts: of images.parquet and
    concept_labels.parquet together): its units are done. A footprint computed another way
    (the files hashed in another order...) would make every analysed workspace recompute
    everything after an upgrade."""
    ctx = Context(Workspace(demo_ws), progress=False)
    a = by_name()[name]
    units = a.units(ctx, a.option_defaults(), EVERYTHING)
    assert units
    assert runner.due(ctx, a, units[0]) is None


def test_factor_matrix_uses_label_and_factor_columns_only():
    df = pd.DataFrame(
        {
            "image_id": ["i0", "i1", "i2", "i3"],
            "dataset": ["d"] * 4,
            "label": [0, 1, 1, 0],
            "split": ["train", "test", "train", "test"],
            "thumbnail": ["t0", "t1", "t2", "t3"],
            "shape": ["sq", "ci", "ci", "sq"],
            "size": [1.0, 2.0, 3.0, 6.0],
            "empty": [None] * 4,
        }
    )
    A, cols = common.factor_matrix(df)
    assert cols == ["label", "shape", "size"]
    z = (np.array([1.0, 2.0, 3.0, 6.0]) - 3.0) / np.std([1.0, 2.0, 3.0, 6.0])
    want = np.column_stack([[1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1], z])
    np.testing.assert_allclose(A, want, rtol=1e-6)


@pytest.mark.parametrize(
    "counts, want",
    [
        ({"groundtruth": 9, "blip": 3}, "blip"),  # a model captioner, though ground truth has more
        ({"groundtruth": 9, "blip": 3, "vl:clip": 1}, "vl:clip"),  # a VL one first
        ({"groundtruth": 2, "blip": 3, "git": 5}, "git"),  # the model with most captions
        ({"groundtruth": 2}, "groundtruth"),
    ],
)
def test_pick_captioner_prefers_models_over_ground_truth(counts, want):
    caps = pd.DataFrame({"captioner": [c for c, n in counts.items() for _ in range(n)]})
    caps["image_id"] = [f"i{j}" for j in range(len(caps))]
    assert common.pick_captioner(caps) == want


def test_checkpoint_row_is_that_checkpoints(tmp_path):
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a", "epoch": 1}, {"checkpoint_id": "b", "epoch": 7}])
    ctx = ctx_of(ws)
    assert ctx.checkpoint_row("b")["epoch"] == 7
    assert ctx.checkpoint_row("a")["epoch"] == 1


class _TrialsWs:
    def __init__(self, trials):
        self.trials = trials

    def read(self, name, **part):
        return pa.Table.from_pandas(self.trials)

    def partition_dir(self, name, **part):
        return "similarity_trials/dataset=toy"


def _trials_ctx(trials):
    ctx = Context(_TrialsWs(trials), progress=False)
    ctx._small["images"] = pd.DataFrame(
        {"image_id": ["a", "b", "c", "d", "x"], "dataset": ["toy"] * 4 + ["other"]}
    )
    return ctx


def _trials(rows):
    return pd.DataFrame(rows, columns=["trial_id", "query", "references", "chosen", "n_select"])


def test_read_trials_checks_every_trial_and_the_dataset_of_every_image():
    ok = ["t0", "a", ["b", "c"], ["c"], 1]
    assert len(common.read_trials(_trials_ctx(_trials([ok])), "toy")) == 1
    bad = ["t1", "a", ["b", "c"], ["d"], 1]  # chosen not among the references: the 2nd trial
    with pytest.raises(Exception, match="t1"):
        common.read_trials(_trials_ctx(_trials([ok, bad])), "toy")
    other = ["t2", "a", ["b", "x"], ["b"], 1]  # x is an image of another dataset
    with pytest.raises(Exception, match="'x'"):
        common.read_trials(_trials_ctx(_trials([ok, other])), "toy")
    two = ["t3", "a", ["b", "x", "y"], ["b"], 1]  # the first unknown image, by id
    with pytest.raises(Exception, match="2 image.*e.g. 'x'"):
        common.read_trials(_trials_ctx(_trials([two])), "toy")


def test_encode_puts_the_query_the_chosen_then_the_others():
    t = _trials([["t0", "a", ["b", "c", "d"], ["d", "b"], 2], ["t1", "b", ["a", "c"], ["c"], 1]])
    idx = {"a": 0, "b": 1, "c": 2, "d": 3}
    S, k = common.encode(t, idx)
    assert S.tolist() == [[0, 3, 1, 2], [1, 2, 0, -1]]
    assert k.tolist() == [2, 1]


def test_sentence_embeddings_are_each_texts_own_and_computed_once(tmp_path, monkeypatch):
    import conceptlens.text as text

    calls = []

    def fake(texts, model=None):
        calls.append((list(texts), model))
        return np.array([[len(t), ord(t[0])] for t in texts], np.float32)

    monkeypatch.setattr(text, "embed_sentences", fake)
    ctx = Context(Workspace.__new__(Workspace), progress=False)
    E = ctx.sentence_embeddings(np.array(["ab", "c", "ab"], dtype=object), "m")
    assert E.tolist() == [[2, 97], [1, 99], [2, 97]]
    E = ctx.sentence_embeddings(np.array(["dddd", "c"], dtype=object), "m")
    assert E.tolist() == [[4, 100], [1, 99]]
    assert calls == [(["ab", "c"], "m"), (["dddd"], "m")]


def test_vl_image_embeddings_are_cached_per_image(tmp_path, monkeypatch):
    import conceptlens.vl as vl

    seen = []

    class Fake:
        def encode_images(self, paths):
            seen.append([p.name for p in paths])
            return np.array([[float(p.name[1:])] for p in paths])

        def encode_text(self, texts):
            return np.array([[float(len(t))] for t in texts])

    monkeypatch.setattr(vl.VLModel, "from_workspace", classmethod(lambda cls, root, ds: Fake()))
    ws = Workspace.create(
        tmp_path / "ws", name="t", description="", provenance={}, created="2026-01-01T00:00:00+00:00"
    )
    ctx = ctx_of(ws)
    ctx._small["vl_models"] = pd.DataFrame({"dataset": ["toy"]})
    meta = pd.DataFrame({"image_id": ["a", "b"], "thumbnail": ["t/i1", "t/i2"]})
    txt, img = ctx.vl_embeddings("toy", meta, ["xy"])
    assert txt.tolist() == [[2.0]] and img.tolist() == [[1.0], [2.0]]
    meta = pd.DataFrame({"image_id": ["c", "a"], "thumbnail": ["t/i3", "t/i1"]})
    _, img = ctx.vl_embeddings("toy", meta, ["xy"])
    assert img.tolist() == [[3.0], [1.0]]
    assert seen == [["i1", "i2"], ["i3"]]


# ---- runner.py -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_ds(tmp_path_factory):
    """Checkpoints a (toy) and b (other), 8 images each, nothing analysed."""
    return build(
        tmp_path_factory.mktemp("two") / "ws",
        [{"checkpoint_id": "a"}, {"checkpoint_id": "b", "dataset": "other"}],
        datasets=("toy", "other"),
    )


@pytest.fixture
def fresh(two_ds, tmp_path):
    from tests.conftest import copy_ws

    return Workspace(copy_ws(two_ds.root, tmp_path / "ws"))


def logged_options(ws, name):
    """The options of every analysis_runs row of `name`."""
    return [
        json.loads(o)
        for f in ws.partition_files("analysis_runs", analysis=name)
        for o in pq.read_table(f)["options"].to_pylist()
    ]


def test_a_run_logs_its_own_public_options_and_ignores_none(fresh):
    runner.run(fresh.root, ["clustering"], {"k": [2], "n_init": None, "trials": 30}, progress_bars=False)
    opts = logged_options(fresh, "clustering")
    assert len(opts) == 2
    assert sorted(map(tuple, (p.values() for p in fresh.partitions("clusters")))) == [("a", 2), ("b", 2)]
    assert runner.missing(fresh.root, ["clustering"]) == {"clustering": []}  # each unit computed, once
    for o in opts:
        assert o == {
            "seed": 0,
            "k": [2],
            "n_init": 3,
            "kmeans": "auto",
        }  # no _force, no other analysis' trials


def test_a_dataset_restricts_the_units_to_its_checkpoints(fresh):
    runner.run(fresh.root, ["clustering"], {"k": [2]}, dataset="other", progress_bars=False)
    assert fresh.partitions("clusters") == [{"checkpoint_id": "b", "k": 2}]


def test_run_arguments_are_all_checked(fresh):
    with pytest.raises(ValueError, match="--threads must be at least 1, got 0"):
        runner.run(fresh.root, ["clustering"], threads=0, progress_bars=False)
    with pytest.raises(ValueError, match=r"unknown option\(s\) aa, zz"):
        runner.run(fresh.root, ["clustering"], {"zz": 1, "aa": 2}, progress_bars=False)


def test_show_writes_a_list_option_as_its_values():
    assert runner._show([2, "x"]) == "2 x"
    assert runner._show(3) == "3"


def test_missing_lists_the_analyses_named_and_their_dependencies(fresh):
    got = runner.missing(fresh.root, ["cluster_captions"])
    assert got == {"clustering": ["checkpoint_id=a/k=3", "checkpoint_id=b/k=3"], "cluster_captions": []}
    names = [a.name for a in runner.in_order(["cluster_metrics", "baselines"])]
    assert names == ["clustering", "cluster_metrics", "baselines"]


def _log(ws, name, unit, started, status, reason=None):
    a = by_name()[name]
    runner.log_run(ws, a, Unit(unit), a.option_defaults(), None, started, 0.0, status=status, reason=reason)


def test_skipped_reports_each_analysis_latest_skip_of_a_unit_still_due(fresh):
    ws = fresh
    for cid in ("a", "b"):
        write_clusters(ws, cid, 2)
    ua, ub = {"checkpoint_id": "a", "k": 2}, {"checkpoint_id": "b", "k": 2}
    # cluster_captions: both units skipped, a's twice (the later reason counts), then b's done
    # in the log (but its file is missing: still due, and not a skip any more).
    _log(ws, "cluster_captions", ua, "2026-01-01T00:00:02", "skipped", "new")
    _log(ws, "cluster_captions", ua, "2026-01-01T00:00:01", "skipped", "old")
    _log(ws, "cluster_captions", ub, "2026-01-01T00:00:01", "skipped", "b first")
    _log(ws, "cluster_captions", ub, "2026-01-01T00:00:03", "done")
    # cluster_metrics: a done run only; its unit is due, but no skip.
    _log(ws, "cluster_metrics", ua, "2026-01-01T00:00:01", "done")
    # baselines: one skipped unit
    _log(ws, "baselines", {"checkpoint_id": "b"}, "2026-01-01T00:00:01", "skipped", "no model")
    assert runner.skipped(ws.root) == {
        "cluster_captions": {"checkpoint_id=a/k=2": "new"},
        "baselines": {"checkpoint_id=b": "no model"},
    }


def test_skipped_lists_every_unit_of_an_analysis(fresh):
    ws = fresh
    for cid in ("a", "b"):
        write_clusters(ws, cid, 2)
    _log(ws, "cluster_captions", {"checkpoint_id": "a", "k": 2}, "2026-01-01T00:00:01", "skipped", "ra")
    _log(ws, "cluster_captions", {"checkpoint_id": "b", "k": 2}, "2026-01-01T00:00:01", "skipped", "rb")
    assert runner.skipped(ws.root) == {
        "cluster_captions": {"checkpoint_id=a/k=2": "ra", "checkpoint_id=b/k=2": "rb"}
    }


def test_log_rows_written_before_status_and_reason_read_as_done(fresh):
    d = fresh.root / "analysis_runs" / "analysis=clustering"
    d.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "unit": ["checkpoint_id=a/k=2"],
                "inputs": ["x"],
                "options": ["{}"],
                "version": ["2.0"],
                "started": ["2026-01-01T00:00:00"],
                "seconds": [1.0],
            }
        ),
        d / "old.parquet",
    )
    assert runner.last_runs(fresh) == {
        ("clustering", "checkpoint_id=a/k=2"): {"status": "done", "reason": None}
    }


def test_the_ray_driver_logs_each_result_and_passes_on_every_note(fresh, monkeypatch):
    """run_ray stood in for by the task body run in this process (engines.run_group) plus
    two notes per result: both units written and logged, every note kept once."""
    import dataclasses

    def fake_run_ray(root, name, units, opts, scope, workers, threads):
        for r in engines.run_group(str(root), name, units, opts, scope, threads or 1):
            yield dataclasses.replace(r, notes=(f"{r.unit.label} one", f"{r.unit.label} two", "shared"))

    monkeypatch.setattr(runner, "run_ray", fake_run_ray)
    ctx = runner.run(fresh.root, ["clustering"], {"k": [2, 3]}, engine="ray", progress_bars=False)
    assert sorted(map(tuple, (p.values() for p in fresh.partitions("clusters")))) == [
        ("a", 2),
        ("a", 3),
        ("b", 2),
        ("b", 3),
    ]
    assert runner.missing(fresh.root, ["clustering"]) == {"clustering": []}
    for u in ("checkpoint_id=a/k=2", "checkpoint_id=b/k=3"):
        assert f"{u} one" in ctx.notes and f"{u} two" in ctx.notes
    assert ctx.notes.count("shared") == 1
    assert len(logged_options(fresh, "clustering")) == 4


# ---- engines.py ----------------------------------------------------------------------------
def test_groups_keep_each_checkpoints_units_together_in_order():
    us = [
        Unit({"checkpoint_id": "a", "k": 2}, "a"),
        Unit({"checkpoint_id": "b", "k": 2}, "b"),
        Unit({"dataset": "toy", "run": "r"}),
        Unit({"checkpoint_id": "a", "k": 3}, "a"),
        Unit({"dataset": "toy", "run": "s"}),
    ]
    got = [[u.label for u in g] for g in engines.groups(us)]
    assert got == [
        ["checkpoint_id=a/k=2", "checkpoint_id=a/k=3"],
        ["checkpoint_id=b/k=2"],
        ["dataset=toy/run=r"],
        ["dataset=toy/run=s"],
    ]


def _fake_ray(die_after: dict):
    """A stand-in for Ray: a task yields one Result per unit of its group, except that the
    task of a group whose first unit is in `die_after` dies after that many results."""
    ray = types.ModuleType("ray")
    calls = {"wait": 0}

    def task_body(root, name, group, opts, scope, threads):
        n = die_after.get(group[0].label)
        for i, u in enumerate(group):
            if n is not None and i == n:
                raise RuntimeError("worker died\nsecond line")
            yield engines.Result(u, f"in-{u.label}", "t", 0.0)

    class Remote:
        def remote(self, *args):
            return task_body(*args)

    def wait(refs, num_returns=1):
        calls["wait"] += 1
        if calls["wait"] > 200:
            raise AssertionError("run_ray loops: a finished task is never dropped")
        return refs[:1], refs[1:]

    ray.is_initialized = lambda: True
    ray.cluster_resources = lambda: {"CPU": 2}
    ray.remote = lambda **kw: lambda fn: Remote()
    ray.wait = wait
    ray.get = lambda x: x
    return ray


def test_run_ray_reports_every_unit_once_even_when_a_task_dies(monkeypatch):
    us = [Unit({"checkpoint_id": c, "k": k}, c) for c in "ab" for k in (2, 3, 4)]
    monkeypatch.setitem(sys.modules, "ray", _fake_ray({"checkpoint_id=b/k=2": 1}))
    out = list(engines.run_ray("/nowhere", "clustering", us, {}, EVERYTHING, workers=1))
    got = sorted((r.unit.label, r.inputs, r.error) for r in out)
    boom = "its Ray task failed: RuntimeError: worker died"
    assert got == [
        ("checkpoint_id=a/k=2", "in-checkpoint_id=a/k=2", None),
        ("checkpoint_id=a/k=3", "in-checkpoint_id=a/k=3", None),
        ("checkpoint_id=a/k=4", "in-checkpoint_id=a/k=4", None),
        ("checkpoint_id=b/k=2", "in-checkpoint_id=b/k=2", None),
        ("checkpoint_id=b/k=3", None, boom),
        ("checkpoint_id=b/k=4", None, boom),
    ]


# ---- clustering.py -------------------------------------------------------------------------
def test_without_k_each_checkpoint_keeps_its_own_ks(tmp_path):
    ws = build(tmp_path / "ws", [{"checkpoint_id": c} for c in "abc"])
    write_clusters(ws, "a", 4)
    write_clusters(ws, "a", 2)
    write_clusters(ws, "b", 5)
    a = by_name()["clustering"]
    got = [u.label for u in a.units(ctx_of(ws), {**a.option_defaults(), "k": None}, EVERYTHING)]
    # a: its two k's in order; b: its own; c (never clustered): round(sqrt(8)) = 3
    assert got == ["checkpoint_id=a/k=2", "checkpoint_id=a/k=4", "checkpoint_id=b/k=5", "checkpoint_id=c/k=3"]


# ---- cluster_captions.py -------------------------------------------------------------------
def _hash_vec(key: str, dim: int = 6) -> np.ndarray:
    import hashlib

    seed = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).normal(size=dim)


@pytest.fixture
def fake_text(monkeypatch):
    import conceptlens.text as text

    monkeypatch.setattr(
        text, "embed_sentences", lambda texts, model=None: np.stack([_hash_vec("t:" + t) for t in texts])
    )


def _caption_ctx(tmp_path):
    """Checkpoint a of 8 images, clusters [0,0,0,0,1,1,1,1]. Captions: `blip` for images 0-6
    (image 7 has none), ground truth for all (written after blip's), and `git` with more
    captions than any, but of images this checkpoint does not have."""
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], datasets=("toy", "far"))
    ids = [f"toy-{i}" for i in range(8)]
    rows = [(i, "blip", f"blip {i}") for i in ids[:7]]
    rows += [(i, "groundtruth", f"gt {i}") for i in ids]
    rows += [(f"far-{j % 8}", "git", f"git {j}") for j in range(20)]
    caps = pa.Table.from_pylist(
        [{"image_id": i, "captioner": c, "text": t} for i, c, t in rows],
        schema=schema.arrow_schema("captions"),
    )
    ctx = ctx_of(ws)
    ctx._small["captions"] = caps.to_pandas()
    return ws, ctx, np.array(ids, dtype=object), np.array([0, 0, 0, 0, 1, 1, 1, 1])


def test_cluster_captions_come_from_the_chosen_captioner_and_each_clusters_images(tmp_path, fake_text):
    from conceptlens.analysis import cluster_captions as cc

    ws, ctx, ids, labels = _caption_ctx(tmp_path)
    out = cc.caption_columns(ctx, ids, labels, 2, {"sentence_model": None, "rouge_ablation": True, "seed": 0})
    assert out["caption_source"] == ["blip", "blip"]
    own = {0: {f"blip toy-{i}" for i in range(4)}, 1: {f"blip toy-{i}" for i in range(4, 7)}}
    for col in ("caption", "caption_noneg", "caption_rouge"):
        for c in (0, 1):
            assert out[col][c] in own[c], (col, c, out[col][c])
            assert out[col + "_score"][c] is not None


def test_describability_self_is_judged_on_the_checkpoints_own_datasets_vl_model(tmp_path):
    from conceptlens.analysis import cluster_captions as cc

    ws = build(tmp_path / "ws", [{"checkpoint_id": "a", "weights_sha256": "s1"}])
    ctx = ctx_of(ws)
    ctx._small["vl_models"] = pd.DataFrame(
        {
            "dataset": ["other", "toy"],
            "spec": ["x", "y"],
            "weights": [None, None],
            "weights_sha256": ["s1", "s2"],
        }
    )
    assert cc.describability_self(ctx, "a", "toy") is False
    ctx._small["vl_models"] = pd.DataFrame(
        {
            "dataset": ["other", "toy"],
            "spec": ["x", "y"],
            "weights": [None, None],
            "weights_sha256": ["s2", "s1"],
        }
    )
    assert cc.describability_self(ctx, "a", "toy") is True
    # Without hashes: the same weights file and the same spec.
    ws = build(tmp_path / "ws2", [{"checkpoint_id": "a", "weights": "w.pt", "source": "plain:toy"}])
    ctx = ctx_of(ws)
    ctx._small["vl_models"] = pd.DataFrame(
        {"dataset": ["toy"], "spec": ["open_clip:A"], "weights": ["w.pt"], "weights_sha256": [None]}
    )
    assert cc.describability_self(ctx, "a", "toy") is False
    ctx._small["vl_models"]["spec"] = ["plain:toy"]
    assert cc.describability_self(ctx, "a", "toy") is True


def test_vl_is_checkpoint_needs_the_same_spec_without_hashes():
    from conceptlens.analysis.cluster_captions import vl_is_checkpoint

    ck = {"weights": "w.pt", "source": "open_clip:A"}
    assert vl_is_checkpoint(ck, {"weights": "w.pt", "spec": "open_clip:A"})
    assert not vl_is_checkpoint(ck, {"weights": "w.pt", "spec": "open_clip:B"})
    assert not vl_is_checkpoint(ck, {"weights": "v.pt", "spec": "open_clip:A"})


# ---- cluster_metrics.py --------------------------------------------------------------------
def test_purity_counts_the_classes_of_the_checkpoints_own_dataset(tmp_path):
    """Toy has 2 classes, `other` 4 (and an unlabelled image): purity's K is 2."""
    labels = {"toy": [0, 1, 0, 1, 0, 1, 0, 1], "other": [0, 1, 2, 3, 0, 1, 2, None]}
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], datasets=("toy", "other"), labels=labels)
    write_clusters(ws, "a", 2, [0, 0, 0, 1, 1, 1, 1, 1])
    a = by_name()["cluster_metrics"]
    opts = {**a.option_defaults(), "bootstrap": 0, "refs": 1}
    a.run(ctx_of(ws), Unit({"checkpoint_id": "a", "k": 2}, "a"), opts, EVERYTHING)
    m = ws.read("cluster_metrics", checkpoint_id="a", k=2).to_pandas().set_index("cluster")

    def purity(p):
        p = np.asarray(p)
        return 1 + (p * np.log(p)).sum() / np.log(2)

    assert m.loc[0, "purity"] == pytest.approx(purity([2 / 3, 1 / 3]))  # labels 0 1 0
    assert m.loc[1, "purity"] == pytest.approx(purity([2 / 5, 3 / 5]))  # labels 1 0 1 0 1
    assert m["size"].tolist() == [3, 5]


def _fake(name, depends=(), units=()):
    return base.Analysis(
        name=name,
        title=name,
        writes=("clusters",),
        units=lambda ctx, opts, scope: list(units),
        run=lambda c, u, o, s: None,
        depends=depends,
    )


@pytest.fixture
def diamond(monkeypatch):
    """x needs y and z, which both need w; z has a unit never computed."""
    fake = {
        "w": _fake("w"),
        "y": _fake("y", ("w",)),
        "z": _fake("z", ("w",), [Unit({"checkpoint_id": "a", "k": 9}, "a")]),
        "x": _fake("x", ("y", "z")),
    }
    monkeypatch.setattr(runner, "by_name", lambda: fake)
    return fake


def test_in_order_visits_every_dependency_once_dependencies_first(diamond):
    assert [a.name for a in runner.in_order(["x"])] == ["w", "y", "z", "x"]
    assert [a.name for a in runner.in_order(["y", "z"])] == ["w", "y", "z"]


def test_without_dependencies_a_run_says_which_dependency_is_not_done(diamond, fresh):
    ctx = runner.run(fresh.root, ["x"], with_dependencies=False, progress_bars=False)
    assert any(n.startswith("x: `z` is not done everywhere") for n in ctx.notes), ctx.notes


# ---- baselines.py: its helpers (no model) ---------------------------------------------------
from conceptlens.analysis import baselines as BL  # noqa: E402


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


# ---- aligned_projections.py (UMAP stood in for by the first two coordinates) --------------------
def test_aligned_frames_are_each_checkpoints_own_on_the_shared_images(tmp_path, monkeypatch):
    from conceptlens.analysis import aligned_projections as ap
    from conceptlens.metrics import l2_normalize

    monkeypatch.setattr(ap, "_umap", lambda X, nn, md, seed: np.asarray(X[:, :2], np.float64))
    cks = [{"checkpoint_id": f"e{e}", "run": "r", "epoch": e} for e in (3, 1, 2)]
    ws = build(tmp_path / "ws", cks)
    rng = np.random.default_rng(7)
    write_features(ws, "e3", [f"toy-{i}" for i in range(1, 8)], rng.normal(size=(7, 4)))  # no toy-0
    a = by_name()["aligned_projections"]
    unit = Unit({"dataset": "toy", "run": "r"})
    opts = {**a.option_defaults(), "align": "procrustes"}
    a.run(ctx_of(ws), unit, opts, EVERYTHING)
    t = ws.read("aligned_projections", dataset="toy", run="r").to_pandas()
    keep = [f"toy-{i}" for i in range(1, 8)]
    prev = None
    for step, e in enumerate((1, 2, 3)):
        f = t[t["step"] == step]
        assert set(f["checkpoint_id"]) == {f"e{e}"} and set(f["epoch"]) == {e}
        assert f["image_id"].tolist() == keep
        ids, X = ctx_of(ws).features(f"e{e}")
        Xn = l2_normalize(X)[[list(ids).index(i) for i in keep]][:, :2].astype(np.float64)
        want = Xn - Xn.mean(axis=0) if prev is None else ap.procrustes_onto(Xn, prev)
        np.testing.assert_allclose(f[["x", "y"]].to_numpy(), want, rtol=1e-5, atol=1e-6)
        if prev is not None:
            np.testing.assert_allclose(
                f["drift"].to_numpy(float), np.linalg.norm(want - prev, axis=1), rtol=1e-5, atol=1e-6
            )
        prev = want
    # A later checkpoint's features rewritten: the unit is due.
    ctx = ctx_of(ws)
    assert runner.due(ctx, a, unit) is None
    write_features(ws, "e3", keep, rng.normal(size=(7, 4)))
    assert runner.due(ctx_of(ws), a, unit) == "inputs changed"


def test_a_run_with_dependencies_runs_each_analysis_in_order(monkeypatch, fresh):
    fake = {n: _fake(n, d) for n, d in (("w", ()), ("y", ("w",)), ("z", ("w",)), ("x", ("y", "z")))}
    monkeypatch.setattr(runner, "by_name", lambda: fake)
    ctx = runner.run(fresh.root, ["x"], progress_bars=False)
    assert ctx.notes == [f"{n}: nothing to analyse" for n in "wyzx"]
