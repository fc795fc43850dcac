"""The `convergence` analysis (conceptlens/analysis/convergence.py): the shares of trials it fits, in
order, and the trials it holds out and scores. Each test is written against a data-flow bug (issue
29; tools/dataflow_mutants.py): a filter not applied, the first element used for every one, two
arguments swapped, a sort the wrong way."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from conceptlens import rng as R
from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.runner import run
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from tests import helpers_similarity
from tests.conftest import copy_ws
from tests.helpers_analysis_inputs import CONV_OPTS, append_trial_rows, stranger_trials
from tests.helpers_similarity import OPTS, add_trials, other_choice

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
fitted = helpers_similarity.fitted
ws = helpers_similarity.ws


# ---- which rows the analysis uses ---------------------------------------------------------------
def _spy_convergence(monkeypatch, root):
    """Run convergence recording what each fit and each coarse loss is given."""
    from conceptlens.embedding import active, psych

    fits, losses = [], []
    real_fit, real_loss = psych.fit_embedding, active.coarse_grained_loss

    def fit(share, n, dim, **kw):
        fits.append((share, kw["seed"], kw["member"]))
        return real_fit(share, n, dim, **kw)

    def loss(ens, stim, sel, beta):
        losses.append((np.array(stim), np.array(sel)))
        return real_loss(ens, stim, sel, beta)

    monkeypatch.setattr(psych, "fit_embedding", fit)
    monkeypatch.setattr(active, "coarse_grained_loss", loss)
    runner.run(root, "convergence", CONV_OPTS, with_dependencies=False, progress_bars=False)
    return fits, losses


def test_convergence_fits_known_non_catch_train_trials_in_order_and_scores_the_test_ones(
    factory_template, tmp_path, monkeypatch
):
    """Each share is the first trials, in trial-id order, of the non-catch `train` trials
    whose images are all embedded; the coarse loss is measured on the `test` ones; each
    member of a share has its own seed. Catches catch trials or trials of unknown images
    fitted or measured (any of the filters and their aligned weights dropped), the shares
    taken in reverse collection order, and every member fitted with the first's seed."""
    from conceptlens.analysis.common import encode
    from conceptlens.embedding.psych import read_embedding

    root = copy_ws(factory_template, tmp_path / "ws")
    ws = Workspace(root)
    t = stranger_trials(ws)
    fits, losses = _spy_convergence(monkeypatch, root)
    index = {s: k for k, s in enumerate(read_embedding(ws, "toy")[0])}
    ok = ~t["is_catch"]
    train = t[ok & (t["split"] == "train")].sort_values("trial_id")
    stim, sel = encode(train, index)
    train, stim, sel = train[stim[:, 0] >= 0], stim[stim[:, 0] >= 0], sel[stim[:, 0] >= 0]
    assert len(fits) == 4
    assert len({f[1] for f in fits}) == 4  # four members, four seeds
    ends = [round(len(stim) / 2), len(stim)]
    # each member's seed derived from (--seed 0, "convergence.member_fit", [the unit, r, m])
    unit = {"dataset": "toy"}
    for (share, seed, member), (r, m) in zip(fits, [(0, 0), (0, 1), (1, 0), (1, 1)]):
        assert (seed, member) == (R.int_seed(0, "convergence.member_fit", [unit, r, m]), m)
        np.testing.assert_array_equal(share.stimulus_set, stim[: ends[r]])
        np.testing.assert_array_equal(share.n_select, sel[: ends[r]])
        np.testing.assert_array_equal(share.weight, train["weight"].to_numpy(float)[: ends[r]])
    test = t[ok & (t["split"] == "test")].sort_values("trial_id")
    cstim, csel = encode(test, index)
    for s, c in losses:
        np.testing.assert_array_equal(s, cstim[cstim[:, 0] >= 0])
        np.testing.assert_array_equal(c, csel[cstim[:, 0] >= 0])


def test_without_test_trials_the_coarse_set_is_held_out_of_every_share(
    factory_template, tmp_path, monkeypatch
):
    """No `test` trial: a seeded tenth of the train trials is the coarse set, and no share
    fits any of them. Catches the held-out tenth left in the train trials."""
    root = copy_ws(factory_template, tmp_path / "ws")
    ws = Workspace(root)
    t = ws.read("similarity_trials", dataset="toy").drop_columns(["dataset"]).to_pandas()
    import shutil

    shutil.rmtree(ws.partition_dir("similarity_trials", dataset="toy"))  # append-only: start again
    append_trial_rows(ws, t.assign(split="train").astype(object).where(t.notna(), None).to_dict("records"))
    fits, losses = _spy_convergence(monkeypatch, root)
    coarse = {tuple(r) for r in losses[0][0]}
    assert 0 < len(coarse) < len(t)
    last = fits[-1][0].stimulus_set
    assert len(last) + len(losses[0][0]) == len(t)
    assert not coarse & {tuple(r) for r in last}


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


# ---- the shares of trials by round -------------------------------------------------------------
def test_trials_before_a_single_round_and_that_round_make_two_shares(factory_copy):
    """Imported trials (no round) then one study round: two shares, whatever `--rounds` says."""
    ws = Workspace(factory_copy)
    t = ws.read("similarity_trials", dataset="toy").to_pandas().drop(columns="dataset", errors="ignore")
    assert t["round"].isna().all()  # the factory's trials came in no round
    again = t[(t["split"] == "train") & ~t["is_catch"]].head(30)
    again = again.assign(trial_id="r0." + again["trial_id"], round=0)
    again["round"] = again["round"].astype("Int64")
    ws.append(
        "similarity_trials",
        pa.Table.from_pandas(again, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )
    t = ws.read("similarity_trials", dataset="toy").to_pandas()
    opts = {"rounds": 3, "convergence_members": 2, "max_epochs": 10}
    ctx = run(factory_copy, ["convergence"], options=opts, with_dependencies=False, progress_bars=False)
    fitted = t[(t["split"] == "train") & ~t["is_catch"]]
    before = int(fitted["round"].isna().sum())
    c = ws.read("similarity_convergence", dataset="toy").to_pandas().sort_values("round")
    assert 0 < before < len(fitted)
    assert list(c["round"]) == [0, 1] and list(c["n_trials"]) == [before, len(fitted)]
    assert any("one share per study round (2" in n for n in ctx.notes)
    # Written as the schema says, with the fingerprint that marks the unit done.
    assert validate(factory_copy) == []
    assert runner.missing(factory_copy, ["convergence"])["convergence"] == []
