"""Data flow of `conceptlens analyze similarity` (issue 29, items 1 and 2): the embedding
is fitted on the non-catch train trials only, refitted when those change, and the human
alignment scores follow the fit and the features they were computed from.

The factory workspace's 40 hand-written trials (tests/similarity_factory.py), one
dimensionality, two members, 20 epochs: a fit takes about a second."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws

OPTS = {"dims": [2], "members": 2, "screen_members": 2, "max_epochs": 20, "n_boot": 20, "batch_trials": 512}


def analyse(root, **extra):
    return runner.run(root, "similarity", {**OPTS, **extra}, with_dependencies=False, progress_bars=False)


def embedding(root) -> np.ndarray:
    t = Workspace(root).read("psych_embedding", dataset="toy").to_pandas().sort_values(["member", "image_id"])
    return np.stack(t["mu"].to_numpy())


def fit(root):
    return Workspace(root).read("similarity_fit", dataset="toy").to_pandas().set_index(["dim", "member"])


def alignment(root):
    t = Workspace(root).read("human_alignment", dataset="toy").to_pandas()
    return t.sort_values(["checkpoint_id", "metric", "distance", "label"]).reset_index(drop=True)


def add_trials(root, change, n=8):
    """Append `n` copies of existing train trials, each changed by `change(row, i)`."""
    ws = Workspace(root)
    rows = ws.read("similarity_trials", dataset="toy").drop_columns(["dataset"]).to_pylist()
    train = [r for r in rows if r["split"] == "train" and not r["is_catch"]]
    new = [change({**train[i % len(train)], "trial_id": f"new{i:03d}"}, i) for i in range(n)]
    ws.append(
        "similarity_trials",
        pa.Table.from_pylist(new, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )


def other_choice(r, i):
    """The same screen, other references chosen (what a catch trial's careless answer looks like)."""
    refs = r["references"]
    return {**r, "chosen": [x for x in refs if x not in r["chosen"]][: r["n_select"]]}


@pytest.fixture(scope="module")
def fitted(factory_template, tmp_path_factory):
    root = copy_ws(factory_template, tmp_path_factory.mktemp("sim") / "ws")
    analyse(root)
    assert runner.missing(root, ["similarity"])["similarity"] == []
    return root


@pytest.fixture
def ws(fitted, tmp_path):
    return copy_ws(fitted, tmp_path / "ws")


def test_new_train_trials_refit_the_embedding(ws):
    """Trials appended: the unit is due and the embedding is fitted again on them (its
    values change, and the fit counts the new trials). Catches a refit decided on a
    fingerprint read before the new trials, or on the first file of the partition only."""
    before, n_before = embedding(ws), fit(ws)["n_train"].iloc[0] + fit(ws)["n_heldout"].iloc[0]
    add_trials(ws, other_choice)
    assert runner.missing(ws, ["similarity"])["similarity"] == ["dataset=toy"]
    analyse(ws)
    f = fit(ws)
    assert (f["n_train"] + f["n_heldout"] == n_before + 8).all()
    assert not np.allclose(embedding(ws), before)
    assert runner.missing(ws, ["similarity"])["similarity"] == []


def test_catch_trials_leave_the_fit_unchanged(ws):
    """Catch trials appended (answered at random): the trials changed, so the unit runs
    again, but the fit is the same to the last bit, and so are the alignment scores.
    Catches catch trials entering the embedding fit, its held-out split or the scores."""
    before, f0, a0 = embedding(ws), fit(ws), alignment(ws)
    add_trials(ws, lambda r, i: {**other_choice(r, i), "is_catch": True})
    analyse(ws)
    np.testing.assert_array_equal(embedding(ws), before)
    cols = ["n_train", "n_heldout", "heldout_loglik", "heldout_accuracy", "test_loglik"]
    np.testing.assert_array_equal(fit(ws)[cols].to_numpy(float), f0[cols].to_numpy(float))
    np.testing.assert_array_equal(alignment(ws)["value"].to_numpy(float), a0["value"].to_numpy(float))


def test_test_split_trials_are_scored_not_fitted(ws):
    """Trials of split `test` appended: the embedding is the same (they are not fitted),
    the test log-likelihood moves (they are scored). Catches the split filter dropped."""
    before, f0 = embedding(ws), fit(ws)
    add_trials(ws, lambda r, i: {**other_choice(r, i), "split": "test"})
    analyse(ws)
    np.testing.assert_array_equal(embedding(ws), before)
    assert (fit(ws)["n_train"] == f0["n_train"]).all()
    assert not np.allclose(fit(ws)["test_loglik"].to_numpy(float), f0["test_loglik"].to_numpy(float))


def test_a_scoring_option_rescores_without_refitting(ws):
    """--n-boot changes the alignment intervals, not the fit: the embedding file is not
    rewritten. Catches a fit keyed on every option (a refit for nothing) or a score
    reused although its options changed."""
    emb = Workspace(ws).table_path("psych_embedding", dataset="toy")
    stamp = emb.stat().st_mtime_ns, emb.stat().st_ino
    a0 = alignment(ws)
    analyse(ws, n_boot=60)
    assert (emb.stat().st_mtime_ns, emb.stat().st_ino) == stamp
    a1 = alignment(ws)
    np.testing.assert_allclose(a1["value"].to_numpy(float), a0["value"].to_numpy(float))
    assert not np.allclose(a1["lo"].to_numpy(float), a0["lo"].to_numpy(float), equal_nan=True)


def test_one_checkpoints_new_features_rescore_it_and_no_other(ws):
    """ck1's features replaced: ck1's alignment is scored again from them; the others'
    rows are kept, the embedding is not refitted."""
    w = Workspace(ws)
    emb = w.table_path("psych_embedding", dataset="toy")
    stamp = emb.stat().st_mtime_ns, emb.stat().st_ino
    a0 = alignment(ws)
    f = w.read("features", checkpoint_id="ck0").drop_columns(["checkpoint_id"])
    w.write("features", f, checkpoint_id="ck1")  # ck1 now has ck0's features
    assert runner.missing(ws, ["similarity"])["similarity"] == ["dataset=toy"]
    analyse(ws)
    assert (emb.stat().st_mtime_ns, emb.stat().st_ino) == stamp
    a1 = alignment(ws)
    key = ["metric", "distance", "label"]
    ck0 = a1[a1.checkpoint_id == "ck0"].set_index(key)["value"].sort_index()
    ck1 = a1[a1.checkpoint_id == "ck1"].set_index(key)["value"].sort_index()
    np.testing.assert_allclose(ck1.to_numpy(float), ck0.to_numpy(float))
    old1 = a0[a0.checkpoint_id == "ck1"].set_index(key)["value"].sort_index()
    assert not np.allclose(ck1.to_numpy(float), old1.to_numpy(float))
    rest = a1[a1.checkpoint_id != "ck1"].reset_index(drop=True)
    assert rest.equals(a0[a0.checkpoint_id != "ck1"].reset_index(drop=True))


# ---- convergence: the same trials, fitted share by share -------------------------------------------
CONV = {"rounds": 2, "convergence_members": 2, "max_epochs": 10}


def converge(root):
    runner.run(root, "convergence", {**OPTS, **CONV}, with_dependencies=False, progress_bars=False)
    t = Workspace(root).read("similarity_convergence", dataset="toy").to_pandas()
    return t.sort_values("round").reset_index(drop=True)


def test_catch_trials_leave_the_convergence_curves_unchanged(ws):
    """Catch trials appended: convergence is due (its trials changed) and its curves are
    the same; train trials appended instead: the shares count them and the loss moves.
    Catches catch trials entering the convergence shares or loss, and a result kept
    although the trials changed."""
    before = converge(ws)
    add_trials(ws, lambda r, i: {**other_choice(r, i), "is_catch": True})
    assert runner.missing(ws, ["convergence"])["convergence"] == ["dataset=toy"]
    after = converge(ws)
    cols = ["n_trials", "coarse_loss", "within_agreement", "across_agreement"]
    np.testing.assert_array_equal(after[cols].to_numpy(float), before[cols].to_numpy(float))
    add_trials(ws, other_choice)
    more = converge(ws)
    assert more["n_trials"].iloc[-1] == before["n_trials"].iloc[-1] + 8


def test_a_clone_keeps_units_done_and_a_legacy_mtime_fingerprint_counts_as_done(fitted, tmp_path):
    """The fingerprint is the files' footprint, not their modification times: a copy whose
    files all have new mtimes (what a git clone gives) has nothing due; and a unit written
    before 2.3, fingerprinted by mtimes that no copy keeps, is not reported stale for ever."""
    import os
    import shutil

    root = shutil.copytree(fitted, tmp_path / "clone", copy_function=shutil.copyfile)  # new mtimes
    for p in (root / "features").rglob("*.parquet"):
        os.utime(p, ns=(1, 1))
    assert runner.missing(root, ["similarity"])["similarity"] == []
    w = Workspace(root)
    t = w.read("human_alignment", dataset="toy")
    md = w.read_metadata("human_alignment", dataset="toy")
    legacy = {k: v for k, v in md.items() if k != "inputs_scheme"} | {"inputs": "an mtime-era hash"}
    w.write("human_alignment", t.drop_columns(["dataset"]), metadata=legacy, dataset="toy")
    assert runner.missing(root, ["similarity"])["similarity"] == []
    # The same legacy hash with the scheme marked is a fingerprint of today: stale.
    w.write(
        "human_alignment", t.drop_columns(["dataset"]), metadata={**legacy, "inputs_scheme": 2}, dataset="toy"
    )
    assert runner.missing(root, ["similarity"])["similarity"] == ["dataset=toy"]
