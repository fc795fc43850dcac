"""Data flow of `conceptlens analyze similarity` (issue 29, surviving data-flow mutants, part c):
what a member of the embedding did not see keeps the prior, test trials no train trial can
place are dropped (with all three of their arrays), catch trials stay out of the scores,
unlabelled queries and other datasets' label names stay out of the per-label rows, the
note reports the kept dimensionality, and every distance is its own.

Expected values are computed another way (a direct loop over the trials, scipy's distances,
a run without the trials that must not count). Tiny workspaces (tests/factory.py), a fit of
20 epochs: each test takes a few seconds."""

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
from tests.conftest import copy_ws

OPTS = {"dims": [2], "members": 2, "screen_members": 2, "max_epochs": 20, "n_boot": 20, "batch_trials": 512}


def analyse(root, force=False, **extra):
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


def alignment(root) -> pd.DataFrame:
    t = Workspace(root).read("human_alignment", dataset="toy").to_pandas()
    return t.sort_values(["checkpoint_id", "metric", "distance", "label"]).reset_index(drop=True)


def fit_table(root) -> pd.DataFrame:
    return Workspace(root).read("similarity_fit", dataset="toy").to_pandas().sort_values(["dim", "member"])


def embedding(root) -> pd.DataFrame:
    return (
        Workspace(root).read("psych_embedding", dataset="toy").to_pandas().sort_values(["member", "image_id"])
    )


@pytest.fixture(scope="module")
def base(factory_template, tmp_path_factory):
    """The factory's 40 trials, analysed."""
    root = copy_ws(factory_template, tmp_path_factory.mktemp("simc") / "ws")
    analyse(root)
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
    ctx = analyse(factory_copy, dims=[1, 2], holdout=0.5)
    ens = seen_ens["ens"]
    rows = [r for r in trials_of(factory_copy) if r["split"] == "train" and not r["is_catch"]]
    fit = fit_table(factory_copy)
    emb = embedding(factory_copy)
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
    ctx = analyse(root)
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
    analyse(root)
    a, b = alignment(root), alignment(base)
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
    analyse(root, force=True)
    a = alignment(root)
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
    analyse(factory_copy)  # its own run (a module fixture's would not count as this test's coverage)
    base = factory_copy
    ids, X = Context(Workspace(base)).features("ck0")
    pos = {s: k for k, s in enumerate(ids)}
    metric = {"l1": "cityblock", "l2": "euclidean", "cosine": "cosine"}
    assert set(S.DISTANCES) == set(metric)
    a = alignment(base)
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
