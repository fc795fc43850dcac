"""The `concept_events` and `learning_curves` analyses (issue 27) end to end on tiny
workspaces whose right answer is known by construction: hand-built clusterings with one
split, one merge, one birth and one death (and nothing else), and features whose
separability of each factor is planted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sklearn.metrics import roc_auc_score

from conceptlens import schema
from conceptlens.analysis.runner import missing, run
from conceptlens.metrics import learning as L
from conceptlens.metrics.learnability import weighted_knn_predict
from conceptlens.metrics.scores import purity
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from harness.factory import factor_workspace, make_workspace

N, K = 400, 10


def _hand_built() -> tuple[np.ndarray, np.ndarray]:
    """Two clusterings of 400 images (10 clusters of 40 before) with exactly one split
    (0 -> 0, 3), one merge (1, 2 -> 1), one death (3: its images spread over 6 clusters,
    under 20% of it in any) and one birth (2: 5 images from each of 6 clusters); 4..9
    continue."""
    before = np.repeat(np.arange(K), 40)
    after = before.copy()
    members = {c: np.flatnonzero(before == c) for c in range(K)}
    after[members[0][20:]] = 3  # split: half of 0 becomes 3
    after[members[2]] = 1  # merge: 1 and 2 become 1
    after[members[3]] = np.resize([4, 5, 6, 7, 8, 9], 40)  # death: 6 or 7 images each
    for c in range(4, 10):  # birth: 2 takes 5 images of each of 4..9
        after[members[c][:5]] = 2
    return before, after


def _write_clusters(ws: Workspace, cid: str, ids, labels, k: int = K) -> None:
    ws.write(
        "clusters",
        pa.table(
            {"image_id": list(ids), "cluster": np.asarray(labels, np.int64), "distance": np.zeros(len(ids))},
            schema=schema.arrow_schema("clusters", partition=False),
        ),
        checkpoint_id=cid,
        k=k,
    )


def test_a_class_absent_from_the_evaluation_has_nan_and_no_console_warning():
    """A class with no image among those evaluated (or in any resample) has a NaN AUC and
    interval, said by the result: numpy's "All-NaN slice" warning is not printed (issue 47);
    the other classes and the macro mean over them are unchanged by it."""
    import warnings

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 30)  # classes 0 and 1 present, 2 absent
    shares = rng.dirichlet(np.ones(3), size=30)
    res = L.bootstrap_indices(30, 200, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = L.bootstrap_auc(y, shares, np.array([0, 1, 2]), res)
        two = L.bootstrap_auc(y, shares[:, :2], np.array([0, 1]), res)
    assert np.isnan(b["auc"][2]) and np.isnan(b["lo"][2]) and np.isnan(b["hi"][2])
    assert np.array_equal(b["auc"][:2], two["auc"]) and b["macro"] == pytest.approx(two["macro"])
    assert np.array_equal(b["lo"][:2], two["lo"]) and np.array_equal(b["hi"][:2], two["hi"])


@pytest.fixture(scope="module")
def events_ws(tmp_path_factory) -> Workspace:
    # Run `toy-run`: ck0 at epoch 3, ck1 at epoch 2, ck2 at epoch 1 (so ck2 -> ck1 -> ck0).
    ws = make_workspace(tmp_path_factory.mktemp("events") / "ws", n_images=N, n_checkpoints=3)
    ids = sorted(ws.read("images")["image_id"].to_pylist())
    before, after = _hand_built()
    _write_clusters(ws, "ck2", ids, before)
    _write_clusters(ws, "ck1", ids, after)
    _write_clusters(ws, "ck0", ids, np.array([7, 3, 9, 0, 1, 2, 4, 5, 6, 8])[after])  # relabelled
    run(ws.root, ["concept_events"], progress_bars=False, with_dependencies=False)
    return ws


def _events(ws: Workspace) -> pd.DataFrame:
    return ws.read("concept_events", dataset="toy", run="toy-run").to_pandas()


def _summary(t: pd.DataFrame) -> list[tuple]:
    out = []
    for (_step, _e), g in t.groupby(["step", "event"]):
        out.append(
            (
                g["kind"].iloc[0],
                tuple(sorted(g.loc[g["side"] == "before", "cluster"])),
                tuple(sorted(g.loc[g["side"] == "after", "cluster"])),
            )
        )
    return sorted(out)


def test_known_split_merge_birth_death_found_and_nothing_else(events_ws):
    t = _events(events_ws)
    first = t[t["step"] == 1]
    assert set(first["checkpoint_from"]) == {"ck2"} and set(first["checkpoint_to"]) == {"ck1"}
    assert set(first["epoch_from"]) == {1} and set(first["epoch_to"]) == {2}
    assert [e for e in _summary(first) if e[0] != "continuation"] == [
        ("birth", (), (2,)),
        ("death", (3,), ()),
        ("merge", (1, 2), (1,)),
        ("split", (0,), (0, 3)),
    ]
    assert sorted(e for e in _summary(first) if e[0] == "continuation") == [
        ("continuation", (c,), (c,)) for c in range(4, 10)
    ]
    split = first[first["kind"] == "split"]
    assert split.set_index(["side", "cluster"])["size"].to_dict() == {
        ("before", 0): 40,
        ("after", 0): 20,
        ("after", 3): 20,
    }
    assert set(split["images"]) == {40}
    death = first[first["kind"] == "death"].iloc[0]
    assert death["share"] == 0 and death["best_share"] == pytest.approx(7 / 40)
    assert death["p_value"] is None or np.isnan(death["p_value"])


def test_relabelled_step_gives_continuations_only(events_ws):
    second = _events(events_ws).query("step == 2")
    assert set(second["kind"]) == {"continuation"}
    assert second["event"].nunique() == K
    assert set(second["epoch_from"]) == {2} and set(second["epoch_to"]) == {3}


def test_purity_and_top_label_as_computed_from_the_labels(events_ws):
    t = _events(events_ws)
    images = events_ws.read("images").to_pandas().sort_values("image_id")
    labels = images["label"].to_numpy()
    before, _ = _hand_built()
    row = t[(t["step"] == 1) & (t["kind"] == "split") & (t["side"] == "before")].iloc[0]
    p, top, share = purity(labels[before == 0], 3)
    assert row["purity"] == pytest.approx(p)
    assert row["top_label_share"] == pytest.approx(share)
    assert row["top_label"] == images.loc[images["label"] == top, "label_name"].iloc[0]
    assert set(t["min_share"]) == {0.2} and set(t["alpha"]) == {0.01}


def test_events_validate_and_are_done_until_an_option_changes(events_ws):
    assert [p for p in validate(events_ws.root) if "concept_events" in str(p)] == []
    assert missing(events_ws.root, ["concept_events"])["concept_events"] == []
    md = events_ws.read_metadata("concept_events", dataset="toy", run="toy-run")
    assert md["analysis_options"]["event_share"] == 0.2


def test_run_with_one_clustered_checkpoint_is_skipped_with_reason(tmp_path):
    ws = make_workspace(tmp_path / "ws", n_images=60, n_checkpoints=2)
    ids = sorted(ws.read("images")["image_id"].to_pylist())
    _write_clusters(ws, "ck0", ids, np.arange(60) % 4, k=4)
    run(ws.root, ["concept_events"], progress_bars=False, with_dependencies=False)
    assert not ws.has("concept_events")
    log = pd.concat(pd.read_parquet(f) for f in ws.files("analysis_runs"))
    log = log[log["analysis"] == "concept_events"] if "analysis" in log else log
    assert list(log["status"]) == ["skipped"]
    assert "1 of its 2 checkpoints are clustered at k = 4" in log["reason"].iloc[0]


def test_a_run_of_one_checkpoint_is_no_unit_until_a_second_arrives(tmp_path):
    """A run of one checkpoint is no sequence: no unit, nothing skipped (the demo's 17
    single-checkpoint runs were listed as skipped units on Home); a second checkpoint of
    that run makes its unit, due."""
    from conceptlens.analysis.base import EVERYTHING, Scope, run_units
    from conceptlens.analysis.common import Context

    ws = make_workspace(tmp_path / "ws", n_images=40, n_checkpoints=3)
    ck = ws.read("checkpoints").to_pandas()
    ck["run"] = ["solo", "pair", "pair"]
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    units = [u.label for u in run_units(Context(ws), {}, EVERYTHING)]
    assert units == ["dataset=toy/run=pair"]
    assert run_units(Context(ws), {}, Scope(checkpoint="ck0")) == []  # ck0 is the solo run's
    ck["run"] = ["pair", "pair", "pair"]
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    assert [u.label for u in run_units(Context(ws), {}, Scope(checkpoint="ck0"))] == ["dataset=toy/run=pair"]


# ---- learning curves -------------------------------------------------------------------------
def test_metrics_agree_with_references():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6))
    y = rng.integers(0, 3, 120)
    X[:, 0] += y * 1.5
    tr, te = np.arange(80), np.arange(80, 120)
    classes, shares = L.vote_shares(X[tr], y[tr], X[te])
    assert np.allclose(shares.sum(axis=1), 1)
    # The largest share is the weighted kNN's prediction.
    assert (classes[shares.argmax(axis=1)] == weighted_knn_predict(X[tr], y[tr], X[te])).all()
    for j, c in enumerate(classes):
        assert L.auc_rows(y[te] == c, shares[:, j])[0] == pytest.approx(
            roc_auc_score(y[te] == c, shares[:, j])
        )
    res = L.bootstrap_indices(40, 300, 1)
    b = L.bootstrap_auc(y[te], shares, classes, res)
    assert (b["lo"] <= b["auc"]).all() and (b["auc"] <= b["hi"]).all()
    assert b["macro"] == pytest.approx(np.mean(b["auc"]))
    # Best-matching cluster: brute force over clusters by F1.
    cl = rng.integers(0, 5, 120)
    has = y == 1
    c, prec, rec = L.best_cluster(cl, has)
    f1 = {k: 2 * (has & (cl == k)).sum() / ((cl == k).sum() + has.sum()) for k in range(5)}
    assert c == max(f1, key=lambda k: (f1[k], -k))
    assert prec == pytest.approx((has & (cl == c)).sum() / (cl == c).sum())
    assert rec == pytest.approx((has & (cl == c)).sum() / has.sum())
    assert L.learned_epochs([1, 5, 20, 40], [0.5, 0.95, 0.7, 0.95], 0.9) == (5, 20)
    assert L.learned_epochs([1, 5], [0.5, float("nan")], 0.9) == (None, None)
    assert L.learned_epochs([1, 5], [0.95, 0.95], 0.9) == (1, None)


@pytest.fixture(scope="module")
def curves_ws(tmp_path_factory) -> Workspace:
    """factor_workspace's three checkpoints (label = shape x colour, noise 0.05, 0.3, 1.5 at
    epochs 0, 1, 2) as one run, so the labels are learnable first and lost at the end."""
    ws = factor_workspace(tmp_path_factory.mktemp("curves") / "ws", n=240)
    ck = ws.read("checkpoints").to_pandas().assign(run="toy-run")
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    run(ws.root, ["learning_curves"], {"curve_boot": 50}, progress_bars=False, with_dependencies=False)
    return ws


def test_learning_curves_learned_then_lost(curves_ws):
    t = curves_ws.read("learning_curves", dataset="toy", run="toy-run").to_pandas()
    assert set(t["factor"]) == {"label", "shape", "color"}  # size is continuous: not a factor
    shape = t[(t["factor"] == "shape") & t["value"].isna()].sort_values("epoch")
    assert list(shape["epoch"]) == [0, 1, 2]
    assert shape["auc"].iloc[0] > 0.95 and shape["auc"].iloc[2] < shape["auc"].iloc[0]
    assert (shape["auc_lo"] <= shape["auc"]).all() and (shape["auc"] <= shape["auc_hi"]).all()
    assert set(shape["learned_at"]) == {0}
    lost = t.drop_duplicates(["factor", "value"])["lost_at"]
    assert set(lost.dropna()) <= {1, 2} and lost.notna().any()
    # learned == auc_lo > threshold, and learned_at is the first such epoch of each value.
    assert (t["learned"] == (t["auc_lo"] > 0.9)).all()
    for _, g in t.groupby(["factor", t["value"].fillna("")]):
        g = g.sort_values("epoch")
        first = g.loc[g["learned"], "epoch"]
        expected = first.iloc[0] if len(first) else None
        assert (None if pd.isna(g["learned_at"].iloc[0]) else g["learned_at"].iloc[0]) == expected


def test_learning_curve_auc_equals_sklearn_on_the_same_split(curves_ws):
    from conceptlens.analysis.common import Context
    from conceptlens.analysis.learning_curves import split

    ctx = Context(curves_ws, progress=False)
    ids, Xn = ctx.normalized("toy-ckpt1")
    meta = ctx.image_meta(ids)
    train, test = split(meta, 0)
    classes, shares = L.vote_shares(Xn[train], meta["color"].to_numpy()[train], Xn[test])
    t = curves_ws.read("learning_curves", dataset="toy", run="toy-run").to_pandas()
    row = t[(t["checkpoint_id"] == "toy-ckpt1") & (t["factor"] == "color") & (t["value"] == classes[0])]
    ref = roc_auc_score(meta["color"].to_numpy()[test] == classes[0], shares[:, 0])
    assert row["auc"].iloc[0] == pytest.approx(ref)
    assert [p for p in validate(curves_ws.root) if "learning_curves" in str(p)] == []


# ---- views and figures -------------------------------------------------------------------------
def test_views_events_images_and_timeline(events_ws):
    from conceptlens.db import WorkspaceDB
    from conceptlens.figures.training import event_timeline
    from conceptlens.views import training as T

    db = WorkspaceDB(events_ws.root)
    assert T.runs(db, "toy") == ["toy-run"]
    ev = T.events(db, "toy", "toy-run")
    assert sorted(zip(ev["kind"], map(tuple, ev["before"]), map(tuple, ev["after"]))) == [
        ("birth", (), (2,)),
        ("death", (3,), ()),
        ("merge", (1, 2), (1,)),
        ("split", (0,), (0, 3)),
    ]
    assert dict(zip(ev["kind"], ev["main"])) == {"split": 0, "merge": 1, "birth": 2, "death": 3}
    assert len(T.events(db, "toy", "toy-run", kinds=("continuation",))) == 6 + K
    before, after = _hand_built()
    ids = np.array(sorted(events_ws.read("images")["image_id"].to_pylist()))
    for kind, expected in (
        ("split", ids[before == 0]),  # all of 0 goes to 0 or 3
        ("merge", ids[np.isin(before, (1, 2))]),
        ("birth", ids[after == 2]),
        ("death", ids[before == 3]),
    ):
        e = ev[ev["kind"] == kind].iloc[0]
        got = T.event_images(db, "toy", "toy-run", e["step"], e["event"], limit=1000)
        assert sorted(got["image_id"]) == sorted(expected), kind
    fig = event_timeline(ev, T.epochs(db, "toy", "toy-run"), cap=2)
    assert (
        len(fig.layout.yaxis.ticktext) == 2
        and "The 2 largest of 4 events (2 more in the table)" in fig.layout.title.text
    )
    # The largest by images: the merge (80) and the split (40) rather than birth (0) or death (0).
    assert {t.name for t in fig.data if t.name} == {"merge", "split"}
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "3"]


def test_learned_view(curves_ws):
    from conceptlens.db import WorkspaceDB
    from conceptlens.views import training as T

    db = WorkspaceDB(curves_ws.root)
    assert T.factors(db, "toy", "toy-run") == ["label", "color", "shape"]
    learned = T.learned(db, "toy", "toy-run")
    shape = learned[(learned["factor"] == "shape") & learned["value"].isna()].iloc[0]
    assert shape["learned_at"] == 0 and shape["epoch"] == 0
    t = curves_ws.read("learning_curves", dataset="toy", run="toy-run").to_pandas()
    row = t[(t["factor"] == "shape") & t["value"].isna() & (t["epoch"] == 0)].iloc[0]
    assert shape["auc"] == pytest.approx(row["auc"]) and shape["auc_lo"] == pytest.approx(row["auc_lo"])
    assert learned["factor"].iloc[0] == "label" and pd.isna(learned["value"].iloc[0])
