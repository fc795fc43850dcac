"""Seconds of `conceptlens.metrics.dictionary.fit` against its library called directly.

Features: a seeded ReLU of a rank-64 non-negative product plus Gaussian noise,
`--images` x `--dim` float32 (non-negative, so every method runs, nmf included). For each
method, `fit(X, method, k, seed)` and the same library call written by hand (same
settings, seeds and initialisation), interleaved: in each of `--repeat` rounds every
method runs both ways, ours first in even rounds and the direct call first in odd ones.
Reports the median and range of wall and CPU seconds of each, the ratio ours / direct
(medians), and the fit's r2, L0 and dead atoms. The machine may be shared: the load
average is printed with each run.

    nice -n 10 .venv/bin/python bench/dictionary.py --images 20000 --dim 1280 --k 32 --repeat 3 \\
        [--methods nmf,semi_nmf,...] [--out bench-dictionary.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def features(n: int, d: int, seed: int, rank: int = 64) -> np.ndarray:
    g = np.random.default_rng(seed)
    W = g.random((n, rank), dtype=np.float32)
    H = g.standard_normal((rank, d), dtype=np.float32)
    X = W @ H / np.sqrt(rank) + 0.3 * g.standard_normal((n, d), dtype=np.float32)
    return np.ascontiguousarray(np.maximum(X, 0), dtype=np.float32)


@contextlib.contextmanager
def seeded(value: int):
    import torch

    state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(value)
        np.random.seed(value)
        yield
    np.random.set_state(state)


def direct(method: str, X: np.ndarray, k: int, seed: int, a) -> None:
    """The library called by hand, as the module documents each method."""
    import torch

    from conceptlens import rng as R
    from conceptlens.metrics import dictionary as D

    purpose = f"dictionary.{method}"
    # the same input as `fit`: the features over their root-mean-square row norm
    X = np.ascontiguousarray(
        X / np.float32(np.sqrt((X.astype(np.float64) ** 2).sum(axis=1).mean())), np.float32
    )
    if method == "sklearn_nmf":
        from sklearn.decomposition import MiniBatchDictionaryLearning

        alpha = 0.01 * float(np.sqrt((X.astype(np.float64) ** 2).sum(axis=1).mean()))
        m = MiniBatchDictionaryLearning(
            n_components=k,
            alpha=alpha,
            max_iter=a.max_iter,
            fit_algorithm="cd",
            batch_size=256,
            transform_algorithm="lasso_cd",
            transform_alpha=alpha,
            positive_code=True,
            positive_dict=True,
            random_state=R.int_seed(seed, purpose),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.fit(X).transform(X)
        return
    oc = D._overcomplete()
    T = torch.from_numpy(X)
    with seeded(R.int_seed(seed, purpose)):
        if method == "nmf":
            oc.NMF(nb_concepts=k, solver="hals").fit(T, max_iter=a.max_iter)
        elif method == "semi_nmf":
            oc.SemiNMF(nb_concepts=k, solver="mu").fit(T, max_iter=a.max_iter)
        elif method == "convex_nmf":
            oc.ConvexNMF(nb_concepts=k, solver="pgd", strict_convex=True).fit(T, max_iter=a.max_iter)
        else:
            from overcomplete.sae.losses import top_k_auxiliary_loss
            from overcomplete.sae.train import train_sae
            from torch.utils.data import DataLoader, TensorDataset

            rows = np.random.default_rng(R.entropy(seed, "dictionary.topk_sae.init")).choice(
                len(X), k, replace=False
            )
            X = np.ascontiguousarray(X - X.mean(axis=0, dtype=np.float64).astype(np.float32))  # b_pre
            T = torch.from_numpy(X)
            init = X[rows] / np.linalg.norm(X[rows], axis=1, keepdims=True)
            epochs = max(a.sae_epochs, -(-D.SAE_MIN_STEPS // -(-len(X) // a.sae_batch)))
            model = oc.TopKSAE(
                X.shape[1], nb_concepts=k, top_k=max(2, k // 8), dictionary_params={"initializer": init}
            )
            with torch.no_grad():
                model.encoder.final_block[0].weight.copy_(torch.from_numpy(init))
                model.encoder.final_block[0].bias.zero_()
            g = torch.Generator().manual_seed(R.int_seed(seed, purpose + ".shuffle"))
            loader = DataLoader(TensorDataset(T), batch_size=a.sae_batch, shuffle=True, generator=g)
            opt = torch.optim.Adam(model.parameters(), lr=a.lr)
            train_sae(model, loader, top_k_auxiliary_loss, opt, nb_epochs=epochs, monitoring=0)
            model.eval()
            with torch.no_grad():
                model.encode(T)


def timed(f):
    w, c = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - w, time.process_time() - c


def main(argv=None) -> dict:
    from conceptlens.metrics import dictionary as D

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=1_280)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--methods", default=",".join(D.METHODS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=500)
    ap.add_argument("--sae-epochs", type=int, default=50)
    ap.add_argument("--sae-batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    methods = a.methods.split(",")

    t = time.perf_counter()
    D._overcomplete()  # imports (torch, overcomplete, scikit-learn) before the clock
    import sklearn.decomposition  # noqa: F401

    print(f"imports {time.perf_counter() - t:.1f} s, not counted", flush=True)
    X = features(a.images, a.dim, a.seed)
    print(f"features {X.shape[0]} x {X.shape[1]} float32, {float((X > 0).mean()):.2f} non-zero", flush=True)
    kw = dict(max_iter=a.max_iter, sae_epochs=a.sae_epochs, sae_batch=a.sae_batch, lr=a.lr)
    runs: dict = {m: {"ours": [], "direct": [], "quality": None} for m in methods}
    t0 = time.perf_counter()
    for r in range(a.repeat):
        for m in methods:
            order = ("ours", "direct") if r % 2 == 0 else ("direct", "ours")
            for who in order:
                if who == "ours":
                    f, w, c = timed(lambda m=m: D.fit(X, m, a.k, a.seed, **kw))
                    runs[m]["quality"] = {
                        "r2": f.r2,
                        "l0": f.l0,
                        "dead": int(f.dead.sum()),
                        "solver": f.solver,
                    }
                else:
                    _, w, c = timed(lambda m=m: direct(m, X, a.k, a.seed, a))
                load = os.getloadavg()[0]
                runs[m][who].append({"wall": w, "cpu": c, "load1": load})
                print(
                    f"round {r} {m:>11} {who:>6}: {w:7.1f} s wall {c:7.1f} s cpu (load {load:.2f})",
                    flush=True,
                )
    total = time.perf_counter() - t0

    print(f"\n{a.images} x {a.dim}, k={a.k}, {a.repeat} rounds, {total:.0f} s in all")
    head = ("method", "ours wall s", "direct wall s", "wall ratio", "cpu ratio", "r2", "L0", "dead")
    print("{:>11} {:>20} {:>20} {:>10} {:>9} {:>6} {:>5} {:>4}".format(*head))
    for m in methods:
        o, d = ([x["wall"] for x in runs[m][w]] for w in ("ours", "direct"))
        oc, dc = ([x["cpu"] for x in runs[m][w]] for w in ("ours", "direct"))
        ratio, cpu_ratio = float(np.median(o) / np.median(d)), float(np.median(oc) / np.median(dc))
        q = runs[m]["quality"]
        runs[m].update(
            ours_median=float(np.median(o)),
            direct_median=float(np.median(d)),
            ratio=ratio,
            cpu_ratio=cpu_ratio,
        )
        ours = f"{np.median(o):.1f} ({min(o):.1f}-{max(o):.1f})"
        theirs = f"{np.median(d):.1f} ({min(d):.1f}-{max(d):.1f})"
        print(
            f"{m:>11} {ours:>20} {theirs:>20} {ratio:10.3f} {cpu_ratio:9.3f} "
            f"{q['r2']:6.3f} {q['l0']:5.1f} {q['dead']:4d}"
        )
    out = {
        "images": a.images,
        "dim": a.dim,
        "k": a.k,
        "repeat": a.repeat,
        "settings": kw,
        "total_s": total,
        "methods": runs,
    }
    if a.out:
        a.out.write_text(json.dumps(out, indent=1, default=float))
    return out


if __name__ == "__main__":
    main()
