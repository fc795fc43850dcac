"""Data-flow survivors, part b (issue 29): comparisons, metrics/selection and validate.

Each test names the mutant class it catches; the equivalent and left mutants of the same
lanes are argued in /work/tmp/mut/eq_b.json."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.validate import validate
from conceptlens.workspace import Workspace


# ---- analysis/comparisons.py ---------------------------------------------------------------------
class _TransferWs:
    """The two calls transfer_correlations makes of a workspace, over in-memory rows."""

    def __init__(self, rows: pd.DataFrame):
        self.rows = rows

    def has(self, name, checkpoint_id):
        return name == "transfer_scores" and (self.rows["checkpoint_id"] == checkpoint_id).any()

    def read(self, name, checkpoint_id):
        assert name == "transfer_scores"
        return pa.Table.from_pandas(
            self.rows[self.rows["checkpoint_id"] == checkpoint_id], preserve_index=False
        )


class _Ctx:
    def __init__(self, ws):
        self.ws = ws


def test_transfer_correlations_equal_the_predictor_correlations_when_the_target_is_knn_accuracy():
    """A target whose transfer accuracy is each checkpoint's kNN accuracy: every predictor's
    transfer correlation (Kendall bootstrap interval and permutation p-values included, both
    seeded and resampling the checkpoints in order) equals its predictor correlation. Catches
    the checkpoints of a k taken in descending order in either table (the bootstrap then
    resamples other rows for the same seed)."""
    from conceptlens.analysis.comparisons import clid_and_correlations, transfer_correlations

    rng = np.random.default_rng(7)
    n = 9
    ids = [f"ck{i}" for i in range(n)]
    m = pd.DataFrame(
        {
            "checkpoint_id": ids,
            "k": 4,
            "image_set": "s",
            "n_images": 48,
            "cl": rng.normal(size=n),
            "cl_heldout": rng.normal(size=n),
            "id": rng.normal(size=n) + 5,
            "knn_acc": rng.uniform(0.2, 0.9, n),
        }
    )
    for c in ("alignment", "uniformity", "mcr2", "rotation", "source_entropy"):
        m[c] = rng.normal(size=n)
    by_k: dict = {}
    _, corr, _ = clid_and_correlations(m.sample(frac=1, random_state=1), seed=3, comparable_rows=by_k)
    tr = pd.DataFrame(
        {
            "checkpoint_id": ids,
            "target_dataset": "other",
            "accuracy": m["knn_acc"],
            "target_neg_entropy": -rng.uniform(0.1, 1.0, n),
            "n_train": 10,
            "n_test": 10,
        }
    ).sample(frac=1, random_state=2)
    transfer = transfer_correlations(_Ctx(_TransferWs(tr)), by_k, seed=3)
    want = {r["predictor"]: r for r in corr}
    got = {r["predictor"]: r for r in transfer}
    assert set(want) == set(schema.PREDICTORS) and set(want) <= set(got)
    assert np.isfinite(want["cl"]["kendall_lo"]) and want["cl"]["kendall_lo"] < want["cl"]["kendall_hi"]
    for p in schema.PREDICTORS:
        a = {c: v for c, v in want[p].items() if c not in ("k", "predictor")}
        b = {c: v for c, v in got[p].items() if c not in ("k", "predictor", "target_dataset")}
        assert a == pytest.approx(b, rel=1e-12, nan_ok=True), p
    # kNN accuracy against itself: a perfect correlation.
    assert got["knn_acc"]["kendall"] == pytest.approx(1.0) and got["knn_acc"]["pearson"] == pytest.approx(1.0)


def _shrink(ws: Workspace, cid: str, k: int, drop: int, new_k: int | None = None) -> None:
    """Write (checkpoint, new_k or k)'s clusters without their first `drop` images, and its
    checkpoint_metrics row (a copy of the k one), so that its image set differs."""
    for table in ("clusters", "checkpoint_metrics"):
        t = ws.read(table, checkpoint_id=cid, k=k).drop_columns(["checkpoint_id", "k"])
        if table == "clusters":
            t = t.slice(drop)
        ws.write(table, t, checkpoint_id=cid, k=k if new_k is None else new_k)


def test_every_k_with_checkpoints_of_other_images_gets_its_note(factory_copy):
    """At k = 4 ck2 and at k = 3 ck1 embedded fewer images than the other two: the run
    notes both, each naming its own k and checkpoint. Catches the first note repeated for
    every note."""
    ws = Workspace(factory_copy)
    for cid in ("ck0", "ck1", "ck2"):
        _shrink(ws, cid, 4, 5 if cid == "ck1" else 0, new_k=3)
    _shrink(ws, "ck2", 4, 5)
    ctx = runner.run(factory_copy, "comparisons", with_dependencies=False, progress_bars=False)
    notes = sorted(n for n in ctx.notes if "embedded other images" in n)
    assert len(notes) == 2, ctx.notes
    assert notes[0].startswith("toy k=3: ck1 embedded other images")
    assert notes[1].startswith("toy k=4: ck2 embedded other images")


# ---- metrics/selection.py ------------------------------------------------------------------------
def _population(n=240, n_labels=4, d=8, noise=0.4, seed=0, annotator=True):
    from conceptlens.metrics import selection as SE

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_labels, n)
    X = rng.normal(size=(n_labels, d))[labels] + noise * rng.normal(size=(n, d))
    factors = {"parity": labels % 2}
    A = np.eye(n_labels)[labels] if annotator else None
    return SE.Population(X, labels, factors, A)


def test_every_set_with_a_twonn_fit_gets_its_own_dimension():
    """20 sets with with_id (three jobs of 8): each set's intrinsic dimension is the one
    Scorer.intrinsic_dim gives for it with its own tag's generator. Catches the first chunk
    of 8 fitted again in place of the later ones."""
    from conceptlens.metrics import selection as SE

    pop = _population(annotator=False)
    sc = SE.Scorer(pop, np.flatnonzero(pop.labels == 1), n_null=3, n_null_id=1, id_points=30, seed=0)
    rng = np.random.default_rng(5)
    sets = np.stack([np.sort(rng.choice(240, 40, replace=False)) for _ in range(20)])
    tags = [(0, 1, j) for j in range(20)]
    out = sc.score_sets(sets, tags, np.ones(20, bool))
    want = [sc.intrinsic_dim(sets[i], np.random.default_rng([*tags[i], 9])) for i in range(20)]
    assert np.isfinite(want).all()
    np.testing.assert_allclose(out["intrinsic_dim"], want, rtol=1e-12)


def test_a_failing_part_of_the_scores_is_raised_not_left_missing():
    """A TwoNN fit that raises (here: on purpose) makes score_sets raise, whichever job it
    ran in. Catches only the first job's result being collected (the others' errors would be
    swallowed and their scores left NaN)."""
    from conceptlens.metrics import selection as SE

    pop = _population(annotator=False)
    sc = SE.Scorer(pop, np.flatnonzero(pop.labels == 1), n_null=3, n_null_id=1, seed=0)

    def boom(members, tag):
        raise RuntimeError("fit failed")

    sc._intrinsic_dim_of = boom
    sets = np.stack([np.arange(30), np.arange(30, 60)])
    with pytest.raises(RuntimeError, match="fit failed"):
        sc.score_sets(sets, [(0, 1, 0), (0, 1, 1)], np.ones(2, bool))


def test_each_null_fits_twonn_on_its_first_n_null_id_sets():
    """Both nulls, n_null_id of n_null sets each (and n_null when n_null_id exceeds it):
    every null's intrinsic-dimension row counts that many finite fits. Catches the TwoNN
    sets marked for the first null only."""
    from conceptlens.metrics import selection as SE

    pop = _population(annotator=False)
    sel = np.flatnonzero(pop.labels == 1)
    for n_null, n_null_id in ((6, 3), (4, 9)):
        out = SE.score_selection(pop, sel, n_null=n_null, n_null_id=n_null_id, seed=0, bootstrap=0)
        r = next(r for r in out["scores"] if r["score"] == "intrinsic_dim")
        for w in SE.NULLS:
            assert r[f"null_{w}_n"] == min(n_null, n_null_id), (w, n_null, n_null_id)


def test_a_nulls_scores_do_not_depend_on_the_other_nulls_asked_for():
    """The same_labels null scored alone and beside the random null: its draws are seeded by
    its own name, and so are its sets' coherence trials and TwoNN subsamples (tags), so its
    null rows are the same either way. Catches the random null's tags given to every null's
    sets."""
    from conceptlens.metrics import selection as SE

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 240)
    X = rng.normal(size=(3, 6))[labels] + 0.8 * rng.normal(size=(240, 6))
    A = X / np.linalg.norm(X, axis=1, keepdims=True)
    pop = SE.Population(X, labels, {}, A)
    sel = np.flatnonzero(labels == 1)
    kw = dict(n_null=8, n_null_id=8, id_points=20, trials=15, seed=0, bootstrap=0)
    alone = SE.score_selection(pop, sel, nulls=("same_labels",), **kw)
    both = SE.score_selection(pop, sel, nulls=("random", "same_labels"), **kw)
    for name in ("coherence_random", "coherence_hard", "intrinsic_dim"):
        a = next(r for r in alone["scores"] if r["score"] == name)
        b = next(r for r in both["scores"] if r["score"] == name)
        assert a["null_same_labels_n"] == 8, name
        cols = [c for c in a if c.startswith("null_same_labels") or c == "pct_same_labels"]
        assert {c: a[c] for c in cols} == pytest.approx({c: b[c] for c in cols}, rel=1e-12), name


def test_trial_picks_are_trials_rows_of_distinct_members():
    """A set large enough for one permutation: _picks gives `trials` rows of refs + 1
    distinct members (its docstring's shape), together distinct. Catches the permutation
    reshaped to (refs + 1) x trials."""
    from conceptlens.metrics import selection as SE

    pop = _population()
    sc = SE.Scorer(pop, np.arange(5), n_null=3, n_null_id=1, trials=7, refs=3, seed=0)
    members = np.arange(100, 160)
    pick = sc._picks(members, np.random.default_rng(0))
    assert pick.shape == (7, 4)
    assert len(np.unique(pick)) == pick.size and np.isin(pick, members).all()


# ---- validate.py ---------------------------------------------------------------------------------
def test_a_file_whose_footer_reads_but_whose_pages_do_not_is_reported(tmp_path):
    """images.parquet with an intact footer (its columns and types check out) but garbage
    data pages: one problem of table `images`, file images.parquet, "cannot be read as
    Parquet". Catches the report's file and table swapped (the problem then belongs to no
    selected table and is dropped)."""
    from tests.factory import make_workspace

    ws = make_workspace(tmp_path / "ws")
    path = ws.table_path("images")
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    end = len(data) - 8 - footer
    data[4:end] = b"\xff" * (end - 4)
    path.write_bytes(bytes(data))
    assert "image_id" in pq.ParquetFile(path).schema_arrow.names  # the footer still reads
    problems = [p for p in validate(ws.root, deep=False) if "cannot be read as Parquet" in p.message]
    assert [(p.table, p.file, p.column) for p in problems] == [
        ("images", path.relative_to(ws.root).as_posix(), None)
    ]
