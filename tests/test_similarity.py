"""Human similarity judgments (roads2021): the likelihood against psiz's oracle, triplets,
agreement metrics against values computed another way, the importer on fixtures of both
formats (and malformed ones), recovery of a simulated embedding, the analysis end to end
and the Similarity page."""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pyarrow as pa
import pytest
from scipy.stats import spearmanr

from conceptlens import schema
from conceptlens.analysis import by_name, runner
from conceptlens.embedding import psych as P
from conceptlens.importers.hsj import import_hsj
from conceptlens.importers.images import ImportInputError
from conceptlens.metrics import similarity as S
from conceptlens.validate import validate
from conceptlens.workspace import Workspace, WorkspaceError
from harness.factory import make_workspace
from tests import hsj_fixtures as F


# ---- the likelihood ------------------------------------------------------------------------
def test_likelihood_equals_psiz_oracle():
    # psiz's test: coordinates 0.1 * index, beta = 10, query 1, references 2 and 3.
    Z = 0.1 * np.arange(5, dtype=float)[:, None]
    outcomes, p = S.outcome_probabilities(Z, 1, [2, 3], 1, beta=10.0)
    assert outcomes == [(2,), (3,)]
    np.testing.assert_allclose(p, [0.7311, 0.2689], atol=1e-4)


def test_rank_likelihood_by_hand_and_in_torch():
    import torch

    rng = np.random.default_rng(0)
    Z = rng.normal(0, 0.2, (12, 3))
    # 8-rank-2 by hand: s(a)/sum_R s * s(b)/sum_{R - a} s.
    q, refs = 0, list(range(1, 9))
    s = {r: np.exp(-10 * np.linalg.norm(Z[q] - Z[r])) for r in refs}
    by_hand = s[3] / sum(s.values()) * s[5] / sum(v for r, v in s.items() if r != 3)
    stim = np.array([[q, 3, 5] + [r for r in refs if r not in (3, 5)]])
    assert np.exp(S.rank_log_likelihood(Z, stim, [2])[0]) == pytest.approx(by_hand, rel=1e-12)
    # The 56 outcomes of an 8-rank-2 trial are a distribution.
    outcomes, p = S.outcome_probabilities(Z, q, refs, 2)
    assert len(outcomes) == 56 and p.sum() == pytest.approx(1.0)
    # Mixed kinds, padded with -1: torch's likelihood (what the fit optimises) equals numpy's.
    stim = np.array([[0, 3, 5, 1, 2, 4, 6, 7, 8], [9, 10, 11, 2, -1, -1, -1, -1, -1]])
    sel = np.array([2, 1])
    ref = S.rank_log_likelihood(Z, stim, sel)
    z = torch.as_tensor(Z[np.maximum(stim, 0)])
    chosen = torch.as_tensor((np.arange(2)[None] < sel[:, None]).astype(float))
    got = P.torch_rank_loglik(z, torch.as_tensor(stim[:, 1:] >= 0), chosen, 10.0)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6)
    # The most probable outcome is the nearest references, nearest first.
    best = outcomes[int(np.argmax(p))]
    d = {r: np.linalg.norm(Z[q] - Z[r]) for r in refs}
    assert list(best) == sorted(refs, key=d.get)[:2]


def test_sampled_choices_follow_the_likelihood():
    Z = np.array([[0.0], [0.05], [0.1], [0.3]])
    rng = np.random.default_rng(1)
    n = 20000
    out = S.sample_choices(Z, np.zeros(n, int), np.tile([1, 2, 3], (n, 1)), 2, 10.0, rng)
    outcomes, p = S.outcome_probabilities(Z, 0, [1, 2, 3], 2)
    freq = [np.mean((out[:, 1] == a) & (out[:, 2] == b)) for a, b in outcomes]
    np.testing.assert_allclose(freq, p, atol=0.015)


# ---- triplets and agreement ----------------------------------------------------------------
def test_an_8_rank_2_trial_gives_13_triplets():
    stim = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8]])  # q: a=1 > b=2 > [3..8]
    t = S.triplets(stim, [2])
    assert len(t) == 13
    assert {(a, b) for _, _, a, b in t} == {(1, x) for x in range(2, 9)} | {(2, x) for x in range(3, 9)}
    assert (t[:, 1] == 0).all()
    # Mixed: a 2-rank-1 trial gives 1 triplet, a padded 4-rank-2 trial 3 + 2.
    stim = np.array([[9, 1, 2, -1, -1], [9, 4, 5, 6, 7]])
    assert len(S.triplets(stim, [1, 2])) == 1 + 5


def test_triplet_accuracy_against_explicit_triplets():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    X[7] = X[8]  # a tie: counts 1/2
    stim = np.array([[0, 7, 8, 9, 10, 11], [1, 2, 3, 4, 5, 6], [12, 13, 14, 15, -1, -1]])
    sel = np.array([2, 1, 2])
    for dist in S.DISTANCES:
        f = {
            "l1": lambda a, b: np.abs(a - b).sum(),
            "l2": lambda a, b: np.linalg.norm(a - b),
            "cosine": lambda a, b: 1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b),
        }[dist]
        score = [
            1.0 if f(X[q], X[a]) < f(X[q], X[b]) else 0.5 if f(X[q], X[a]) == f(X[q], X[b]) else 0.0
            for _, q, a, b in S.triplets(stim, sel)
        ]
        assert S.triplet_accuracy(X, stim, sel, dist) == pytest.approx(np.mean(score))
    # Weights weigh each trial's triplets.
    c, n = S.triplet_scores(S.query_distances(X, stim, "l2"), sel)
    w = np.array([1.0, 0.0, 0.5])
    assert S.triplet_accuracy(X, stim, sel, "l2", w) == pytest.approx((w * c).sum() / (w * n).sum())


def test_triplet_accuracy_hand_computed():
    # 1-d: the query at 0; people chose 1 (at 0.1) then 3 (at 0.5) over 2 (at 0.3) and 4 (at 0.9).
    X = np.array([[0.0], [0.1], [0.3], [0.5], [0.9]])
    stim = np.array([[0, 1, 3, 2, 4]])
    # Triplets: 1>3 ok, 1>2 ok, 1>4 ok, 3>2 wrong, 3>4 ok: 4 of 5.
    assert S.triplet_accuracy(X, stim, [2], "l2") == pytest.approx(0.8)
    assert S.triplet_accuracy(X, stim, [2], "l1") == pytest.approx(0.8)


def test_rsa_and_its_bootstrap_against_scipy_and_brute_force():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(25, 3))
    Y = X + rng.normal(size=(25, 3))
    A, B = S.similarity_matrix(X, "l2"), S.similarity_matrix(Y, "cosine")
    assert S.rsa(A, B) == pytest.approx(spearmanr(S.upper(A), S.upper(B))[0])
    np.testing.assert_allclose(S.similarity_matrix(X, "l1"), -np.abs(X[:, None] - X[None]).sum(-1))
    group = [2, 5, 11]
    boot = S.RSABootstrap(B, {"g": group}, n_boot=20, seed=7)
    res = boot.score(A)
    i, j = np.triu_indices(25, 1)
    touch = np.isin(i, group) | np.isin(j, group)
    assert res[None][0] == pytest.approx(spearmanr(S.upper(A), S.upper(B))[0])
    assert res["g"][0] == pytest.approx(spearmanr(S.upper(A)[touch], S.upper(B)[touch])[0])
    assert res[None][3] == 300 and res["g"][3] == touch.sum()
    # One resample by brute force: pair weights w_i * w_j, weighted Pearson of the group's ranks.
    from scipy.stats import rankdata

    g = dict(boot.groups)["g"]
    assert {(min(a, b), max(a, b)) for a, b in zip(g.r, g.c)} == set(zip(i[touch], j[touch]))
    w = boot.W[1]
    pw = w[g.r] * w[g.c]
    ra, rb = _c(rankdata(A[g.r, g.c])), _c(rankdata(B[g.r, g.c]))
    sa = {k: g.sums(v) for k, v in (("a", ra), ("ab", ra * rb), ("aa", ra**2))}
    sw = g.S["one"][1]
    assert sw == pytest.approx(pw.sum())
    mx, my = sa["a"][1] / sw, g.S["b"][1] / sw
    r = (sa["ab"][1] / sw - mx * my) / np.sqrt((sa["aa"][1] / sw - mx * mx) * (g.S["bb"][1] / sw - my * my))
    assert r == pytest.approx(_wcorr(ra, rb, pw))
    lo, hi = res["g"][1:3]
    assert lo <= hi


def _c(r):
    return r - r.mean()


def _wcorr(x, y, w):
    mx, my = np.average(x, weights=w), np.average(y, weights=w)
    return np.average((x - mx) * (y - my), weights=w) / np.sqrt(
        np.average((x - mx) ** 2, weights=w) * np.average((y - my) ** 2, weights=w)
    )


def test_bootstrap_ratio_resamples_units():
    num = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]])
    den = np.array([2.0, 3.0, 4.0])
    out = S.bootstrap_ratio(num, den, 5, seed=9)
    idx = np.random.default_rng(9).integers(0, 3, size=(5, 3))
    np.testing.assert_allclose(out, num[idx].sum(1) / den[idx].sum(1)[:, None])
    assert S.percentile_interval(np.array([np.nan, 1.0, 2.0, 3.0]), 0.5) == (1.5, 2.5)


# ---- recovery of a simulated embedding -----------------------------------------------------
def test_fit_recovers_a_simulated_embedding():
    rng = np.random.default_rng(5)
    n, m = 60, 3000
    centres = rng.normal(0, 0.25, (6, 2))
    Z = centres[np.arange(n) % 6] + rng.normal(0, 0.05, (n, 2))
    q = rng.integers(0, n, m)
    refs = np.stack([rng.choice(np.setdiff1d(np.arange(n), [x]), 8, replace=False) for x in q])
    stim = S.sample_choices(Z, q, refs, 2, 10.0, rng)
    trials = P.Trials(stim, np.full(m, 2), np.ones(m))
    ens = P.fit_ensemble(
        trials, n, dims=(1, 2), members=2, seed=0, progress=False, max_epochs=120, batch_size=512
    )
    truth = np.exp(-10 * np.linalg.norm(Z[:, None] - Z[None], axis=-1))
    fits = ens.members()
    got = P.ensemble_similarity([(f.mu, f.sigma) for f in fits])
    assert ens.selected_dim == 2
    assert S.rsa(got, truth) >= 0.8
    rows = [r for r in ens.rows if r["selected"]]
    assert all(r["heldout_loglik"] > np.log(1 / 56) for r in rows)  # far better than chance
    assert all(r["agreement"] > 0.8 for r in rows)
    # Seeded: the same fit again is the same fit.
    again = P.fit_embedding(trials, n, 2, seed=3, max_epochs=5, batch_size=512, progress=False)
    once = P.fit_embedding(trials, n, 2, seed=3, max_epochs=5, batch_size=512, progress=False)
    np.testing.assert_array_equal(again.mu, once.mu)


# ---- the importer --------------------------------------------------------------------------
@pytest.fixture()
def toy(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    ids, Z = F.people_embedding(ws)
    return ws, ids, F.simulate(ids, Z, 120, catch_every=10)


def _trials(ws):
    return ws.read("similarity_trials", dataset="toy").to_pandas().sort_values("trial_id")


def test_import_release(toy, tmp_path):
    ws, ids, rows = toy
    src = F.write_release(tmp_path / "hsj", rows, ids)
    r = import_hsj(ws.root, src)
    assert r["dataset"] == "toy" and r["trials"] == 120 and r["catch"] == 12
    got = _trials(ws)
    assert validate(ws.root, tables=["similarity_trials"]) == []
    # Every trial as simulated: query, references in display order, choices in order.
    by_q = {(x["query"], tuple(x["references"])): x for x in rows}
    for t in got.itertuples():
        want = by_q[(t.query, tuple(t.references))]
        assert list(t.chosen) == want["chosen"] and t.split == want["split"]
        assert t.is_catch == want["is_catch"] and t.kind == "8rank2" and t.n_select == 2
    assert set(got["weight"]) == {1.0, 0.75} and set(got["rt_ms"]) == {4000.0}
    assert got["trial_id"].str.match(r"\d+-\d+").all()
    # People's answers are appended, never rewritten: the same trials again are refused.
    with pytest.raises(ImportInputError, match="already in"):
        import_hsj(ws.root, src)
    assert len(_trials(ws)) == 120
    prov = ws.meta()["provenance"]["hsj_imports"]
    assert prov[0]["trials"] == 120 and prov[0]["format"] == "release"


@pytest.mark.parametrize("catalog", [True, False])
def test_import_psiz_hdf5(toy, tmp_path, catalog):
    ws, ids, rows = toy
    path = F.write_hdf5(tmp_path / "psiz", rows, ids, catalog=catalog)
    r = import_hsj(ws.root, path, dataset="toy")
    assert r["format"] == "hdf5" and r["trials"] == 120
    got = _trials(ws)
    assert validate(ws.root, tables=["similarity_trials"]) == []
    assert (got["weight"] == 0.9).all() and (got["split"] == "train").all()
    assert got["is_catch"].sum() == 12
    # Column 0 the query, chosen first in choice order, the rest after.
    rows_by_id = {f"obs-{t}": x for t, x in enumerate(rows)}
    for t in got.itertuples():
        want = rows_by_id[t.trial_id]
        assert t.query == want["query"] and list(t.chosen) == want["chosen"]
        assert sorted(t.references) == sorted(want["references"])


def _seq(src, split="train"):
    path = sorted((src / f"{split}_seqs").glob("seq_*.json"))[0]
    return path, json.loads(path.read_text())


def test_import_errors_name_file_and_sequence(toy, tmp_path):
    ws, ids, rows = toy

    def fresh(name):
        return F.write_release(tmp_path / name, rows, ids)

    # An asset that stimuli.txt does not list.
    src = fresh("unknown")
    path, doc = _seq(src)
    doc["data"][0]["sequence"][3]["interactions"][2]["detail"] = F.asset(999)
    path.write_text(json.dumps(doc))
    with pytest.raises(
        ImportInputError,
        match=rf"{path.name}: sequence 1000, position 3: stimulus 999 "
        r"is not in .*stimuli.txt",
    ):
        import_hsj(ws.root, src)
    # Malformed JSON.
    src = fresh("malformed")
    path, _ = _seq(src, "test")
    path.write_text('{"data": [')
    with pytest.raises(ImportInputError, match=rf"{path.name}: malformed JSON"):
        import_hsj(ws.root, src)
    # A sequence entry with one choice where 8rank2 needs two.
    src = fresh("choices")
    path, doc = _seq(src)
    step = doc["data"][0]["sequence"][5]
    step["interactions"] = [i for i in step["interactions"] if i["kind"] != "behavior:rank_1"]
    path.write_text(json.dumps(doc))
    with pytest.raises(
        ImportInputError,
        match=r"sequence 1000, position 5: kind rank:8rank2 needs 2 "
        r"choices .*got 1",
    ):
        import_hsj(ws.root, src)
    # A choice that is not a reference; a grade out of range.
    src = fresh("notref")
    path, doc = _seq(src)
    inter = doc["data"][0]["sequence"][0]["interactions"]
    shown = {i["detail"] for i in inter if i["kind"].startswith("content:")}
    inter[-2]["detail"] = next(F.asset(k) for k in range(1, len(ids) + 1) if F.asset(k) not in shown)
    path.write_text(json.dumps(doc))
    with pytest.raises(ImportInputError, match="position 0: the choices .* must be distinct references"):
        import_hsj(ws.root, src)
    src = fresh("grade")
    path, doc = _seq(src)
    doc["data"][0]["grade"] = 140
    path.write_text(json.dumps(doc))
    with pytest.raises(ImportInputError, match="sequence 1000: grade must be"):
        import_hsj(ws.root, src)
    # Nothing was written by any of them.
    assert not ws.has("similarity_trials")


def test_import_unmatched_stimuli_and_bad_hdf5(toy, tmp_path):
    import h5py

    ws, ids, rows = toy
    src = F.write_release(tmp_path / "hsj", rows, ids)
    text = (src / "stimuli.txt").read_text().replace(f"/toy/{ids[0]}.png", "/elsewhere/nobody.png")
    (src / "stimuli.txt").write_text(text)
    with pytest.raises(
        ImportInputError,
        match=r"stimuli.txt line 2: stimulus '/elsewhere/nobody.png' "
        r"matches no image of dataset 'toy' \(first used by ",
    ):
        import_hsj(ws.root, src)
    r = import_hsj(ws.root, src, skip_missing=True)
    shown = [x for x in rows if ids[0] not in (x["query"], *x["references"])]
    assert r["trials"] == len(shown) and r["dropped"] == 120 - len(shown)
    # psiz HDF5: a row with n_select >= its references.
    path = F.write_hdf5(tmp_path / "psiz", rows, ids)
    with h5py.File(path, "r+") as f:
        sel = f["n_select"][()]
        sel[4] = 8
        f["n_select"][...] = sel
    with pytest.raises(ImportInputError, match=r"obs.hdf5: row 4: n_select 8 with 8 references"):
        import_hsj(ws.root, path)
    (path.parent / "catalog.hdf5").unlink()
    with pytest.raises(ImportInputError, match="no stimuli.txt or catalog.hdf5"):
        import_hsj(ws.root, path)


def test_import_cli(toy, tmp_path, capsys):
    from conceptlens.cli import main

    ws, ids, rows = toy
    src = F.write_release(tmp_path / "hsj", rows, ids)
    assert main(["import", "hsj", "--workspace", str(ws.root), str(src), "--dataset", "toy"]) == 0
    assert "120 similarity trials" in capsys.readouterr().out
    assert main(["import", "hsj", "--workspace", str(ws.root), str(tmp_path / "nothing")]) == 1
    assert "no such file or folder" in capsys.readouterr().err


# ---- the analysis end to end ---------------------------------------------------------------
@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    return F.similarity_workspace(tmp_path_factory.mktemp("sim") / "ws")


def test_analysis_tables(analysed):
    ws = analysed
    assert validate(ws.root) == []
    fit = ws.read("similarity_fit", dataset="toy").to_pandas()
    assert set(fit["dim"]) == {2, 3} and set(fit["member"]) == {0, 1}
    kept = fit[fit["selected"]]
    assert kept["dim"].nunique() == 1
    emb = ws.read("psych_embedding", dataset="toy").to_pandas()
    assert set(emb["member"]) == {0, 1} and len(emb) == 2 * 48
    assert {len(v) for v in emb["mu"]} == {int(kept["dim"].iloc[0])}
    assert all((np.asarray(v) > 0).all() for v in emb["sigma"])
    proj = ws.read("projections", checkpoint_id="psych@toy", method="umap").to_pandas()
    assert len(proj) == 48 and np.isfinite(proj[["x", "y"]].to_numpy()).all()
    h = ws.read("human_alignment", dataset="toy").to_pandas()
    overall = h[h["label"].isna()].set_index(["checkpoint_id", "metric", "distance"])["value"]
    # People judge by colour; ck0's features separate the colours best, ck2's least.
    for metric in ("triplet_accuracy", "rsa"):
        v = overall.xs(("l2",), level=["distance"]).xs(metric, level="metric")
        assert v["ck0"] > v["ck1"] > v["ck2"]
    assert overall[("ck0", "triplet_accuracy", "l2")] > 0.75
    assert ((h["lo"] <= h["value"] + 1e-9) | h["lo"].isna()).mean() > 0.95
    per_label = h[h["label"].notna()]
    assert set(per_label["label"]) == {0, 1, 2} and per_label["label_name"].notna().all()
    # The people's own held-out triplet accuracy, for comparison (roads2021 Table 2).
    assert (kept["heldout_triplet_accuracy"] > 0.75).all()


def test_triplet_accuracy_in_the_table_matches_the_metric(analysed):
    ws = analysed
    t = ws.read("similarity_trials", dataset="toy").to_pandas()
    t = t[~t["is_catch"]]
    feats = ws.read("features", checkpoint_id="ck1").to_pandas()
    X = np.stack(feats["embedding"].to_numpy())
    pos = {i: k for k, i in enumerate(feats["image_id"])}
    stim = np.array(
        [
            [
                pos[r.query],
                *[pos[c] for c in r.chosen],
                *[pos[x] for x in r.references if x not in list(r.chosen)],
            ]
            for r in t.itertuples()
        ]
    )
    want = S.triplet_accuracy(X, stim, t["n_select"].to_numpy(), "cosine", t["weight"].to_numpy())
    h = ws.read("human_alignment", dataset="toy").to_pandas()
    row = h[
        (h["checkpoint_id"] == "ck1")
        & (h["metric"] == "triplet_accuracy")
        & (h["distance"] == "cosine")
        & h["label"].isna()
    ]
    assert row["value"].iloc[0] == pytest.approx(want)


def test_analysis_reuses_the_fit_and_unchanged_checkpoints(analysed, tmp_path):
    ws = Workspace(shutil.copytree(analysed.root, tmp_path / "ws"))
    emb = ws.table_path("psych_embedding", dataset="toy")
    before = emb.stat().st_mtime_ns
    ha = ws.read("human_alignment", dataset="toy").to_pandas()
    # A new checkpoint: only it is scored; the embedding is not fitted again.
    F_ = ws.read("features", checkpoint_id="ck0")
    ws.write("features", F_.drop_columns("checkpoint_id"), checkpoint_id="ck3")
    ck = ws.read("checkpoints").to_pylist()
    ws.write("checkpoints", pa.Table.from_pylist(ck + [{**ck[0], "checkpoint_id": "ck3"}]))
    assert runner.missing(ws.root, ["similarity"])["similarity"] == ["dataset=toy"]
    runner.run(ws.root, "similarity", F.FAST, progress_bars=False)
    assert emb.stat().st_mtime_ns == before
    after = ws.read("human_alignment", dataset="toy").to_pandas()
    same = (
        after[after["checkpoint_id"] != "ck3"]
        .sort_values(["checkpoint_id", "metric", "distance", "label"])
        .reset_index(drop=True)
    )
    old = ha.sort_values(["checkpoint_id", "metric", "distance", "label"]).reset_index(drop=True)
    assert same.equals(old)
    a = after[after["checkpoint_id"] == "ck3"].set_index(["metric", "distance", "label"])["value"]
    b = after[after["checkpoint_id"] == "ck0"].set_index(["metric", "distance", "label"])["value"]
    np.testing.assert_allclose(a.sort_index(), b.sort_index())  # the same features
    assert runner.missing(ws.root, ["similarity"])["similarity"] == []


def test_pseudo_checkpoint_of_projections_needs_its_embedding(analysed, tmp_path):
    ws = Workspace(shutil.copytree(analysed.root, tmp_path / "ws"))
    assert validate(ws.root, tables=["projections"]) == []
    shutil.rmtree(ws.root / "psych_embedding")
    problems = validate(ws.root, tables=["projections"])
    assert len(problems) == 1 and "checkpoint_id=psych@toy" in str(problems[0])
    assert "psych@X" in schema.TABLES_BY_NAME["projections"].column("checkpoint_id").rules()[-1] or any(
        "psych@" in r for r in schema.TABLES_BY_NAME["projections"].column("checkpoint_id").rules()
    )


def test_validation_of_trial_lists(analysed, tmp_path):
    ws = Workspace(shutil.copytree(analysed.root, tmp_path / "ws"))
    t = ws.read("similarity_trials", dataset="toy").drop_columns("dataset").to_pylist()[:3]
    # An unchosen reference becomes an image the workspace does not have.
    refs = t[1]["references"]
    k = max(i for i, r in enumerate(refs) if r not in t[1]["chosen"])
    t[1]["references"] = refs[:k] + ["nobody"] + refs[k + 1 :]
    t[1]["trial_id"] = "extra"
    ws.append(
        "similarity_trials",
        pa.Table.from_pylist(t[1:2], schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )
    problems = [str(p) for p in validate(ws.root, tables=["similarity_trials"])]
    assert (
        len(problems) == 1
        and "references" in problems[0]
        and "not found in images.image_id" in problems[0]
        and "extra" in problems[0]
    )
    with pytest.raises(WorkspaceError, match="not images of dataset 'toy'"):
        runner.run(ws.root, "similarity", F.FAST, progress_bars=False, force=True)


def test_options_checked():
    with pytest.raises(ValueError, match="--members must be at least 1"):
        by_name()["similarity"].options[1].check(0)
    assert list(itertools.islice(runner.all_options(), 1)) == ["seed"]


# ---- the page ------------------------------------------------------------------------------
def _open(monkeypatch, root, query=None):
    import sys

    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(root)])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.switch_page("pages/similarity.py")
    return at.run()


def _q(at, key):
    v = at.query_params.get(key)
    return v[0] if isinstance(v, list) else v


def test_page_renders_every_section_and_keeps_choices_in_the_url(analysed, monkeypatch):
    at = _open(
        monkeypatch,
        analysed.root,
        {"ds": "toy", "ckpt": "ck1", "img": "toy-0007", "dist": "l2", "metric": "rsa", "trial": "5"},
    )
    assert not at.exception, at.exception
    assert [h.value for h in at.header] == [
        "People's similarity map",
        "Score this selection",
        "Agreement with people",
        "Trials",
        "Fit diagnostics",
        "Convergence",
    ]
    # Convergence is not computed yet: the page says how.
    assert any("conceptlens analyze convergence" in c.value for c in at.code)
    assert at.selectbox(key="sim_ckpt").value == "ck1" and at.selectbox(key="sim_img").value == "toy-0007"
    assert at.selectbox(key="sim_dist").value == "l2" and at.selectbox(key="sim_metric").value == "rsa"
    assert at.number_input(key="sim_trial").value == 5
    # The map is the WebGL projection view; agreement, per label and the fit are Plotly figures.
    assert len(at.get("plotly_chart")) == 3
    (view,) = [
        e for e in at.get("component_instance") if e.proto.component_name.endswith("projection.projection")
    ]
    # Changing choices writes them to the URL.
    at.selectbox(key="sim_dist").set_value("cosine").run()
    at.selectbox(key="sim_color").set_value("shape").run()
    at.number_input(key="sim_trial").set_value(9).run()
    assert not at.exception
    # ... and cosine, the default distance, leaves the link (docs/dashboard.md).
    assert (_q(at, "dist"), _q(at, "color"), _q(at, "trial")) == (None, "shape", "9")
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "Nearest for people" in text and "Nearest for ck1" in text
    assert "1st choice" in " ".join(str(e.proto) for e in at.get("image"))


def test_page_draws_the_convergence_curves(factory_template, monkeypatch):
    from conceptlens.figures.similarity import convergence_curves
    from conceptlens.views.similarity import convergence

    at = _open(monkeypatch, factory_template, {"ds": "toy"})
    assert not at.exception, at.exception
    assert "Convergence" in [h.value for h in at.header]
    assert not any("analyze convergence" in c.value for c in at.code)
    from conceptlens.db import WorkspaceDB

    conv = convergence(WorkspaceDB(factory_template), "toy")
    assert list(conv["n_trials"]) == [10, 20, 30]
    fig = convergence_curves(conv)
    # Three panels; the first share has no previous one to agree with.
    assert [len(t.x) for t in fig.data] == [3, 3, 2]
    assert any("3 growing shares" in c.value for c in at.caption)


def test_page_without_trials_says_how_to_import(tmp_path, monkeypatch):
    ws = make_workspace(tmp_path / "ws")
    at = _open(monkeypatch, ws.root)
    assert not at.exception
    assert any("conceptlens import hsj" in c.value for c in at.code)


def test_page_before_the_analysis_shows_the_command_and_the_trials(tmp_path, monkeypatch):
    ws = make_workspace(tmp_path / "ws")
    F.add_trials(ws, 60)
    at = _open(monkeypatch, ws.root)
    assert not at.exception
    assert [h.value for h in at.header] == ["Trials"]
    assert any("conceptlens analyze similarity" in c.value for c in at.code)


def test_demo_people_are_simulated_and_say_so(tmp_path):
    from conceptlens.demo.build import build_data

    ws = build_data(tmp_path / "demo", seed=3, n_shapes=150, progress=False)
    t = ws.read("similarity_trials", dataset="shapes").to_pandas()
    info = ws.meta()["provenance"]["similarity_trials"]
    assert info["simulated"] is True and "not collected" in info["note"]
    assert t["agent_id"].str.startswith("simulated-").all() and t["trial_id"].str.startswith("sim-").all()
    sessions = t["trial_id"].str[4:8]
    assert (t.groupby(sessions)["is_catch"].sum() == 4).all()  # 4 catch trials a session
    assert (t["weight"] >= 0.5).all() and t.groupby(sessions)["weight"].nunique().eq(1).all()
    catch = t[t["is_catch"]]
    assert all(q in refs for q, refs in zip(catch["query"], catch["references"]))
    assert set(t["kind"]) == {"8rank2"} and (t["chosen"].map(len) == 2).all()
    assert validate(ws.root, tables=["similarity_trials"]) == []


def test_page_on_the_demo_says_things_once_and_shows_missing_values_as_a_dash(demo_ws, tmp_path, monkeypatch):
    from tests.conftest import copy_ws

    ws = copy_ws(demo_ws, tmp_path / "demo")  # hard links: the demo is only read
    at = _open(monkeypatch, ws, {"ds": "shapes", "trial": "0"})
    assert not at.exception, at.exception
    # The simulated-people warning does not repeat its title ("Simulated people. Simulated people: ...").
    (warning,) = [w.value for w in at.warning if "Simulated people" in w.value]
    assert warning.count("Simulated people") == 1 and "Answers drawn" in warning
    # Every table shows a missing value (the epoch of CLIP or PCA) as an em dash, not "None".
    assert {d.proto.placeholder for d in at.dataframe} == {"\u2014"}
    # A reference the person did not choose says so, not a lone "·".
    captions = [c for img in at.get("image") for c in (i.caption for i in img.proto.imgs)]
    assert "not chosen" in captions and "·" not in captions
