"""conceptlens/analysis/common.py: file footprints, factor columns, captioner choice, trials, cached
embeddings and the errors for missing inputs. Each test is written against a data-flow bug (issue
29; tools/dataflow_mutants.py): a filter not applied, the first element used for every one, two
arguments swapped, a sort the wrong way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens.analysis import by_name, common, runner
from conceptlens.analysis.base import EVERYTHING
from conceptlens.analysis.common import Context, factor_matrix, pick_captioner
from conceptlens.workspace import Workspace
from tests.helpers_analysis_workspace import build, ctx_of


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


# ---- factor columns, captioner choice and missing inputs -----------------------------------------
def test_factor_matrix_standardises_numbers_and_one_hots_the_rest():
    df = pd.DataFrame(
        {
            "image_id": ["a", "b", "c", "d"],
            "label": [3, 1, 3, 2],  # a number, yet a category
            "size": [1.0, 2.0, 3.0, 2.0],  # three values: a number
            "flip": [0, 1, 0, 1],  # two values: a category
            "empty": [None, None, None, None],  # no values: left out
        }
    )
    A, cols = factor_matrix(df)
    assert cols == ["label", "size", "flip"]
    z = (np.array([1.0, 2, 3, 2]) - 2) / np.std([1.0, 2, 3, 2])
    # label one-hot (1, 2, 3), then size standardised, then flip one-hot (0, 1).
    np.testing.assert_allclose(A[:, :3], [[0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 0]])
    np.testing.assert_allclose(A[:, 3], z, rtol=1e-6)
    np.testing.assert_allclose(A[:, 4:], [[1, 0], [0, 1], [1, 0], [0, 1]])


def test_factor_matrix_without_factors_is_empty():
    A, cols = factor_matrix(pd.DataFrame({"image_id": ["a", "b"], "label": [None, None]}))
    assert A.shape == (2, 0) and cols == []


def test_captioner_choice_prefers_the_vl_model_with_most_captions():
    def caps(**n):
        return pd.DataFrame({"captioner": [c.replace("_", ":") for c, k in n.items() for _ in range(k)]})

    assert pick_captioner(caps(groundtruth=9, blip=5, vl_a=2, vl_b=3)) == "vl:b"
    assert pick_captioner(caps(groundtruth=9, blip=2, git=4)) == "git"
    assert pick_captioner(caps(groundtruth=1)) == "groundtruth"
    assert pick_captioner(pd.DataFrame({"captioner": []})) is None and pick_captioner(None) is None


def test_sentence_embeddings_use_the_model_asked_for_once_per_text(monkeypatch):
    import conceptlens.text
    from conceptlens.analysis.common import Context

    calls = []

    def embed(texts, model=None):
        calls.append((list(texts), model))
        return np.eye(len(texts), 4, dtype=np.float32)

    monkeypatch.setattr(conceptlens.text, "embed_sentences", embed)
    ctx = Context(None, progress=False)  # no workspace read: the texts are given
    got = ctx.sentence_embeddings(np.array(["a cat", "a dog", "a cat"]), "my/model")
    assert calls == [(["a cat", "a dog"], "my/model")]
    np.testing.assert_array_equal(got, np.eye(2, 4)[[0, 1, 0]])


def test_a_clustering_that_lacks_an_image_of_the_features_is_named(factory_copy):
    import pyarrow as pa
    import pytest

    from conceptlens.analysis.common import Context
    from conceptlens.workspace import Workspace, WorkspaceError

    ws = Workspace(factory_copy)
    t = ws.read("clusters", checkpoint_id="ck0", k=4)
    first = sorted(t["image_id"].to_pylist())[0]
    keep = [i != first for i in t["image_id"].to_pylist()]
    names = [f.name for f in t.schema if f.name not in ("checkpoint_id", "k")]
    ws.write("clusters", t.filter(pa.array(keep)).select(names), checkpoint_id="ck0", k=4)
    with pytest.raises(WorkspaceError, match=rf"lacks 1 image\(s\) of the features, e\.g\. '{first}'"):
        Context(ws, progress=False).clusters("ck0", 4)


def test_missing_features_name_their_partition_folder(factory_copy):
    import pytest

    from conceptlens.analysis.common import Context
    from conceptlens.workspace import Workspace, WorkspaceError

    ws = Workspace(factory_copy)
    folder = ws.partition_dir("features", checkpoint_id="nope")
    assert str(folder).endswith("features/checkpoint_id=nope")
    with pytest.raises(WorkspaceError, match=f"^{folder}: features of checkpoint 'nope' are missing"):
        Context(ws, progress=False).read_features("nope")
