"""Concept models of the concept-quality paper, trained on the demo's concept datasets.

One encoder architecture per dataset family, shared by every method, as the paper insists
(appendix 6.7: encoder capacity alone changes impurity):

* TabularToy: a ReLU MLP [7, 128, 64, out] on the standardised features;
* dSprites: four (3x3 conv + BatchNorm + ReLU + 2x2 max-pool) blocks with 8, 16, 32, 64
  maps, then fully connected [64, 64, out], on the 64 px sprites average-pooled to 32 px.

`out` is k (the number of ground-truth concepts) for the concept-learning method and 2k
(posterior mean and log-variance) for the VAE family. Methods:

* `cbm`: jointly trained concept bottleneck (Koh et al. 2020): concept probabilities
  sigmoid(g(x)) feed a label predictor [k, 64, 64, L]; loss = task cross-entropy + alpha x
  concept binary cross-entropy (alpha 0.1 on TabularToy, 10 on dSprites, as the paper).
  The concept representation is the k probabilities, aligned by name to the ground truth.
* `vae`, `beta_vae` (beta = 10): Gaussian posterior, decoder [k, 64, 128, 7] (Gaussian
  likelihood) or Locatello et al.'s [256, 512] + transposed convolutions (Bernoulli
  likelihood); the representation is the posterior mean, k free concepts `c0`...
* `ada_gvae` (Locatello et al. 2020a): the VAE trained on pairs that share at least one
  factor; per pair, dimensions whose posterior KL between the two images is below
  (max + min) / 2 are taken as shared and both posteriors are replaced by their average.

Everything runs on CPU from a seed (initialisation, batch order and noise from generators
seeded by `stable_seed`, one thread, deterministic kernels).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import schema
from ..extract import FEATURES_SCHEMA
from . import concepts_data as cd
from .encoders import stable_seed

METHODS = ("cbm", "vae", "beta_vae", "ada_gvae")
BETA = {"vae": 1.0, "beta_vae": 10.0, "ada_gvae": 1.0}
ALPHA = {"tabular_toy": 0.1, "dsprites": 10.0}
# Epochs per family and method: the paper trains 100-300; these fit the demo's budget
# (measured figures in docs/demo.md).
EPOCHS = {
    "tabular_toy": {"cbm": 40, "vae": 40, "beta_vae": 40, "ada_gvae": 40},
    "dsprites": {"cbm": 12, "vae": 15, "beta_vae": 15, "ada_gvae": 15},
}
BATCH_SIZE = 32
LR = 1e-3
POOL = 2  # dSprites models see 64 px sprites average-pooled to 32 px
MODEL_NAME = {"tabular_toy": "ConceptMLP", "dsprites": "ConceptCNN"}


# ---------------------------------------------------------------- architectures
def mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class ConvConceptEncoder(nn.Module):
    """The paper's concept encoder for image datasets (appendix 6.8.2)."""

    def __init__(self, side: int, out: int, in_channels: int = 1):
        super().__init__()
        chans = [in_channels, 8, 16, 32, 64]
        blocks: list[nn.Module] = []
        for i in range(4):
            blocks += [
                nn.Conv2d(chans[i], chans[i + 1], 3, padding=1),
                nn.BatchNorm2d(chans[i + 1]),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
        self.features = nn.Sequential(*blocks, nn.Flatten())
        self.head = mlp([64 * (side // 16) ** 2, 64, 64, out])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class ConvDecoder(nn.Module):
    """Locatello et al. (2020b)'s decoder: [256, 512] then transposed 4x4 stride-2 convs from
    4 x 4 up to `side` (maps 64, 32, 32, 1 at 64 px; the last ones at smaller sides)."""

    def __init__(self, k: int, side: int, out_channels: int = 1):
        super().__init__()
        n = int(np.log2(side // 4))
        chans = [64, 32, 32, out_channels][-n:]
        self.fc = mlp([k, 256, 512])
        layers: list[nn.Module] = []
        c = 32
        for i, o in enumerate(chans):
            layers.append(nn.ConvTranspose2d(c, o, 4, stride=2, padding=1))
            if i < len(chans) - 1:
                layers.append(nn.ReLU())
            c = o
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(F.relu(self.fc(z)).view(-1, 32, 4, 4))


def encoder(family: str, in_dim: int, out: int) -> nn.Module:
    if family == "tabular_toy":
        return mlp([in_dim, 128, 64, out])
    return ConvConceptEncoder(in_dim, out)


def decoder(family: str, k: int, in_dim: int) -> nn.Module:
    if family == "tabular_toy":
        return mlp([k, 64, 128, in_dim])
    return ConvDecoder(k, in_dim)


# ---------------------------------------------------------------- inputs
@dataclass
class Inputs:
    x: torch.Tensor  # model inputs of every row
    in_dim: int  # features (tabular) or image side
    preprocessing: dict

    def likelihood(self, family: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Negative log-likelihood per row, summed over its dimensions."""
        if family == "tabular_toy":  # unit-variance Gaussian on standardised features
            return 0.5 * (logits - target).pow(2).flatten(1).sum(1)
        return F.binary_cross_entropy_with_logits(logits, target, reduction="none").flatten(1).sum(1)


def inputs_of(data: cd.ConceptData) -> Inputs:
    if data.family == "tabular_toy":
        tr = data.train
        mean, std = data.x[tr].mean(0), data.x[tr].std(0)
        x = torch.tensor((data.x - mean) / std, dtype=torch.float32)
        prep = {"standardise": "train split mean / std", "mean": mean.round(6).tolist()}
        prep["std"] = std.round(6).tolist()
        return Inputs(x, x.shape[1], prep)
    x = torch.tensor(data.x, dtype=torch.float32).div(255.0).unsqueeze(1)
    x = F.avg_pool2d(x, POOL)
    prep = {"input": f"binary {data.x.shape[-1]} px sprite / 255", "avg_pool": POOL, "size": x.shape[-1]}
    return Inputs(x, x.shape[-1], prep)


def pair_inputs(
    data: cd.ConceptData, inp: Inputs, g: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """2N/3 pairs (N = train rows) sharing at least one factor, for Ada-GVAE (as the paper).

    dSprites: the partner is a train image with the same value of a random factor.
    TabularToy: factors are continuous, so no two rows share one; the partner is drawn from
    the generator (same value of a random latent, the others from their conditional law).
    """
    tr = data.train
    n_pairs = 2 * len(tr) // 3
    first = g.choice(tr, size=n_pairs)
    names = list(data.factors)
    keep = g.integers(0, len(names), size=n_pairs)
    if data.family == "tabular_toy":
        z = np.stack([data.factors[k] for k in names], axis=1)[first]
        z2 = cd.toy_conditional_pair(z, keep, data.level, g)
        mean, std = np.array(inp.preprocessing["mean"]), np.array(inp.preprocessing["std"])
        x2 = torch.tensor((cd.toy_features(z2) - mean) / std, dtype=torch.float32)
        return inp.x[first], x2
    fac = np.stack([data.factors[k][tr] for k in names], axis=1)
    second = np.empty(n_pairs, dtype=np.int64)
    for p, (i, j) in enumerate(zip(first, keep)):
        same = tr[(fac[:, j] == data.factors[names[j]][i]) & (tr != i)]
        second[p] = g.choice(same) if len(same) else i
    return inp.x[first], inp.x[second]


# ---------------------------------------------------------------- training
@dataclass
class Trained:
    features: np.ndarray  # (n, k * d) float32, concept-major
    concept_names: list[str]
    concept_dim: int
    epochs: int
    model: str
    preprocessing: dict
    loss: float  # mean training loss of the last epoch


def _batches(n: int, g: torch.Generator):
    perm = torch.randperm(n, generator=g)
    for i in range(0, n, BATCH_SIZE):
        yield perm[i : i + BATCH_SIZE]


def _fit(params, n: int, epochs: int, step, g: torch.Generator, bar) -> float:
    opt = torch.optim.Adam(params, lr=LR)
    last = 0.0
    for _ in range(epochs):
        total, count = 0.0, 0
        for idx in _batches(n, g):
            if len(idx) < 2:  # BatchNorm needs two rows
                continue
            loss = step(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total, count = total + float(loss.detach()) * len(idx), count + len(idx)
        last = total / max(count, 1)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{last:.3f}")
    return last


def _kl(mu: torch.Tensor, lv: torch.Tensor) -> torch.Tensor:
    return 0.5 * (mu.pow(2) + lv.exp() - 1 - lv).sum(1)


def _gaussian(h: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    return h[:, :k], h[:, k:].clamp(-10, 10)


@contextlib.contextmanager
def _deterministic():
    """One thread and deterministic kernels while training (a fixed thread count is what makes
    the floating-point results reproducible, and on a shared 2-core machine the fast choice)."""
    from .encoders import set_determinism

    prev = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    set_determinism()
    try:
        yield
    finally:
        torch.set_num_threads(prev[0])
        torch.use_deterministic_algorithms(prev[1])


def train(method: str, data: cd.ConceptData, seed: int, run: str = "", progress: bool = False) -> Trained:
    """Train `method` on the train split of `data`; return the representation of every row.

    The training seed derives from `seed` and `run` (replicates differ by their run name)."""
    if method not in METHODS:
        raise ValueError(f"unknown concept method {method!r}; choose from {', '.join(METHODS)}")
    with _deterministic():
        return _train(method, data, seed, run, progress)


def _train(method: str, data: cd.ConceptData, seed: int, run: str, progress: bool) -> Trained:
    s = stable_seed(seed, run or f"{method}-{data.name}")
    torch.manual_seed(s)
    g = torch.Generator().manual_seed(s)
    inp = inputs_of(data)
    fam, k = data.family, len(data.concept_names)
    epochs = EPOCHS[fam][method]
    tr = torch.as_tensor(data.train)
    x_tr = inp.x[tr]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=epochs, desc=run or f"{method}-{data.name}", leave=False)
    if method == "cbm":
        enc, head = encoder(fam, inp.in_dim, k), mlp([k, 64, 64, data.n_labels])
        c_tr = torch.tensor(data.concepts, dtype=torch.float32)[tr]
        y_tr = torch.tensor(data.labels)[tr]
        alpha = ALPHA[fam]

        def step(idx):
            logits = enc(x_tr[idx])
            task = F.cross_entropy(head(torch.sigmoid(logits)), y_tr[idx])
            return task + alpha * F.binary_cross_entropy_with_logits(logits, c_tr[idx])

        modules = nn.ModuleList([enc, head])
        loss = _fit(modules.parameters(), len(x_tr), epochs, step, g, bar)
        rep = lambda h: torch.sigmoid(h)  # noqa: E731
        names = list(data.concept_names)
    else:
        enc, dec = encoder(fam, inp.in_dim, 2 * k), decoder(fam, k, inp.in_dim)
        beta = BETA[method]

        def elbo(xb, mu, lv):
            z = mu + torch.randn(mu.shape, generator=g) * (0.5 * lv).exp()
            return inp.likelihood(fam, dec(z), xb) + beta * _kl(mu, lv)

        if method == "ada_gvae":
            x1, x2 = pair_inputs(data, inp, np.random.default_rng(s))

            def step(idx):
                a, b = x1[idx], x2[idx]
                (m1, l1), (m2, l2) = _gaussian(enc(a), k), _gaussian(enc(b), k)
                v1, v2 = l1.exp(), l2.exp()
                d = 0.5 * (l2 - l1 + (v1 + (m1 - m2).pow(2)) / v2 - 1)  # KL(q1 || q2) per dim
                tau = 0.5 * (d.max(1, keepdim=True).values + d.min(1, keepdim=True).values)
                shared = d < tau
                m_avg, v_avg = 0.5 * (m1 + m2), 0.5 * (v1 + v2)
                m1, m2 = torch.where(shared, m_avg, m1), torch.where(shared, m_avg, m2)
                l1 = torch.where(shared, v_avg.log(), l1)
                l2 = torch.where(shared, v_avg.log(), l2)
                return (elbo(a, m1, l1) + elbo(b, m2, l2)).mean() / 2

            n_steps = len(x1)
        else:

            def step(idx):
                xb = x_tr[idx]
                mu, lv = _gaussian(enc(xb), k)
                return elbo(xb, mu, lv).mean()

            n_steps = len(x_tr)
        modules = nn.ModuleList([enc, dec])
        loss = _fit(modules.parameters(), n_steps, epochs, step, g, bar)
        rep = lambda h: h[:, :k]  # noqa: E731  posterior mean
        names = [f"c{i}" for i in range(k)]
    if bar is not None:
        bar.close()
    enc.eval()
    with torch.no_grad():
        feats = torch.cat([rep(enc(inp.x[i : i + 512])) for i in range(0, len(inp.x), 512)])
    return Trained(
        features=feats.numpy().astype(np.float32),
        concept_names=names,
        concept_dim=1,
        epochs=epochs,
        model=MODEL_NAME[fam],
        preprocessing=inp.preprocessing,
        loss=loss,
    )


# ---------------------------------------------------------------- the build step
# Training replicates per dataset: TabularToy models take seconds, dSprites ones a minute.
REPLICATES = {"tabular_toy": 3, "dsprites": 1}


def checkpoint_id(method: str, dataset: str, replicate: int) -> str:
    """Also the checkpoint's `run`: the training seed is derived from it."""
    return f"{method}-{dataset}-s{replicate}"


def planned(seed: int) -> list[tuple[str, str, str, int]]:
    """(checkpoint_id, dataset, method, replicate) of every concept checkpoint of the demo."""
    out = []
    for name in cd.dataset_names():
        for method in METHODS:
            for r in range(REPLICATES[cd.family_of(name)]):
                out.append((checkpoint_id(method, name, r), name, method, r))
    return out


def _stamp(seed: int, cid: str, method: str, family: str) -> dict:
    fam_cfg = {"tabular_toy": "toy", "dsprites": "dsprites"}[family]
    gen = cd.generator_stamp(seed)
    return {"run": cid, "seed": seed, "data": {"version": gen["version"], fam_cfg: gen[fam_cfg]}} | {
        "config": config_dict(method, family)
    }


def config_dict(method: str, family: str) -> dict:
    return {
        "method": method,
        "epochs": EPOCHS[family][method],
        "batch_size": BATCH_SIZE,
        "lr": LR,
        "alpha": ALPHA[family] if method == "cbm" else None,
        "beta": BETA.get(method),
        "pool": POOL if family == "dsprites" else None,
        "version": 1,
    }


def checkpoint_done(ws, cid: str, stamp: dict) -> bool:
    """Its row names its concepts and its features were computed with this very stamp."""
    if not ws.table_path("checkpoints").exists() or not ws.has("features", checkpoint_id=cid):
        return False
    import pyarrow.compute as pc

    t = ws.read("checkpoints")
    if "concept_names" not in t.column_names:
        return False
    row = t.filter(pc.equal(t["checkpoint_id"], cid))
    if row.num_rows != 1 or row["concept_names"][0].as_py() is None:
        return False
    return ws.read_metadata("features", checkpoint_id=cid).get("stamp") == json.loads(json.dumps(stamp))


def write_checkpoint(ws, data: cd.ConceptData, cid: str, method: str, trained: Trained, stamp: dict) -> None:
    import pyarrow as pa

    emb = np.ascontiguousarray(trained.features, dtype=np.float32)
    n, dim = emb.shape
    offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
    lists = pa.ListArray.from_arrays(offsets, pa.array(emb.reshape(-1), type=pa.float32()))
    table = pa.Table.from_arrays([pa.array(cd.image_ids(data), pa.string()), lists], schema=FEATURES_SCHEMA)
    ws.write("features", table, metadata={"stamp": stamp}, checkpoint_id=cid)
    row = {c: None for c in schema.arrow_schema("checkpoints").names}
    row.update(
        checkpoint_id=cid,
        dataset=data.name,
        model=trained.model,
        method=method,
        epoch=trained.epochs,
        feature_dim=dim,
        source=f"conceptlens.demo.concepts_models:train({method})",
        run=cid,
        preprocessing=json.dumps(trained.preprocessing, sort_keys=True),
        created=cd.CREATED,
        concept_names=trained.concept_names,
        concept_dim=trained.concept_dim,
    )
    _put_checkpoint(ws, pa.Table.from_pylist([row], schema=schema.arrow_schema("checkpoints")))


def _put_checkpoint(ws, new) -> None:
    """Replace the checkpoint's row where it stands (or append it): a resumed build writes
    the same file as an uninterrupted one. Other rows keep their values; columns only one
    side has are null on the other."""
    import pyarrow as pa

    p = ws.table_path("checkpoints")
    if not p.exists():
        ws.write("checkpoints", new)
        return
    old = ws.read("checkpoints")
    types = {f.name: f.type for f in old.schema}
    new = new.cast(pa.schema([pa.field(f.name, types.get(f.name, f.type)) for f in new.schema]))
    ids = old["checkpoint_id"].to_pylist()
    cid = new["checkpoint_id"][0].as_py()
    if cid in ids:
        i = ids.index(cid)
        parts = [old.slice(0, i), new, old.slice(i + 1)]
    else:
        parts = [old, new]
    ws.write("checkpoints", pa.concat_tables(parts, promote_options="default"))


def build_concepts(ws, seed: int, progress: bool = True) -> dict:
    """The `concepts` stage of `conceptlens demo build`: data (unless written with this seed)
    and every concept checkpoint not yet done; resumable, and it leaves the rest alone.
    Returns CPU seconds per part."""

    def log(msg):
        if progress:
            from tqdm import tqdm

            tqdm.write(msg)

    times: dict[str, float] = {}
    cache: dict[str, cd.ConceptData] = {}

    def get(name: str) -> cd.ConceptData:
        if name not in cache:
            cache[name] = cd.generate(name, seed)
        return cache[name]

    with _deterministic():
        t0 = time.process_time()
        if cd.data_done(ws, seed):
            log("concepts: data up to date")
        else:
            cd.write_data(ws, [get(n) for n in cd.dataset_names()], seed, progress)
        times["data"] = time.process_time() - t0
        for cid, name, method, _ in planned(seed):
            stamp = _stamp(seed, cid, method, cd.family_of(name))
            if checkpoint_done(ws, cid, stamp):
                continue
            t1 = time.process_time()
            data = get(name)
            trained = train(method, data, seed, run=cid, progress=progress)
            write_checkpoint(ws, data, cid, method, trained, stamp)
            dt = time.process_time() - t1
            times[cid] = dt
            log(f"{cid}: {dt:.1f}s CPU, last epoch loss {trained.loss:.3f}")
    return times
