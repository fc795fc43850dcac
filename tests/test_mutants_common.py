"""What mutation testing found untested in the analyses' shared helpers (tools/mutate.py,
conceptlens/analysis/common.py): the proxy annotator's factor matrix and the captioner choice."""

from __future__ import annotations

import numpy as np
import pandas as pd

from conceptlens.analysis.common import factor_matrix, pick_captioner


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
