"""Dictionary concepts of one checkpoint: atoms learned on its features, as pure functions.

A dictionary method factors the features X (n images x d dims) as X ~ codes @ atoms, with
`codes` (n, k) non-negative for every method here and `atoms` (k, d) the concepts
(CRAFT's concept bank: Fel et al. 2023, "CRAFT: Concept Recursive Activation
FacTorization for Explainability", CVPR). The methods (`METHODS`):

- `nmf`: overcomplete's `NMF(solver="hals")`, min ||X - Z D||_F^2 with Z >= 0 and D >= 0
  (hierarchical alternating least squares). Its initialisation is scikit-learn's NNDSVDa
  when k <= min(n, d): an SVD, deterministic but for the random projections of the
  randomized SVD inside it (drawn from the seeded stream), so that **the seed changes an
  nmf fit only at rounding level** in that case; when k > min(n, d) (an overcomplete
  dictionary) it starts from seeded random matrices. Needs non-negative features
  (`NEEDS_NON_NEGATIVE`).
- `semi_nmf`: overcomplete's `SemiNMF(solver="mu")`, Z >= 0 and D signed (Ding, Li &
  Jordan 2010, "Convex and Semi-Nonnegative Matrix Factorizations", IEEE TPAMI): for
  signed features (a CLIP embedding).
- `convex_nmf`: overcomplete's `ConvexNMF(solver="pgd", strict_convex=True)`, D = W X
  with W >= 0 (Ding, Li & Jordan 2010). `strict_convex=True` renormalises every row of W to
  sum to 1 after each step, so that each atom is a convex combination of images: it lies
  in the convex hull of the data, as an archetype does (archetypal-analysis-like; the
  codes are not constrained to sum to 1, as they would be in archetypal analysis).
  The projected-gradient solver is used because the multiplicative one forms the
  n x n Gram matrix X X^T (10 GB at 50,000 images).
- `topk_sae`: overcomplete's `TopKSAE` (linear encoder + ReLU, the `top_k` largest codes
  of each image kept, unit-norm atoms; Gao et al. 2024, "Scaling and evaluating sparse
  autoencoders") trained by `overcomplete.sae.train_sae` with Gao et al.'s AuxK loss
  (`top_k_auxiliary_loss`), Adam at `lr`, `sae_epochs` epochs of shuffled batches of
  `sae_batch`; codes are `model.encode(X)` after training. The atoms start as k distinct
  seeded images (unit-normalised; `sae_init_rows`) and the encoder as their transpose
  (Gao et al.'s tied initialisation): from the library's random initialisation most
  atoms of non-negative features never fire. overcomplete's SAE has no decoder bias, so
  it is trained on the features minus their mean (Gao et al.'s pre-encoder bias b_pre,
  fixed at the mean: `Fit.offset`; the reconstruction is offset + codes @ atoms); without
  it, on features far from the origin, the atoms near the mean took most codes and the
  others died (r2 -0.01 with 8 of 10 atoms dead on the demo's random-init EfficientNet,
  0.38 with none dead centred). It trains for `sae_epochs` epochs, or more where that is
  fewer than SAE_MIN_STEPS optimiser steps (a 500-image dataset has 2 batches an epoch).
  `top_k` defaults to
  `default_top_k(k)` = max(2, k // 8) (at most k): each image is explained by about an
  eighth of the atoms (2 for k < 24, 4 at k = 32, 8 at k = 64), and by at least two so
  that the SAE is not a k-means with one atom per image.
- `sklearn_nmf`: scikit-learn's `MiniBatchDictionaryLearning(positive_code=True,
  positive_dict=True)`, coordinate-descent lasso for the codes (fit and transform),
  `max_iter` epochs at most (its own early stopping on), batches of 256, and the L1
  weight alpha = `SKLEARN_ALPHA` x the root-mean-square row norm of X (scikit-learn's
  default alpha = 1 would zero every code of L2-normalised features): the cross-check of
  the nmf row by another library and another algorithm. Needs non-negative features.

What a fit reports (`Fit`): `r2` = 1 - ||X - codes @ atoms||_F^2 / ||X - mean_rows(X)||_F^2
(nan when X has no variance); `l0` = mean number of non-zero codes per image; `dead` =
the atoms whose code is 0 for every image.

Members of an atom (`members`): the threshold rule is "the top n of the positive codes":
the images whose code on the atom is > 0, highest code first, ties broken by lower row
index; an atom with fewer than n positive codes has fewer members, a dead atom none.

Stability (`stability`; Fel et al. 2025, "Archetypal SAE: Adaptive and Stable Dictionary
Learning for Concept Extraction in Large Vision Models", ICML): two further fits of the
same method, each on its own seeded random `fraction` of the images and with its own
initialisation seed; their atoms are matched one to one (Hungarian matching maximising
|cosine|, `match_atoms`), and the stability is the mean |cosine| of the matched pairs: 1
when both runs find the same directions, near 0 for unrelated ones. It is the dictionary's
sensitivity to the sample and to the initialisation, not a measure of its quality.

Randomness comes from `conceptlens.rng`, purpose "dictionary.<method>" in the caller's
`unit`: `rng.torch_seeded` around each fit (torch's global generator, which overcomplete's
initialisations use, and numpy's legacy one, which scikit-learn's randomized SVD inside
NNDSVDa uses; both restored after), `rng.torch_generator(seed, purpose + ".shuffle",
unit)` for the SAE's batch order, `rng.int_seed` for scikit-learn's random_state. The same
(X, method, k, seed, unit) gives bit-identical atoms and codes on the same machine.

torch, overcomplete and scikit-learn are imported inside the functions that use them:
this module is imported by code that must stay light.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from conceptlens import rng as R

METHODS = ("nmf", "semi_nmf", "convex_nmf", "topk_sae", "sklearn_nmf")
NEEDS_NON_NEGATIVE = ("nmf", "sklearn_nmf")  # refuse signed features
PURPOSE = "dictionary"  # a fit's stream is PURPOSE + "." + method
STABILITY_PURPOSE = "dictionary.stability"
SKLEARN_ALPHA = 0.01  # sklearn_nmf's L1 weight, relative to the RMS row norm of X
SKLEARN_BATCH = 256
SUMMARY_BLOCK = 2048  # rows per block of the r2 sums
SAE_MIN_STEPS = 500  # topk_sae: at least this many optimiser steps, whatever sae_epochs says


@dataclass
class Fit:
    method: str
    solver: str  # what ran, e.g. "overcomplete.NMF(solver=hals, init=nndsvda)"
    atoms: np.ndarray  # (k, d) float32, as the library returns them
    codes: np.ndarray  # (n, k) float32, non-negative for every method
    r2: float  # 1 - ||X - codes @ atoms||_F^2 / ||X - X.mean(0)||_F^2
    l0: float  # mean number of non-zero codes per image
    dead: np.ndarray  # (k,) bool: atom whose code is 0 for every image
    offset: np.ndarray | None = None  # (d,) added to codes @ atoms (topk_sae: the mean); None: 0


def _check_method(method: Any) -> str:
    if method not in METHODS:
        raise ValueError(f"--methods: unknown dictionary method {method!r}; choose from {', '.join(METHODS)}")
    return method


def check_features(X, method, name="features") -> np.ndarray:
    """X as a float32 C-contiguous (n, d) array fit for `method`. ValueError naming `name`
    for anything not 2-D, fewer than 2 rows, no column, or a NaN / infinite value
    (after the cast to float32); for a method of NEEDS_NON_NEGATIVE and a negative value,
    a ValueError that says "--methods <method> needs non-negative features" and points to
    semi_nmf; an unknown method is a ValueError naming --methods."""
    _check_method(method)
    try:
        with np.errstate(over="ignore"):  # a float64 beyond float32's range: inf, refused below
            A = np.ascontiguousarray(X, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: not a numeric array ({e})") from None
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D (images x dims), got shape {A.shape}")
    if A.shape[0] < 2 or A.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 rows and 1 column, got shape {A.shape}")
    if not np.isfinite(A).all():
        bad = int((~np.isfinite(A)).any(axis=1).sum())
        raise ValueError(f"{name} has NaN or infinite values (in float32) in {bad} row(s)")
    if method in NEEDS_NON_NEGATIVE:
        low = float(A.min())
        if low < 0:
            raise ValueError(
                f"--methods {method} needs non-negative features, but {name} has negative values "
                f"(min {low:.4g}); use --methods semi_nmf (or convex_nmf, topk_sae) for signed features"
            )
    return A


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def default_top_k(k: int) -> int:
    """topk_sae's codes kept per image when `top_k` is None: max(2, k // 8), at most k."""
    return min(k, max(2, k // 8))


def _fit_summary(method: str, solver: str, X: np.ndarray, atoms, codes, offset=None) -> Fit:
    atoms = np.ascontiguousarray(atoms, dtype=np.float32)
    codes = np.ascontiguousarray(codes, dtype=np.float32)
    # float64 sums over blocks of rows: a few 10 MB temporaries instead of n x d ones
    atoms64 = atoms.astype(np.float64)
    mean = X.mean(axis=0, dtype=np.float64)
    ss_res = total = 0.0
    for s in range(0, len(X), SUMMARY_BLOCK):
        Xb = X[s : s + SUMMARY_BLOCK].astype(np.float64)
        resid = Xb - codes[s : s + SUMMARY_BLOCK].astype(np.float64) @ atoms64
        if offset is not None:
            resid -= offset
        ss_res += float(np.einsum("ij,ij->", resid, resid))
        Xb -= mean
        total += float(np.einsum("ij,ij->", Xb, Xb))
    r2 = 1.0 - ss_res / total if total > 0 else math.nan
    nonzero = codes != 0
    return Fit(
        method=method,
        solver=solver,
        atoms=atoms,
        codes=codes,
        r2=r2,
        l0=float(nonzero.sum(axis=1).mean()),
        dead=~nonzero.any(axis=0),
        offset=None if offset is None else np.asarray(offset, np.float32),
    )


def _overcomplete():
    """The overcomplete package. Its 0.3.0 `__init__` imports its visualization module,
    which calls `matplotlib.cm.get_cmap` (removed in matplotlib 3.9) at import: while it is
    imported that name is lent (`matplotlib.colormaps.get_cmap`, its replacement) and
    taken back after."""
    import sys  # local: only this function looks at the loaded modules

    if "overcomplete" not in sys.modules:
        try:
            import matplotlib  # local: heavy
            import matplotlib.cm  # local: heavy
        except ImportError:  # overcomplete then fails on its own, with its own message
            matplotlib = None
        lent = matplotlib is not None and not hasattr(matplotlib.cm, "get_cmap")
        if lent:
            matplotlib.cm.get_cmap = matplotlib.colormaps.get_cmap
        try:
            import overcomplete  # noqa: F401  # local: torch is heavy
        except ImportError as e:
            raise ImportError(
                f"dictionary methods need overcomplete: pip install 'overcomplete>=0.3,<0.4' ({e})"
            ) from e
        finally:
            if lent:
                del matplotlib.cm.get_cmap
    import overcomplete  # local: torch is heavy

    return overcomplete


def fit(
    X,
    method,
    k,
    seed,
    *,
    unit=None,
    max_iter=500,
    top_k=None,
    sae_epochs=50,
    sae_batch=256,
    lr=5e-4,
) -> Fit:
    """Learn `k` atoms on X with `method` (see the module's docstring for each method and
    its settings). `max_iter`: iterations of nmf / semi_nmf / convex_nmf, epochs at most of
    sklearn_nmf; `top_k`, `sae_epochs`, `sae_batch`, `lr`: topk_sae's. ValueError naming
    --methods for an unknown method, --atoms for k < 1 or k > n."""
    method = _check_method(method)
    X0 = check_features(X, method)
    # Every method fits the features divided by their root-mean-square row norm, and its
    # atoms are scaled back: the solvers' tolerances and epsilons (1e-10 in overcomplete's
    # updates) are absolute, and on features of norm ~1e-9 (a random-init MobileNetV2's
    # pooled output) the TopK SAE and scikit-learn's lasso gave no non-zero code and convex
    # NMF an R^2 of -8.8. Scaling X by c now scales the atoms by c and changes nothing else.
    scale = feature_scale(X0)
    A = X0 if scale == 1.0 else np.ascontiguousarray(X0 / np.float32(scale), dtype=np.float32)
    n, d = A.shape
    if isinstance(k, bool | np.bool_) or not isinstance(k, numbers.Integral) or not 1 <= k <= n:
        raise ValueError(f"--atoms must be an integer between 1 and the number of images ({n}), got {k!r}")
    k = int(k)
    seed = R.check_seed(seed, "seed")
    max_iter = _positive_int(max_iter, "max_iter")
    purpose = f"{PURPOSE}.{method}"

    if method == "sklearn_nmf":
        from sklearn.decomposition import MiniBatchDictionaryLearning  # local: heavy
        from sklearn.exceptions import ConvergenceWarning  # local: with the estimator above

        alpha = sklearn_alpha(A)
        model = MiniBatchDictionaryLearning(
            **sklearn_settings(A, k, max_iter, R.int_seed(seed, purpose, unit))
        )
        with warnings.catch_warnings():
            # coordinate descent's duality-gap warnings, one per mini-batch: its tolerance
            # (1e-4 x ||x||^2) is below float32's resolution on features of norm ~1
            warnings.simplefilter("ignore", ConvergenceWarning)
            # its lasso draws a (cyclic, unused) seed from numpy's global RandomState: the
            # block seeds it from the stream and gives the caller's state back
            with R.torch_seeded(seed, purpose, unit):
                codes = model.fit(A).transform(A)
        solver = (
            f"sklearn.MiniBatchDictionaryLearning(positive, cd, alpha={alpha:.4g}, "
            f"batch={SKLEARN_BATCH}, max_iter={max_iter})"
        )
        return _fit_summary(method, solver, X0, model.components_ * scale, codes)

    import torch  # local: torch is heavy

    oc = _overcomplete()
    T = torch.from_numpy(np.array(A, np.float32))  # a copy: A may be the run's read-only cache
    with R.torch_seeded(seed, purpose, unit):
        if method == "nmf":
            model = oc.NMF(nb_concepts=k, solver="hals")
            Z, D = model.fit(T, max_iter=max_iter)
            init = "nndsvda" if k <= min(n, d) else "random"
            solver = f"overcomplete.NMF(solver=hals, init={init}, max_iter={max_iter})"
        elif method == "semi_nmf":
            model = oc.SemiNMF(nb_concepts=k, solver="mu")
            Z, D = model.fit(T, max_iter=max_iter)
            solver = f"overcomplete.SemiNMF(solver=mu, max_iter={max_iter})"
        elif method == "convex_nmf":
            model = oc.ConvexNMF(nb_concepts=k, solver="pgd", strict_convex=True)
            Z, D = model.fit(T, max_iter=max_iter)
            solver = f"overcomplete.ConvexNMF(solver=pgd, strict_convex=True, max_iter={max_iter})"
        else:  # topk_sae
            top_k = default_top_k(k) if top_k is None else _positive_int(top_k, "--top-k")
            if top_k > k:
                raise ValueError(f"--top-k must be at most --atoms ({k}), got {top_k}")
            epochs = _positive_int(sae_epochs, "sae_epochs")
            batch = _positive_int(sae_batch, "sae_batch")
            epochs = sae_epochs_run(n, epochs, batch)
            if not (isinstance(lr, numbers.Real) and math.isfinite(lr) and lr > 0):
                raise ValueError(f"lr must be a positive number, got {lr!r}")
            shuffle = R.torch_generator(seed, purpose + ".shuffle", unit)
            init_rows = sae_init_rows(n, k, seed, unit)
            offset = A.mean(axis=0, dtype=np.float64).astype(np.float32)
            T = torch.from_numpy(np.array(A - offset, np.float32))
            Z, D = _train_topk_sae(T, k, top_k, epochs, batch, float(lr), shuffle, init_rows)
            solver = (
                f"overcomplete.TopKSAE(top_k={top_k}, encoder=linear) + train_sae(top_k_auxiliary_loss, "
                f"Adam lr={lr:g}, epochs={epochs}, batch={batch}, centred)"
            )
            atoms, codes = D.detach().numpy() * scale, Z.detach().numpy()
            return _fit_summary(method, solver, X0, atoms, codes, offset=offset * np.float32(scale))
    return _fit_summary(method, solver, X0, D.detach().cpu().numpy() * scale, Z.detach().cpu().numpy())


def sae_epochs_run(n: int, epochs: int, batch: int) -> int:
    """The epochs topk_sae trains for: `epochs`, or enough for SAE_MIN_STEPS steps."""
    return max(epochs, math.ceil(SAE_MIN_STEPS / math.ceil(n / batch)))


def feature_scale(A: np.ndarray) -> float:
    """The root-mean-square row norm of A (1.0 for all-zero features): what `fit` divides
    the features by before any method sees them."""
    rms = float(np.sqrt(np.mean(np.square(A, dtype=np.float64).sum(axis=1))))
    return rms if rms > 0 and math.isfinite(rms) else 1.0


def sklearn_alpha(A: np.ndarray) -> float:
    """sklearn_nmf's L1 weight: SKLEARN_ALPHA x the root-mean-square row norm of A."""
    return SKLEARN_ALPHA * float(np.sqrt(np.mean(np.square(A.astype(np.float64)).sum(axis=1))))


def sklearn_settings(A: np.ndarray, k: int, max_iter: int, random_state: int) -> dict:
    """The MiniBatchDictionaryLearning arguments sklearn_nmf uses on A."""
    alpha = sklearn_alpha(A)
    return dict(
        n_components=k,
        alpha=alpha,
        max_iter=max_iter,
        fit_algorithm="cd",
        batch_size=SKLEARN_BATCH,
        transform_algorithm="lasso_cd",
        transform_alpha=alpha,
        positive_code=True,
        positive_dict=True,
        random_state=random_state,
    )


def sae_init_rows(n: int, k: int, seed, unit=None) -> np.ndarray:
    """The k distinct images whose unit-normalised features start topk_sae's atoms (and,
    transposed, its encoder): drawn from the stream ("dictionary.topk_sae.init", unit)."""
    return R.stream(seed, f"{PURPOSE}.topk_sae.init", unit).choice(n, k, replace=False)


def _train_topk_sae(T, k: int, top_k: int, epochs: int, batch: int, lr: float, shuffle, init_rows):
    """(codes, atoms) of a TopKSAE trained on T; the caller seeds torch's global generator
    (the model's initialisation) and passes the generator of the batch order."""
    import torch  # local: torch is heavy
    from torch.utils.data import DataLoader, TensorDataset  # local: torch is heavy

    oc = _overcomplete()
    from overcomplete.sae.losses import top_k_auxiliary_loss  # local: torch is heavy
    from overcomplete.sae.train import train_sae  # local: torch is heavy

    atoms = T[torch.from_numpy(init_rows)]
    atoms = atoms / atoms.norm(dim=1, keepdim=True).clamp_min(1e-12)
    model = oc.TopKSAE(
        T.shape[1], nb_concepts=k, top_k=top_k, device="cpu", dictionary_params={"initializer": atoms.numpy()}
    )
    with torch.no_grad():  # the encoder starts as the dictionary's transpose (Gao et al. 2024)
        linear = model.encoder.final_block[0]
        linear.weight.copy_(atoms)
        linear.bias.zero_()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loader = DataLoader(TensorDataset(T), batch_size=batch, shuffle=True, generator=shuffle)
    train_sae(model, loader, top_k_auxiliary_loss, optimizer, nb_epochs=epochs, monitoring=0, device="cpu")
    model.eval()
    with torch.no_grad():
        _, Z = model.encode(T)
        D = model.get_dictionary()
    return Z, D


def abs_cosines(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """|cosine| between every row of A (k, d) and every row of B (k2, d), in [0, 1]; a zero
    row has cosine 0 with everything."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise ValueError(
            f"atoms must be two 2-D arrays with the same number of columns, got {A.shape} and {B.shape}"
        )
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise ValueError("atoms have NaN or infinite values")
    na = np.linalg.norm(A, axis=1)
    nb = np.linalg.norm(B, axis=1)
    Au = np.divide(A, na[:, None], out=np.zeros_like(A), where=na[:, None] > 0)
    Bu = np.divide(B, nb[:, None], out=np.zeros_like(B), where=nb[:, None] > 0)
    return np.clip(np.abs(Au @ Bu.T), 0.0, 1.0)


def match_atoms(A, B) -> tuple[np.ndarray, np.ndarray]:
    """Hungarian matching (scipy's linear_sum_assignment) of the rows of A (k, d) to the rows
    of B (k2, d) maximising the sum of |cosine|: (for each row of A the index of its row of
    B, -1 when unmatched, which happens only when k2 < k; the |cosine| of each pair, nan
    when unmatched). Zero rows have cosine 0 with everything."""
    from scipy.optimize import linear_sum_assignment  # local: heavy

    C = abs_cosines(A, B)
    index = np.full(C.shape[0], -1, dtype=np.int64)
    cos = np.full(C.shape[0], np.nan)
    if C.size:
        rows, cols = linear_sum_assignment(C, maximize=True)
        index[rows] = cols
        cos[rows] = C[rows, cols]
    return index, cos


def stability(X, method, k, seed, *, unit=None, fraction=0.9, **fit_kw) -> tuple[float, np.ndarray]:
    """Stability of `method`'s atoms (Fel et al. 2025): two fits, run i in (0, 1) on the
    sorted random round(fraction x n) images drawn without replacement from the stream
    ("dictionary.stability", unit (unit, i)), with the fit's own stream in unit (unit, i);
    their atoms matched by `match_atoms`. Returns (mean |cosine| over the matched pairs,
    the |cosine| of each of run 0's atoms with its match). `fit_kw` go to `fit`."""
    method = _check_method(method)
    A = check_features(X, method)
    n = A.shape[0]
    if isinstance(fraction, bool | np.bool_) or not (
        isinstance(fraction, numbers.Real) and 0 < fraction <= 1
    ):
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    m = int(round(fraction * n))
    if m < 2:
        raise ValueError(f"fraction {fraction} of {n} images leaves {m}: at least 2 are needed")
    if isinstance(k, bool | np.bool_) or not isinstance(k, numbers.Integral) or not 1 <= k <= m:
        raise ValueError(
            f"--atoms must be an integer between 1 and the images of a stability run "
            f"({m} = {fraction} x {n}), got {k!r}"
        )
    fits = []
    for i in (0, 1):
        part = R.stream(seed, STABILITY_PURPOSE, [unit, i]).choice(n, m, replace=False)
        fits.append(fit(A[np.sort(part)], method, k, seed, unit=[unit, i], **fit_kw))
    _, cos = match_atoms(fits[0].atoms, fits[1].atoms)
    return float(np.nanmean(cos)), cos


def members(codes, n) -> list[np.ndarray]:
    """For each atom (column of `codes`), the rows of its top-n codes among its positive
    codes: highest code first, ties broken by lower row index; an atom with fewer than n
    positive codes gets them all, a dead atom an empty array (int64 row indices)."""
    C = np.asarray(codes)
    if C.ndim != 2:
        raise ValueError(f"codes must be 2-D (images x atoms), got shape {C.shape}")
    n = _positive_int(n, "n")
    out = []
    for j in range(C.shape[1]):
        col = C[:, j]
        rows = np.flatnonzero(col > 0)
        order = np.lexsort((rows, -col[rows]))  # last key first: code descending, then row
        out.append(rows[order[:n]].astype(np.int64))
    return out
