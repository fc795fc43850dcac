"""The `similarity` analysis (conceptlens/analysis/similarity.py): the embedding is fitted on the
non-catch train trials only and refitted when those change; the human alignment scores follow the
fit, the features and the trials they should use. The factory workspace's hand-written trials
(tests/similarity_factory.py), small fits: each test takes a second or a few."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy.spatial.distance import cdist

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.common import Context
from conceptlens.embedding import psych as P
from conceptlens.metrics import similarity as S
from conceptlens.workspace import Workspace
from tests import helpers_similarity
from tests.conftest import copy_ws
from tests.helpers_analysis_inputs import CONV_OPTS, append_trial_rows, stranger_trials
from tests.helpers_similarity import add_trials, analyse, other_choice

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
fitted = helpers_similarity.fitted
ws = helpers_similarity.ws


# ---- similarity: what a checkpoint is scored on --------------------------------------------------
def test_a_checkpoint_is_scored_on_the_trials_and_images_it_has_features_for(factory_copy):
    """ck0 lacks the features of one embedded image, and another image has no label: the
    triplet accuracy is over the trials whose images all have features (counted here
    triplet by triplet), RSA over the embedded images with features, per-label rows only
    for real labels. Catches the trials or images without features kept (or their weights
    misaligned), and an unlabelled image making a label group."""
    from conceptlens.analysis.common import read_trials
    from conceptlens.analysis.similarity import Scorer
    from conceptlens.embedding.psych import read_embedding

    ws = Workspace(factory_copy)
    embedded, _ = read_embedding(ws, "toy")
    trials = ws.read("similarity_trials", dataset="toy").to_pandas()
    gone = trials["query"].iloc[0]
    unlabelled = next(i for i in embedded if i != gone)
    img = ws.read("images")
    df = img.to_pandas()
    df.loc[df["image_id"] == unlabelled, ["label", "label_name"]] = None
    ws.write("images", pa.Table.from_pandas(df, schema=img.schema, preserve_index=False))
    ctx = Context(ws, progress=False)
    ids, X = ctx.features("ck0")
    keep = ids != gone
    ids, X = ids[keep], X[keep]
    opts = {"seed": 0, "n_boot": 20, "rsa_max": 1000, "beta": 10.0}
    rows = pd.DataFrame(Scorer(ctx, "toy", read_trials(ctx, "toy"), opts).score(ids, X, "ck0"))

    pos = {s: k for k, s in enumerate(ids)}
    num = den = used = 0
    for r in trials[~trials["is_catch"]].itertuples():
        shown = [r.query, *r.references]
        if any(s not in pos for s in shown):
            continue
        d = {s: float(np.linalg.norm(X[pos[s]] - X[pos[r.query]])) for s in r.references}
        chosen = list(r.chosen)
        rest = [s for s in r.references if s not in chosen]
        for i, a in enumerate(chosen):
            for b in chosen[i + 1 :] + rest:
                num += r.weight * (1.0 if d[a] < d[b] else 0.5 if d[a] == d[b] else 0.0)
                den += r.weight
        used += 1
    assert 0 < used < (~trials["is_catch"]).sum()
    overall = rows[(rows["metric"] == "triplet_accuracy") & (rows["distance"] == "l2") & rows["label"].isna()]
    assert overall["value"].iloc[0] == pytest.approx(num / den)
    assert overall["n_units"].iloc[0] == used
    rsa = rows[(rows["metric"] == "rsa") & rows["label"].isna()]
    assert set(rsa["n_units"]) == {len([s for s in embedded if s in pos])}
    assert set(rows["label"].dropna()) <= {0, 1, 2}


def test_pairs_are_compared_within_each_k(factory_copy):
    """ck0 also clustered at k = 3, alone: the pairs at k = 4 are compared, none at k = 3
    (no other checkpoint has k = 3). Catches a pair's second (or first) checkpoint taken
    from every k."""
    ws = Workspace(factory_copy)
    for table in ("clusters", "checkpoint_metrics"):
        t = ws.read(table, checkpoint_id="ck0", k=4).drop_columns(["checkpoint_id", "k"])
        if table == "clusters":
            i = t.schema.get_field_index("cluster")
            t = t.set_column(i, t.schema.field(i), pa.array(np.arange(len(t)) % 3, t.schema.field(i).type))
        ws.write(table, t, checkpoint_id="ck0", k=3)
    runner.run(factory_copy, "comparisons", with_dependencies=False, progress_bars=False)
    s = ws.read("clustering_similarity", dataset="toy").to_pandas()
    assert sorted(zip(s["k"], s["checkpoint_a"], s["checkpoint_b"])) == [
        (4, "ck0", "ck1"),
        (4, "ck0", "ck2"),
        (4, "ck1", "ck2"),
    ]


def test_round_shares_count_only_the_trials_fitted(factory_copy):
    """Trials before the rounds (two of them showing an image the embedding lacks) and one
    study round: the first share ends after the known trials before the rounds. Catches
    the rounds read from every train trial, the dropped ones included."""
    ws = Workspace(factory_copy)
    t = stranger_trials(ws)
    fitted = t[~t["is_catch"] & (t["split"] == "train")]
    again = fitted[fitted["trial_id"].str.startswith("t")].head(10).astype(object)
    again = again.assign(trial_id="r0." + again["trial_id"], round=0).drop(columns="dataset")
    append_trial_rows(ws, again.where(again.notna(), None).to_dict("records"))
    runner.run(factory_copy, "convergence", CONV_OPTS, with_dependencies=False, progress_bars=False)
    c = ws.read("similarity_convergence", dataset="toy").to_pandas().sort_values("round")
    known = len(fitted) - 2  # a0 and a1 show the stranger
    assert list(c["n_trials"]) == [known, known + 10]


# ---- what makes the embedding refitted and the scores computed again ------------------------
def embedding(root) -> np.ndarray:
    t = Workspace(root).read("psych_embedding", dataset="toy").to_pandas().sort_values(["member", "image_id"])
    return np.stack(t["mu"].to_numpy())


def fit(root):
    return Workspace(root).read("similarity_fit", dataset="toy").to_pandas().set_index(["dim", "member"])


def alignment(root):
    t = Workspace(root).read("human_alignment", dataset="toy").to_pandas()
    return t.sort_values(["checkpoint_id", "metric", "distance", "label"]).reset_index(drop=True)


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


# ---- which trials, images and labels the fit and the scores use -----------------------------
OPTS = {"dims": [2], "members": 2, "screen_members": 2, "max_epochs": 20, "n_boot": 20, "batch_trials": 512}


def analyse_similarity(root, force=False, **extra):
    return runner.run(
        root, "similarity", {**OPTS, **extra}, force=force, with_dependencies=False, progress_bars=False
    )


def trials_of(root) -> list[dict]:
    return Workspace(root).read("similarity_trials", dataset="toy").drop_columns(["dataset"]).to_pylist()


def append_trials(root, rows: list[dict]) -> None:
    Workspace(root).append(
        "similarity_trials",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )


def trial(tid, query, refs, chosen, split="train", is_catch=False) -> dict:
    return {
        "trial_id": tid,
        "agent_id": "a9",
        "query": query,
        "references": refs,
        "chosen": chosen,
        "n_select": len(chosen),
        "kind": f"{len(refs)}rank{len(chosen)}",
        "weight": 1.0,
        "rt_ms": 1500.0,
        "split": split,
        "is_catch": is_catch,
    }


def alignment_frame(root) -> pd.DataFrame:
    t = Workspace(root).read("human_alignment", dataset="toy").to_pandas()
    return t.sort_values(["checkpoint_id", "metric", "distance", "label"]).reset_index(drop=True)


def fit_table(root) -> pd.DataFrame:
    return Workspace(root).read("similarity_fit", dataset="toy").to_pandas().sort_values(["dim", "member"])


def embedding_frame(root) -> pd.DataFrame:
    return (
        Workspace(root).read("psych_embedding", dataset="toy").to_pandas().sort_values(["member", "image_id"])
    )


@pytest.fixture(scope="module")
def base(factory_template, tmp_path_factory):
    """The factory's 40 trials, analysed."""
    root = copy_ws(factory_template, tmp_path_factory.mktemp("simc") / "ws")
    analyse_similarity(root)
    return root


def test_a_member_keeps_the_prior_for_images_none_of_its_own_trials_shows(factory_copy, monkeypatch):
    """Images shown only by trials a member holds out (or by no train trial of it) keep the
    prior in that member: mu 0, sigma the prior's scale; the images it fitted do not. Shorter
    trials (2 references, padded with -1) are among the fitted ones. Catches the reset taken
    over all train trials instead of the member's own (a held-out image counted as seen), the
    padding -1 counted as an image (the last image always "seen"), only the first member
    reset, and (two dimensionalities) the note's mean log-likelihood taken over the rows of
    every dimensionality instead of the kept one."""
    # Images 24..47 each in one 2-rank-1 train trial only: with half the trials held out,
    # some of them are unseen by each member.
    append_trials(
        factory_copy,
        [
            trial(
                f"u{k:02d}",
                f"toy-{24 + 2 * k:04d}",
                [f"toy-{25 + 2 * k:04d}", f"toy-{k:04d}"],
                [f"toy-{k:04d}"],
            )
            for k in range(12)
        ],
    )
    seen_ens = {}
    real = P.fit_ensemble

    def spy(*a, **kw):
        seen_ens["ens"] = ens = real(*a, **kw)
        return ens

    monkeypatch.setattr(P, "fit_ensemble", spy)
    ctx = analyse_similarity(factory_copy, dims=[1, 2], holdout=0.5)
    ens = seen_ens["ens"]
    rows = [r for r in trials_of(factory_copy) if r["split"] == "train" and not r["is_catch"]]
    fit = fit_table(factory_copy)
    emb = embedding_frame(factory_copy)
    unseen_somewhere = set()
    for m in range(OPTS["members"]):
        kept = [r for t, r in enumerate(rows) if t not in set(ens.heldout[m].tolist())]
        shown = {r["query"] for r in kept} | {i for r in kept for i in r["references"]}
        prior = np.float32(fit[(fit["member"] == m) & fit["selected"]]["prior_scale"].iloc[0])
        mine = emb[emb["member"] == m]
        for image, mu, sigma in zip(mine["image_id"], mine["mu"], mine["sigma"]):
            if image in shown:
                assert np.any(np.asarray(mu) != 0), (m, image)
            else:
                unseen_somewhere.add((m, image))
                np.testing.assert_array_equal(np.asarray(mu), 0.0, err_msg=f"member {m} {image}")
                np.testing.assert_array_equal(
                    np.asarray(sigma, np.float32), prior, err_msg=f"member {m} {image}"
                )
    # Not vacuous: the last image and an image of the second member are unseen somewhere.
    assert max(emb["image_id"]) in {i for _, i in unseen_somewhere}
    assert any(m == 1 for m, _ in unseen_somewhere)
    # The note reports the mean held-out log-likelihood of the kept dimensionality.
    (note,) = [n for n in ctx.notes if "dimensionality" in n and "kept" in n]
    reported = float(re.search(r"per trial (-?[0-9.]+)\)", note).group(1))
    sel = fit[fit["selected"]]
    assert set(fit["dim"]) == {1, 2} and len(sel) == OPTS["members"]
    assert reported == pytest.approx(sel["heldout_loglik"].mean(), abs=5e-4)
    assert reported != pytest.approx(fit["heldout_loglik"].mean(), abs=5e-4)


def test_test_trials_showing_an_image_no_train_trial_shows_are_dropped(base, factory_template, tmp_path):
    """A test trial whose query no train trial shows cannot be placed: it is dropped (with a
    note) and the test scores are those of the run without it. Catches the stimuli, the
    choices or the weights of the test trials taken unfiltered (shapes that do not match, or
    an image index of -2)."""
    root = copy_ws(factory_template, tmp_path / "ws")
    train = [r for r in trials_of(root) if r["split"] == "train"]
    refs = train[0]["references"]
    append_trials(root, [trial("x000", "toy-0040", refs, refs[:2], split="test")])
    ctx = analyse_similarity(root)
    assert any("1 test trial(s)" in n for n in ctx.notes)
    cols = ["n_train", "heldout_loglik", "test_loglik", "test_accuracy"]
    np.testing.assert_array_equal(
        fit_table(root)[cols].to_numpy(float), fit_table(base)[cols].to_numpy(float)
    )


def test_catch_trials_are_not_scored_against_the_checkpoints(base, factory_template, tmp_path):
    """Catch trials (answered the other way) in a workspace analysed from scratch: every
    alignment value is the one without them. Catches catch trials entering the triplet
    accuracy (the scorer's own filter), which a rerun that keeps its old rows never shows."""
    root = copy_ws(factory_template, tmp_path / "ws")
    train = [r for r in trials_of(root) if r["split"] == "train"]
    catch = []
    for k, r in enumerate(train[:10]):
        other = [x for x in r["references"] if x not in r["chosen"]][:2]
        catch.append(trial(f"c{k:03d}", r["query"], r["references"], other, is_catch=True))
    append_trials(root, catch)
    analyse_similarity(root)
    a, b = alignment_frame(root), alignment_frame(base)
    assert len(a) == len(b)
    np.testing.assert_array_equal(a["value"].to_numpy(float), b["value"].to_numpy(float))
    np.testing.assert_array_equal(a["n"].to_numpy(int), b["n"].to_numpy(int))


def test_per_label_rows_skip_unlabelled_queries_and_name_labels_from_the_dataset(base, tmp_path):
    """An image of `toy` without a label, used as a query, and a second dataset (listed first
    in `images`) whose labels 0..2 have other names: the per-label triplet rows are those of
    the labelled queries (their trials add up to the overall row less the unlabelled query's)
    and are named by `toy`'s own names. Catches the missing label taken as a label (a crash
    on NaN) and label names looked up over every dataset's images."""
    root = copy_ws(base, tmp_path / "ws")
    w = Workspace(root)
    images = w.read("images").to_pandas()
    q = next(r["query"] for r in trials_of(root) if not r["is_catch"])
    images.loc[images["image_id"] == q, ["label", "label_name"]] = [None, None]
    names = images[images["dataset"] == "toy"].dropna(subset=["label"]).groupby("label")["label_name"].first()
    other = images[images["dataset"] == "toy"].head(6).copy()
    other["image_id"] = [f"zz-{k}" for k in range(6)]
    other["dataset"] = "zz"
    other["label"] = [0, 1, 2, 0, 1, 2]
    other["label_name"] = ["cat", "dog", "owl"] * 2
    both = pd.concat([other, images], ignore_index=True)
    both["label"] = both["label"].astype("Int64")
    w.write("images", pa.Table.from_pandas(both, schema=schema.arrow_schema("images"), preserve_index=False))
    analyse_similarity(root, force=True)
    a = alignment_frame(root)
    tri = a[(a["metric"] == "triplet_accuracy") & (a["checkpoint_id"] == "ck0") & (a["distance"] == "l2")]
    overall = tri[tri["label"].isna()]
    per = tri[tri["label"].notna()]
    n_q = sum(1 for r in trials_of(root) if not r["is_catch"] and r["query"] == q)
    assert n_q >= 1 and len(overall) == 1
    assert per["n_units"].sum() == overall["n_units"].iloc[0] - n_q
    assert set(per["label"].astype(int)) <= {0, 1, 2}
    for lab, name in zip(per["label"].astype(int), per["label_name"]):
        assert name == names[lab]


def test_triplet_accuracy_of_every_distance_is_its_own(factory_copy):
    """The overall triplet accuracy of each distance against a direct count with scipy's
    distances (cityblock, euclidean, cosine): of every trial's triplets "chosen a is nearer
    the query than b" (chosen in order, then the rest), the share the features get right.
    Catches the first distance's scores reused for the others."""
    analyse_similarity(
        factory_copy
    )  # its own run (a module fixture's would not count as this test's coverage)
    base = factory_copy
    ids, X = Context(Workspace(base)).features("ck0")
    pos = {s: k for k, s in enumerate(ids)}
    metric = {"l1": "cityblock", "l2": "euclidean", "cosine": "cosine"}
    assert set(S.DISTANCES) == set(metric)
    a = alignment_frame(base)
    rows = [r for r in trials_of(base) if not r["is_catch"]]
    for dist in S.DISTANCES:
        right = total = 0.0
        for r in rows:
            order = list(r["chosen"]) + [x for x in r["references"] if x not in r["chosen"]]
            d = cdist(
                X[[pos[r["query"]]]].astype(np.float64),
                X[[pos[x] for x in order]].astype(np.float64),
                metric[dist],
            )[0]
            for k in range(r["n_select"]):
                for j in range(k + 1, len(order)):
                    right += 1.0 if d[k] < d[j] else 0.5 if d[k] == d[j] else 0.0
                    total += 1
        got = a[
            (a["checkpoint_id"] == "ck0")
            & (a["metric"] == "triplet_accuracy")
            & (a["distance"] == dist)
            & a["label"].isna()
        ]
        assert got["value"].iloc[0] == pytest.approx(right / total, abs=1e-9), dist
        assert got["n"].iloc[0] == total
