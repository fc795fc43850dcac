"""conceptlens/metrics/concepts.py: AUCs, impurity, greedy alignment, the batched classifier and
concept columns, against values computed another way."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.metrics import concepts as CQ


# ---- concepts --------------------------------------------------------------------------------
def test_one_vs_rest_auc_skips_classes_absent_from_the_targets():
    """Class 2 has a column but no row: the macro mean is over classes 0, 1 and 3 only."""
    rng = np.random.default_rng(21)
    y = rng.choice([0, 1, 3], 300)
    p = rng.dirichlet(np.ones(4), 300) + 0.3 * np.eye(4)[y]
    want = np.mean([CQ.binary_auc(y == c, p[:, c]) for c in (0, 1, 3)])
    assert CQ.ovr_auc(y, p) == pytest.approx(want, abs=1e-12)
    assert CQ.multiclass_auc(y, p, multiclass="ovr") == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("auc", ["ovo_auc", "ovr_auc"])
def test_auc_errors_list_the_unknown_targets_sorted(auc):
    y = np.array([0, 7, 1, 5, 0, 1])
    with pytest.raises(ValueError, match=r"y_true has values \[5, 7\] that proba"):
        getattr(CQ, auc)(y, np.full((6, 3), 1 / 3))


def test_an_impurity_error_gives_the_shapes_in_argument_order():
    with pytest.raises(ValueError, match=r"got \(3, 3\) and \(2, 2\)$"):
        CQ.ois(np.eye(3), np.eye(2))


def test_greedy_alignment_keeps_the_concepts_aligned_by_name_and_uses_each_once():
    """ "a" is aligned by name; c1 predicts a best of all (0.99), but a is taken: the greedy
    step chooses among the true concepts left (y) and the learnt ones left (c1, c2), and a
    learnt concept is never used twice (c2 is best for both y and z)."""
    P = np.array(
        [
            [0.90, 0.95, 0.97],  # a: taken by name, even though it predicts y and z best
            [0.99, 0.60, 0.55],  # c1
            [0.50, 0.70, 0.80],  # c2
            [0.50, 0.52, 0.51],  # c3
        ]
    )
    # by hand: z gets c2 (0.80, the best cell left), then y gets c1 (0.60 > c3's 0.52)
    assert CQ.align(P, ["a", "c1", "c2", "c3"], ["a", "y", "z"]) == [0, 1, 2]
    # every concept of the same name is aligned by name, not only the first one
    Q = np.array([[0.9, 0.95], [0.8, 0.6], [0.7, 0.65]])
    assert CQ.align(Q, ["c1", "a", "b"], ["a", "b"]) == [1, 2]
    # the greedy step weighs every learnt concept left, not only the first one
    assert CQ.align(np.array([[0.5, 0.6], [0.9, 0.55], [0.7, 0.8]]), ["c1", "c2", "c3"], ["y", "z"]) == [1, 2]


def test_a_batched_classifier_is_the_adam_loop_of_its_definition(monkeypatch):
    """One pair (3-D input, binary target), trained 25 steps: the probabilities it scores on
    the test rows are those of a plain loop of the documented classifier (the same seeded
    initialisation and minibatches, softmax cross-entropy with L2, Adam with its bias
    corrections at each step t)."""
    rng = np.random.default_rng(31)
    n, H, steps, bs, lr, alpha = 120, 8, 25, 16, 0.02, 1e-4
    X = rng.normal(size=(n, 3))
    y = ((X[:, 0] * X[:, 1] + X[:, 2]) > 0).astype(np.int64)
    train, test = np.arange(80), np.arange(80, n)
    seen = []
    real_auc = CQ.multiclass_auc
    monkeypatch.setattr(
        CQ, "multiclass_auc", lambda yj, p, **kw: seen.append(p.copy()) or real_auc(yj, p, **kw)
    )
    CQ.pairwise_mlp_auc(
        [X], y[:, None], train, test, hidden=H, steps=steps, batch_size=bs, lr=lr, alpha=alpha
    )

    # the loop, in float64
    Xs = X.astype(np.float32).astype(np.float64)
    Xs = (Xs - Xs[train].mean(axis=0)) / Xs[train].std(axis=0)
    r = np.random.default_rng(0)
    l1, l2 = np.sqrt(6 / (3 + H)), np.sqrt(6 / (H + 2))
    params = [r.uniform(-l1, l1, (1, 3, H))[0], r.uniform(-l1, l1, (1, 1, H))[0]]
    params += [r.uniform(-l2, l2, (1, H, 2))[0], r.uniform(-l2, l2, (1, 1, 2))[0]]
    params = [p.astype(np.float32).astype(np.float64) for p in params]
    onehot = np.eye(2)[y]

    def forward(rows):
        W1, c1, W2, c2 = params
        pre = Xs[rows] @ W1 + c1
        h = np.maximum(pre, 0)
        z = h @ W2 + c2
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return pre, h, e / e.sum(axis=1, keepdims=True)

    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    order = np.empty(0, np.int64)
    for t in range(1, steps + 1):
        if len(order) < bs:
            order = np.concatenate([order, r.permutation(train)])
        idx, order = order[:bs], order[bs:]
        pre, h, p = forward(idx)
        W1, _, W2, _ = params
        g = (p - onehot[idx]) / bs
        gh = (g @ W2.T) * (pre > 0)
        grads = [
            Xs[idx].T @ gh + alpha * W1,
            gh.sum(0, keepdims=True),
            h.T @ g + alpha * W2,
            g.sum(0, keepdims=True),
        ]
        for k, gr in enumerate(grads):
            m1[k] = 0.9 * m1[k] + 0.1 * gr
            m2[k] = 0.999 * m2[k] + 0.001 * gr * gr
            params[k] = params[k] - lr * (m1[k] / (1 - 0.9**t)) / (np.sqrt(m2[k] / (1 - 0.999**t)) + 1e-8)
    assert len(seen) == 1
    assert seen[0] == pytest.approx(forward(test)[2], abs=2e-4)


def test_concept_columns_follow_each_concepts_own_width():
    """Concepts of widths 1, 3 and 2 (a 3-D one given as (n, 3, 1)) occupy these columns of
    `np.hstack`: each width is its own concept's, not the first one's."""
    reps = [np.zeros((4, 1)), np.ones((4, 3, 1)), np.full((4, 2), 2.0)]
    cols = CQ.concept_columns(reps)
    assert [c.tolist() for c in cols] == [[0], [1, 2, 3], [4, 5]]
    flat = np.hstack([r.reshape(4, -1) for r in reps])
    assert [set(flat[:, c].ravel().tolist()) for c in cols] == [{0.0}, {1.0}, {2.0}]
