"""The psychological embedding of similarity judgments (roads2021 section 4.2), in PyTorch on CPU.

Every stimulus i has a variational posterior N(mu_i, diag(sigma_i^2)); the prior is
N(0, s^2 I) with s learned. The objective is the variational free energy per training
trial: the weighted negative log-likelihood of the trials (rank likelihood, Eq. 1-3,
one reparameterised sample per trial) plus KL(q || prior) / n_train, as psiz weights it.
An ensemble of members, each fitted from its own seed with its own held-out share of the
trials, is fitted for every candidate dimensionality; the dimensionality whose members
predict their held-out trials best (mean log-likelihood) is kept.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import rng as rngs
from ..metrics import similarity as S

# projections.checkpoint_id of a dataset's psychological embedding: `psych@DATASET`.
PSEUDO_PREFIX = "psych@"


def psych_id(dataset: str) -> str:
    return PSEUDO_PREFIX + dataset


def read_embedding(ws, dataset: str) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray]]]:
    """(image ids, [(mu, sigma) per member]) of a dataset's psychological embedding."""
    t = ws.read("psych_embedding", dataset=dataset).to_pandas()
    ids, members = None, []
    for _m, g in t.sort_values(["member", "image_id"]).groupby("member", sort=True):
        if ids is None:
            ids = list(g["image_id"])
        members.append(
            (
                np.stack(g["mu"].to_numpy()).astype(np.float64),
                np.stack(g["sigma"].to_numpy()).astype(np.float64),
            )
        )
    return ids or [], members


@dataclass(frozen=True)
class Trials:
    """Numeric trials (see `conceptlens.metrics.similarity`) with their weights."""

    stimulus_set: np.ndarray
    n_select: np.ndarray
    weight: np.ndarray

    def __post_init__(self):
        S.check_trials(self.stimulus_set, self.n_select)
        if np.shape(self.weight) != (len(self.stimulus_set),):
            raise ValueError("weight must have one value per trial")
        if (np.asarray(self.weight) < 0).any():
            raise ValueError("weight must be >= 0")

    def __len__(self) -> int:
        return len(self.stimulus_set)

    def subset(self, idx) -> Trials:
        return Trials(self.stimulus_set[idx], self.n_select[idx], self.weight[idx])


@dataclass
class Fit:
    dim: int
    member: int
    mu: np.ndarray  # (n_stimuli, dim) float32
    sigma: np.ndarray  # (n_stimuli, dim) float32, standard deviations
    prior_scale: float
    epochs: int
    seconds: float
    losses: list[float] = field(default_factory=list)


def _softplus_inv(y: float) -> float:
    return math.log(math.expm1(y))


def torch_rank_loglik(z, valid, chosen, beta: float):
    """The rank log-likelihood of each trial in PyTorch (the numpy reference is
    `conceptlens.metrics.similarity.rank_log_likelihood`).

    z: (trials, 1 + R, dim) embeddings of the query then the references (chosen first);
    valid: (trials, R) bool, false for padding; chosen: (trials, K) float, 1 where the
    k-th choice exists."""
    import torch

    d = torch.sqrt(((z[:, 1:] - z[:, :1]) ** 2).sum(-1) + 1e-12)
    log_s = (-beta * d).masked_fill(~valid, -1e4)
    # Choice k: its log similarity minus the log of the sum over the references not
    # chosen before it (K is small; logcumsumexp is several times slower).
    return sum(
        (log_s[:, k] - torch.logsumexp(log_s[:, k:], 1)) * chosen[:, k] for k in range(chosen.shape[1])
    )


def fit_embedding(
    trials: Trials,
    n_stimuli: int,
    dim: int,
    *,
    beta: float = S.BETA,
    max_epochs: int = 300,
    batch_size: int = 8192,
    lr: float = 0.05,
    patience: int = 5,
    tol: float = 1e-3,
    max_cuts: int = 3,
    seed: int = 0,
    threads: int = 1,
    progress: bool = True,
    desc: str = "fit",
    member: int = 0,
) -> Fit:
    """Fit one variational embedding by Adam on minibatches of trials.

    When the epoch's mean loss has not improved by more than `tol` (absolute, nats per
    trial) for `patience` epochs the step size is halved; the fit stops at the plateau
    after `max_cuts` halvings, or after `max_epochs`.
    """
    import torch
    import torch.nn.functional as F

    if len(trials) == 0:
        raise ValueError("no trials to fit")
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    stim = np.asarray(trials.stimulus_set, np.int64)
    if stim.max() >= n_stimuli:
        raise ValueError(f"stimulus index {stim.max()} >= n_stimuli={n_stimuli}")
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = rngs.torch_generator(seed)
        idx_all = torch.as_tensor(np.maximum(stim, 0))
        valid = torch.as_tensor(stim[:, 1:] >= 0)
        sel = np.asarray(trials.n_select, np.int64)
        K = int(sel.max())
        chosen = torch.as_tensor(np.arange(K)[None, :] < sel[:, None], dtype=torch.float32)
        w = torch.as_tensor(np.asarray(trials.weight, np.float32))
        n = len(trials)
        # Start small against beta = 10: every similarity near 1, no choice explained yet.
        mu = torch.nn.Parameter(0.05 * torch.randn(n_stimuli, dim, generator=g))
        rho = torch.nn.Parameter(torch.full((n_stimuli, dim), _softplus_inv(0.05)))
        prior_rho = torch.nn.Parameter(torch.tensor(_softplus_inv(0.2)))
        opt = torch.optim.Adam([mu, rho, prior_rho], lr=lr)

        def kl() -> torch.Tensor:
            s = F.softplus(rho)
            p = F.softplus(prior_rho)
            return (torch.log(p / s) + (s * s + mu * mu) / (2 * p * p) - 0.5).sum()

        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=max_epochs, desc=desc, unit="epoch", leave=False, mininterval=1.0)
        t0 = time.perf_counter()
        losses: list[float] = []
        best, since, cuts = math.inf, 0, 0
        for _epoch in range(max_epochs):
            perm = torch.randperm(n, generator=g)
            total = 0.0
            for s0 in range(0, n, batch_size):
                b = perm[s0 : s0 + batch_size]
                idx = idx_all[b]
                z = mu[idx] + F.softplus(rho[idx]) * torch.randn(idx.shape + (dim,), generator=g)
                ll = torch_rank_loglik(z, valid[b], chosen[b], beta)
                loss = -(w[b] * ll).mean() + kl() / n
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(b)
            losses.append(total / n)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.4f}")
            if losses[-1] < best - tol:
                best, since = losses[-1], 0
            else:
                since += 1
                if since >= patience:
                    # A plateau: halve the step (finer moves past the sampling noise), or stop.
                    if cuts == max_cuts:
                        break
                    cuts, since = cuts + 1, 0
                    for group in opt.param_groups:
                        group["lr"] /= 2
        if bar is not None:
            bar.close()
        with torch.no_grad():
            return Fit(
                dim=dim,
                member=member,
                mu=mu.detach().numpy().astype(np.float32),
                sigma=F.softplus(rho).detach().numpy().astype(np.float32),
                prior_scale=float(F.softplus(prior_rho)),
                epochs=len(losses),
                seconds=time.perf_counter() - t0,
                losses=losses,
            )
    finally:
        torch.set_num_threads(old_threads)


def scores(Z: np.ndarray, trials: Trials, beta: float = S.BETA) -> dict:
    """Mean weighted log-likelihood, accuracy of the most probable outcome and triplet
    accuracy (L2) of `trials` under the embedding Z (posterior means)."""
    if len(trials) == 0:
        return {"loglik": None, "accuracy": None, "triplet_accuracy": None}
    w = np.asarray(trials.weight, np.float64)
    ll = S.rank_log_likelihood(Z, trials.stimulus_set, trials.n_select, beta)
    wsum = w.sum()
    acc = S.most_probable_correct(Z, trials.stimulus_set, trials.n_select)
    return {
        "loglik": float((w * ll).sum() / wsum) if wsum > 0 else float(ll.mean()),
        "accuracy": float((w * acc).sum() / wsum) if wsum > 0 else float(acc.mean()),
        "triplet_accuracy": S.triplet_accuracy(
            Z, trials.stimulus_set, trials.n_select, "l2", w if wsum > 0 else None
        ),
    }


def expected_similarity(
    mu: np.ndarray, sigma: np.ndarray, beta: float = S.BETA, n_samples: int = 8, seed: int = 0
) -> np.ndarray:
    """E_q[exp(-beta ||z_i - z_j||)] for every pair of rows, by Monte Carlo (n x n);
    `seed`: an int or a generator (`rng.generator`)."""
    rng = rngs.generator(seed, "seed")
    mu = np.asarray(mu, np.float64)
    sigma = np.asarray(sigma, np.float64)
    out = np.zeros((len(mu), len(mu)))
    for _ in range(n_samples):
        z = mu + sigma * rng.standard_normal(mu.shape)
        sq = (z**2).sum(axis=1)
        d = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * z @ z.T, 0.0))
        out += np.exp(-beta * d)
    out /= n_samples
    np.fill_diagonal(out, 1.0)
    return out


def ensemble_similarity(
    members: list[tuple[np.ndarray, np.ndarray]], beta: float = S.BETA, n_samples: int = 8, seed: int = 0
) -> np.ndarray:
    """The ensemble's expected similarity matrix: the mean over its members, member k's
    samples drawn from the stream ("ensemble_similarity.member", k) of `seed`."""
    return np.mean(
        [
            expected_similarity(m, s, beta, n_samples, rngs.stream(seed, "ensemble_similarity.member", k))
            for k, (m, s) in enumerate(members)
        ],
        axis=0,
    )


@dataclass
class Ensemble:
    fits: dict[tuple[int, int], Fit]  # (dim, member) -> fit
    rows: list[dict]  # one per (dim, member): held-out scores etc.
    selected_dim: int
    heldout: dict[int, np.ndarray]  # member -> indices of its held-out trials

    def members(self, dim: int | None = None) -> list[Fit]:
        d = self.selected_dim if dim is None else dim
        return [f for (dd, _), f in sorted(self.fits.items()) if dd == d]


def heldout_split(n: int, members: int, holdout: float, seed: int) -> dict[int, np.ndarray]:
    """Each member's held-out trials: its own seeded share `holdout` of the n trials."""
    k = max(1, int(round(holdout * n)))
    if k >= n:
        raise ValueError(f"holdout={holdout} leaves no trial to fit out of {n}")
    return {m: np.sort(rngs.stream(seed, "psych.heldout", m).permutation(n)[:k]) for m in range(members)}


def agreement(
    fits: list[Fit], beta: float = S.BETA, max_items: int = 1000, seed: int = 0, unit=None
) -> list[float | None]:
    """Each member's mean Spearman correlation with the other members' expected similarity
    matrices (on a seeded sample of at most `max_items` stimuli); each member's matrix is
    sampled from its own stream (one shared stream would correlate their Monte Carlo
    errors and inflate the agreement). `unit`: what the ensemble is one of (its
    dimension), so that two ensembles' agreements draw from streams of their own."""
    if len(fits) < 2:
        return [None] * len(fits)
    n = len(fits[0].mu)
    items = (
        np.arange(n)
        if n <= max_items
        else np.sort(rngs.stream(seed, "agreement.items", unit).choice(n, max_items, replace=False))
    )
    streams = [rngs.stream(seed, "agreement.member", [unit, k]) for k in range(len(fits))]
    tri = [
        S.upper(expected_similarity(f.mu[items], f.sigma[items], beta, 4, g)) for f, g in zip(fits, streams)
    ]
    r = np.eye(len(fits))
    for a in range(len(fits)):
        for b in range(a + 1, len(fits)):
            r[a, b] = r[b, a] = S.rsa_vectors(tri[a], tri[b])
    return [float((r[a].sum() - 1) / (len(fits) - 1)) for a in range(len(fits))]


def fit_ensemble(
    train: Trials,
    n_stimuli: int,
    dims=(2, 4, 8, 16),
    members: int = 3,
    holdout: float = 0.1,
    test: Trials | None = None,
    beta: float = S.BETA,
    seed: int = 0,
    progress: bool = True,
    label: str = "",
    screen: int | None = None,
    **fit_kw,
) -> Ensemble:
    """Fit an ensemble per dimensionality in `dims`, each member without its own held-out
    share of `train`; keep the dimensionality with the best mean held-out log-likelihood
    (the smaller one on a tie). With `screen` < `members`, only `screen` members are fitted
    at every dimensionality and the others at the chosen one alone (cheaper at scale)."""
    dims = sorted({int(d) for d in dims})
    if not dims or dims[0] < 1:
        raise ValueError(f"dims must be positive integers, got {dims}")
    if members < 1:
        raise ValueError(f"members must be >= 1, got {members}")
    screen = members if not screen else min(int(screen), members)
    held = heldout_split(len(train), members, holdout, seed)
    fits: dict[tuple[int, int], Fit] = {}
    rows: list[dict] = []

    def run(dim: int, m: int) -> None:
        keep = np.setdiff1d(np.arange(len(train)), held[m], assume_unique=True)
        fit = fit_embedding(
            train.subset(keep),
            n_stimuli,
            dim,
            beta=beta,
            seed=rngs.int_seed(seed, "psych.member_fit", [dim, m]),
            progress=progress,
            desc=f"{label} d={dim} member {m}".strip(),
            member=m,
            **fit_kw,
        )
        fits[dim, m] = fit
        h = scores(fit.mu, train.subset(held[m]), beta)
        t = (
            scores(fit.mu, test, beta)
            if test is not None and len(test)
            else {"loglik": None, "accuracy": None}
        )
        rows.append(
            {
                "dim": dim,
                "member": m,
                "n_train": len(keep),
                "n_heldout": len(held[m]),
                "heldout_loglik": h["loglik"],
                "heldout_accuracy": h["accuracy"],
                "heldout_triplet_accuracy": h["triplet_accuracy"],
                "test_loglik": t["loglik"],
                "test_accuracy": t["accuracy"],
                "prior_scale": fit.prior_scale,
                "epochs": fit.epochs,
                "seconds": fit.seconds,
            }
        )

    for dim in dims:
        for m in range(screen):
            run(dim, m)
    mean_ll = {d: np.mean([r["heldout_loglik"] for r in rows if r["dim"] == d]) for d in dims}
    best = max(dims, key=lambda d: (mean_ll[d], -d))
    for m in range(screen, members):
        run(best, m)
    for dim in dims:
        mine = sorted((r for r in rows if r["dim"] == dim), key=lambda r: r["member"])
        for r, a in zip(mine, agreement([fits[dim, r["member"]] for r in mine], beta, seed=seed, unit=dim)):
            r["agreement"] = a
    rows.sort(key=lambda r: (r["dim"], r["member"]))
    for r in rows:
        r["selected"] = r["dim"] == best
    return Ensemble(fits, rows, best, held)
