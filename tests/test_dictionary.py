"""conceptlens.metrics.dictionary: dictionary atoms of one checkpoint's features.

Each method against a direct call of its library with the same settings and seeds; r2,
L0 and dead atoms against values computed another way; planted atoms recovered;
match_atoms against brute force and under permutation and rescaling; stability's subsets
and fits redone by hand; members' order and ties; bad input named; determinism and the
caller's global random state.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.decomposition import MiniBatchDictionaryLearning
from sklearn.metrics import r2_score

from conceptlens import rng as R
from conceptlens.metrics import dictionary as D

N, DIM, K = 60, 12, 4
FAST = dict(max_iter=150, sae_epochs=20, sae_batch=16, lr=1e-2)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # direct calls
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def planted(seed: int = 0, n: int = N, d: int = DIM, k: int = K):
    """(X, H): X = W @ H exactly, W, H >= 0, each atom alone in three rows of W (separable,
    so the atoms are identifiable, also on a subset), H's rows sparse and distinct."""
    g = np.random.default_rng(seed)
    H = g.random((k, d)) * (g.random((k, d)) < 0.6) + 0.01
    W = g.random((n, k)) * (g.random((n, k)) < 0.5)
    W[: 3 * k] = np.tile(np.eye(k), (3, 1))
    return (W @ H).astype(np.float32), H


X_POS, H_POS = planted()
X_SIGNED = X_POS - np.float32(0.4)


@contextlib.contextmanager
def seeded(seed, purpose, unit=None):
    """What a direct user of the libraries would write: torch's and numpy's global
    generators seeded with the stream's integer, both restored after."""
    value = R.int_seed(seed, purpose, unit)
    state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(value)
        np.random.seed(value)
        yield value
    np.random.set_state(state)


# -- each method against its library called directly ---------------------------------------


def direct(method, X, k, seed, unit=None, max_iter=150, sae_epochs=20, sae_batch=16, lr=1e-2, top_k=None):
    """(atoms, codes) of the library called by hand with the settings the module documents."""
    oc = D._overcomplete()
    # the library sees the features divided by their root-mean-square row norm; the atoms
    # it returns are scaled back
    scale = float(np.sqrt((X.astype(np.float64) ** 2).sum(axis=1).mean()))
    X = np.ascontiguousarray(X / np.float32(scale), dtype=np.float32)
    T = torch.from_numpy(X)
    purpose = f"dictionary.{method}"
    if method == "sklearn_nmf":
        alpha = 0.01 * np.sqrt((X.astype(np.float64) ** 2).sum(axis=1).mean())
        m = MiniBatchDictionaryLearning(
            n_components=k,
            alpha=alpha,
            max_iter=max_iter,
            fit_algorithm="cd",
            batch_size=256,
            transform_algorithm="lasso_cd",
            transform_alpha=alpha,
            positive_code=True,
            positive_dict=True,
            random_state=R.int_seed(seed, purpose, unit),
        )
        codes = m.fit(X).transform(X)
        return m.components_ * scale, codes
    with seeded(seed, purpose, unit):
        if method == "nmf":
            Z, Dm = oc.NMF(nb_concepts=k, solver="hals").fit(T, max_iter=max_iter)
        elif method == "semi_nmf":
            Z, Dm = oc.SemiNMF(nb_concepts=k, solver="mu").fit(T, max_iter=max_iter)
        elif method == "convex_nmf":
            Z, Dm = oc.ConvexNMF(nb_concepts=k, solver="pgd", strict_convex=True).fit(T, max_iter=max_iter)
        else:
            from overcomplete.sae.losses import top_k_auxiliary_loss
            from overcomplete.sae.train import train_sae
            from torch.utils.data import DataLoader, TensorDataset

            rows = np.random.default_rng(R.entropy(seed, "dictionary.topk_sae.init", unit)).choice(
                len(X), k, replace=False
            )
            # trained on the features minus their mean (Gao et al.'s b_pre), for at least
            # 500 optimiser steps
            Xc = np.asarray(X - X.mean(axis=0, dtype=np.float64).astype(np.float32), np.float32)
            T = torch.from_numpy(Xc)
            init = Xc[rows] / np.linalg.norm(Xc[rows], axis=1, keepdims=True)
            sae_epochs = max(sae_epochs, -(-500 // -(-len(X) // sae_batch)))
            top = top_k or max(2, k // 8)
            model = oc.TopKSAE(X.shape[1], nb_concepts=k, top_k=top, dictionary_params={"initializer": init})
            with torch.no_grad():
                model.encoder.final_block[0].weight.copy_(torch.from_numpy(init))
                model.encoder.final_block[0].bias.zero_()
            g = torch.Generator().manual_seed(R.int_seed(seed, purpose + ".shuffle", unit))
            loader = DataLoader(TensorDataset(T), batch_size=sae_batch, shuffle=True, generator=g)
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            train_sae(model, loader, top_k_auxiliary_loss, opt, nb_epochs=sae_epochs, monitoring=0)
            model.eval()
            with torch.no_grad():
                Z = model.encode(T)[1]
                Dm = model.get_dictionary()
    return Dm.detach().numpy() * scale, Z.detach().numpy()


@pytest.mark.parametrize("method", D.METHODS)
def test_each_method_is_its_library_called_directly(method):
    X = X_POS if method in D.NEEDS_NON_NEGATIVE else X_SIGNED
    got = D.fit(X, method, K, 7, unit={"checkpoint_id": "ck"}, **FAST)
    atoms, codes = direct(method, X, K, 7, unit={"checkpoint_id": "ck"})
    np.testing.assert_allclose(got.atoms, atoms, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got.codes, codes, atol=1e-5, rtol=0)
    assert got.method == method and got.atoms.dtype == got.codes.dtype == np.float32
    assert got.atoms.shape == (K, DIM) and got.codes.shape == (N, K)
    assert (got.codes >= 0).all(), "codes are non-negative for every method"
    assert got.solver.split("(")[0] in (
        "overcomplete.NMF",
        "overcomplete.SemiNMF",
        "overcomplete.ConvexNMF",
        "overcomplete.TopKSAE",
        "sklearn.MiniBatchDictionaryLearning",
    )
    # the summary is computed on the fit's own product (another way: sklearn's r2_score)
    recon = codes.astype(np.float64) @ atoms
    if method == "topk_sae":  # the atoms are directions from the mean feature
        recon += X.mean(axis=0, dtype=np.float64).astype(np.float32)
    want = r2_score(X.astype(np.float64), recon, multioutput="variance_weighted")
    assert got.r2 == pytest.approx(want, abs=1e-6)


def test_convex_nmf_atoms_are_convex_combinations_of_images():
    """strict_convex: each atom lies in the convex hull of the images (its W row sums to 1)."""
    f = D.fit(X_SIGNED, "convex_nmf", K, 3, **FAST)
    # a convex combination lies inside the images' bounding box, coordinate by coordinate
    assert (f.atoms >= X_SIGNED.min(axis=0) - 1e-5).all() and (f.atoms <= X_SIGNED.max(axis=0) + 1e-5).all()
    # and, pushed far from the images, the box test fails (it can fail)
    assert not (f.atoms * 10 <= X_SIGNED.max(axis=0) + 1e-5).all()


# -- r2, L0, dead ---------------------------------------------------------------------------


@PROPS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 30),
    d=st.integers(1, 8),
    k=st.integers(1, 6),
    density=st.floats(0.0, 1.0),
    block=st.integers(1, 40),
)
def test_summary_against_values_computed_another_way(seed, n, d, k, density, block):
    """Blocks of rows of every size, the last one partial or not."""
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, d)).astype(np.float32)
    codes = (g.random((n, k)) * (g.random((n, k)) < density)).astype(np.float32)
    atoms = g.normal(size=(k, d)).astype(np.float32)
    saved, D.SUMMARY_BLOCK = D.SUMMARY_BLOCK, block
    try:
        f = D._fit_summary("nmf", "s", X, atoms, codes)
    finally:
        D.SUMMARY_BLOCK = saved
    ss_res = sum(
        (float(X[i, j]) - float(codes[i] @ atoms[:, j].astype(np.float64))) ** 2
        for i in range(n)
        for j in range(d)
    )
    ss_tot = sum(
        (float(X[i, j]) - float(X[:, j].astype(np.float64).mean())) ** 2 for i in range(n) for j in range(d)
    )
    assert f.r2 == pytest.approx(1 - ss_res / ss_tot, rel=1e-6, abs=1e-9)
    assert f.l0 == pytest.approx(sum(int(c != 0) for c in codes.ravel()) / n)
    assert f.dead.tolist() == [all(codes[i, j] == 0 for i in range(n)) for j in range(k)]


def test_r2_is_nan_without_variance():
    X = np.ones((5, 3), np.float32)
    assert np.isnan(D._fit_summary("nmf", "s", X, np.ones((1, 3)), np.ones((5, 1))).r2)


def test_nmf_recovers_planted_atoms():
    f = D.fit(X_POS, "nmf", K, 0, max_iter=500)
    assert f.r2 > 0.999
    _, cos = D.match_atoms(f.atoms, H_POS)
    assert cos.min() > 0.99, cos
    assert not f.dead.any() and 0 < f.l0 <= K


# -- match_atoms ----------------------------------------------------------------------------

shapes = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(3, 10))


@PROPS
@given(shapes, st.data())
def test_matching_finds_a_permuted_rescaled_copy(shape, data):
    seed, k, d = shape
    g = np.random.default_rng(seed)
    A = g.normal(size=(k, d))
    perm = np.array(data.draw(st.permutations(range(k))))
    scale = np.array(
        data.draw(st.lists(st.sampled_from([-3.0, -0.5, 0.01, 2.0, 100.0]), min_size=k, max_size=k))
    )
    B = A[perm] * scale[:, None]
    idx, cos = D.match_atoms(A, B)
    assert (perm[idx] == np.arange(k)).all()  # B[idx[i]] is A[i]
    np.testing.assert_allclose(cos, 1.0, atol=1e-9)


@PROPS
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 5), st.integers(1, 6), st.booleans())
def test_matching_against_brute_force(seed, k, k2, d, zero_row):
    g = np.random.default_rng(seed)
    A, B = g.normal(size=(k, d)), g.normal(size=(k2, d))
    if zero_row:
        A[0] = 0
    idx, cos = D.match_atoms(A, B)
    C = np.array(
        [[abs(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)) if a.any() else 0.0 for b in B] for a in A]
    )
    if k2 >= k:
        best = max(sum(C[i, p[i]] for i in range(k)) for p in itertools.permutations(range(k2), k))
    else:
        best = max(sum(C[p[j], j] for j in range(k2)) for p in itertools.permutations(range(k), k2))
    matched = idx >= 0
    assert matched.sum() == min(k, k2) and len(set(idx[matched])) == matched.sum()
    assert np.isnan(cos[~matched]).all() and (idx[~matched] == -1).all()
    np.testing.assert_allclose(cos[matched], C[np.flatnonzero(matched), idx[matched]], atol=1e-12)
    assert cos[matched].sum() == pytest.approx(best, abs=1e-9)
    assert ((cos[matched] >= 0) & (cos[matched] <= 1)).all()
    if zero_row and matched[0]:
        assert cos[0] == 0.0


def test_matching_refuses_mismatched_dims():
    with pytest.raises(ValueError, match="the same number of columns"):
        D.match_atoms(np.ones((2, 3)), np.ones((2, 4)))


# -- stability ------------------------------------------------------------------------------


def test_stability_is_two_subset_fits_matched():
    unit = {"checkpoint_id": "ck", "k": K}
    s, cos = D.stability(X_POS, "nmf", K, 5, unit=unit, fraction=0.8, max_iter=200)
    again = D.stability(X_POS, "nmf", K, 5, unit=unit, fraction=0.8, max_iter=200)
    assert s == again[0] and np.array_equal(cos, again[1], equal_nan=True)
    fits = []
    for i in (0, 1):
        rows = np.random.default_rng(R.entropy(5, "dictionary.stability", [unit, i])).choice(
            N, 48, replace=False
        )
        fits.append(D.fit(X_POS[np.sort(rows)], "nmf", K, 5, unit=[unit, i], max_iter=200))
    want = D.match_atoms(fits[0].atoms, fits[1].atoms)[1]
    np.testing.assert_array_equal(cos, want)
    assert s == pytest.approx(float(np.mean(want)))
    assert s > 0.99, "planted atoms are found on both subsets"
    assert cos.shape == (K,) and ((cos >= 0) & (cos <= 1)).all()


def test_stability_is_bounded_for_a_random_method_and_depends_on_the_seed():
    s0, c0 = D.stability(X_SIGNED, "semi_nmf", K, 0, **FAST)
    s1, _ = D.stability(X_SIGNED, "semi_nmf", K, 1, **FAST)
    assert 0 <= s0 <= 1 and ((c0 >= 0) & (c0 <= 1)).all() and s0 != s1


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, float("nan"), True])
def test_stability_refuses_a_bad_fraction(fraction):
    with pytest.raises(ValueError, match="fraction"):
        D.stability(X_POS, "nmf", K, 0, fraction=fraction)


def test_stability_needs_k_atoms_per_subset():
    with pytest.raises(ValueError, match="--atoms"):
        D.stability(X_POS, "nmf", 58, 0, fraction=0.9)


# -- members --------------------------------------------------------------------------------


def test_members_order_ties_and_short_atoms():
    codes = np.array(
        [
            [0.5, 0.0, 0.0],
            [0.9, 0.0, 0.0],
            [0.5, 2.0, 0.0],
            [0.1, 0.0, 0.0],
            [0.9, 0.0, 0.0],
        ]
    )
    m = D.members(codes, 3)
    assert [x.tolist() for x in m] == [[1, 4, 0], [2], []]  # ties by lower row; fewer positive; dead
    assert [x.tolist() for x in D.members(codes, 10)][0] == [1, 4, 0, 2, 3]


@PROPS
@given(st.integers(0, 2**32 - 1), st.integers(1, 25), st.integers(1, 4), st.integers(1, 30))
def test_members_are_the_rows_that_beat_every_other(seed, n_rows, k, n):
    g = np.random.default_rng(seed)
    codes = g.integers(-1, 4, size=(n_rows, k)).clip(0).astype(float)  # many ties and zeros
    for j, rows in enumerate(D.members(codes, n)):
        col = codes[:, j]
        positive = np.flatnonzero(col > 0)
        assert len(rows) == min(n, len(positive)) and len(set(rows.tolist())) == len(rows)
        assert (col[rows] > 0).all()
        others = np.setdiff1d(positive, rows)
        for m in rows:
            assert all(col[m] > col[r] or (col[m] == col[r] and m < r) for r in others)
        key = [(-col[r], r) for r in rows]
        assert key == sorted(key)


def test_members_refuses_bad_n():
    with pytest.raises(ValueError, match="n must be a positive integer"):
        D.members(np.ones((3, 2)), 0)


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -1, N + 1, 2.0, True])
def test_atoms_out_of_range_name_the_option(k):
    with pytest.raises(ValueError, match="--atoms"):
        D.fit(X_POS, "nmf", k, 0)


def test_unknown_method_names_the_option():
    with pytest.raises(ValueError, match="--methods.*pca"):
        D.fit(X_POS, "pca", K, 0)


@pytest.mark.parametrize("method", D.NEEDS_NON_NEGATIVE)
def test_signed_features_are_refused_by_non_negative_methods(method):
    with pytest.raises(ValueError, match=f"--methods {method} needs non-negative features.*semi_nmf"):
        D.fit(X_SIGNED, method, K, 0)
    with pytest.raises(ValueError, match="emb.*semi_nmf"):
        D.check_features(X_SIGNED, method, name="emb")


@pytest.mark.parametrize(
    "X, match",
    [
        (np.where(np.arange(N * DIM).reshape(N, DIM) == 7, np.nan, 1.0), "NaN or infinite"),
        (np.full((N, DIM), np.inf), "NaN or infinite"),
        (np.full((N, DIM), 1e300), "NaN or infinite"),  # overflows float32
        (np.ones(5), "2-D"),
        (np.ones((1, 4)), "at least 2 rows"),
        (np.ones((4, 0)), "at least 2 rows and 1 column"),
    ],
)
def test_bad_features_name_the_table(X, match):
    with pytest.raises(ValueError, match=f"feats.*{match}|{match}"):
        D.check_features(X, "semi_nmf", name="feats")
    with pytest.raises(ValueError, match="features"):
        D.fit(X, "semi_nmf", 1, 0)


def test_check_features_gives_float32_c_contiguous():
    A = D.check_features(np.asfortranarray(X_POS.astype(np.float64)), "nmf")
    assert A.dtype == np.float32 and A.flags.c_contiguous and np.array_equal(A, X_POS)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"top_k": 0}, "--top-k"),
        ({"top_k": K + 1}, "--top-k"),
        ({"lr": 0.0}, "lr"),
        ({"sae_batch": 0}, "sae_batch"),
    ],
)
def test_sae_settings_are_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        D.fit(X_SIGNED, "topk_sae", K, 0, **kw)


def test_default_top_k():
    assert [D.default_top_k(k) for k in (1, 2, 8, 16, 24, 32, 64)] == [1, 2, 2, 2, 3, 4, 8]


# -- determinism and global state -----------------------------------------------------------


@pytest.mark.parametrize("method", D.METHODS)
def test_same_seed_is_bit_identical_and_globals_are_untouched(method):
    X = X_POS if method in D.NEEDS_NON_NEGATIVE else X_SIGNED
    torch_state, numpy_state = torch.random.get_rng_state(), np.random.get_state()
    a = D.fit(X, method, K, 11, unit={"checkpoint_id": "a"}, **FAST)
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    after = np.random.get_state()
    assert (
        after[0] == numpy_state[0]
        and np.array_equal(after[1], numpy_state[1])
        and after[2:] == numpy_state[2:]
    )
    b = D.fit(X, method, K, 11, unit={"checkpoint_id": "a"}, **FAST)
    assert np.array_equal(a.atoms, b.atoms) and np.array_equal(a.codes, b.codes)
    assert a.r2 == b.r2 and a.l0 == b.l0 and a.solver == b.solver


@pytest.mark.parametrize("method", ["semi_nmf", "convex_nmf", "topk_sae", "sklearn_nmf"])
def test_another_seed_or_unit_changes_a_random_method(method):
    X = X_POS if method in D.NEEDS_NON_NEGATIVE else X_SIGNED
    a = D.fit(X, method, K, 11, **FAST)
    assert not np.array_equal(a.atoms, D.fit(X, method, K, 12, **FAST).atoms)
    assert not np.array_equal(a.atoms, D.fit(X, method, K, 11, unit={"checkpoint_id": "b"}, **FAST).atoms)


def test_nmf_with_nndsvda_barely_depends_on_the_seed():
    """NNDSVDa is an SVD: the seed moves only the randomized SVD's projections."""
    a, b = (D.fit(X_POS, "nmf", K, s, max_iter=300) for s in (0, 1))
    _, cos = D.match_atoms(a.atoms, b.atoms)
    assert cos.min() > 0.999


def test_torch_seeded_is_the_stream_and_restores_on_error():
    before = torch.random.get_rng_state()
    np_before = np.random.get_state()[1].copy()
    with R.torch_seeded(3, "p", {"u": 1}) as value:
        x = torch.rand(4)
        y = np.random.random_sample(2)
    assert value == R.int_seed(3, "p", {"u": 1})
    assert torch.equal(x, torch.rand(4, generator=torch.Generator().manual_seed(value)))
    assert np.array_equal(y, np.random.RandomState(value).random_sample(2))
    with pytest.raises(RuntimeError), R.torch_seeded(3, "p"):
        torch.rand(3)
        raise RuntimeError("boom")
    assert torch.equal(torch.random.get_rng_state(), before)
    assert np.array_equal(np.random.get_state()[1], np_before)


@pytest.mark.parametrize("method", D.METHODS)
@pytest.mark.parametrize("c", [1e-9, 1e4])
def test_scaling_the_features_scales_the_atoms_and_nothing_else(method, c):
    """A metamorphic relation of every method: features multiplied by c give atoms multiplied
    by c and the same codes, R^2, L0 and dead atoms. Catches absolute tolerances and epsilons
    reaching the solvers (at c = 1e-9, the scale of a random-init MobileNetV2's pooled
    features, the TopK SAE and the lasso gave no non-zero code, convex NMF an R^2 of -8.8)."""
    X = X_POS if method in D.NEEDS_NON_NEGATIVE else X_SIGNED
    a = D.fit(X, method, K, 5, **FAST)
    b = D.fit((X * np.float32(c)).astype(np.float32), method, K, 5, **FAST)
    np.testing.assert_allclose(b.codes, a.codes, rtol=1e-3, atol=1e-4 * float(np.abs(a.codes).max()))
    np.testing.assert_allclose(b.atoms / c, a.atoms, rtol=1e-3, atol=1e-4 * float(np.abs(a.atoms).max()))
    assert b.r2 == pytest.approx(a.r2, abs=1e-4) and b.l0 == pytest.approx(a.l0, abs=1e-6)
    assert (b.dead == a.dead).all() and (b.codes > 0).any()
