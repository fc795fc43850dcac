"""Small image encoders for the demo and the training regimes that produce its checkpoints.

Every encoder maps a normalised RGB batch `(B, 3, S, S)` to an embedding `(B, D)`
and is saved in the plain-PyTorch weights-file convention

    torch.save({"state_dict": ..., "init_kwargs": {...},
                "preprocess": {"size": S, "mean": [...], "std": [...]}}, path)

so the demo's checkpoints go through the same extraction path as a user's model
(spec `torch:conceptlens.demo.encoders:ConvEncoder` or `...:PixelPCA`).

Regimes (all deterministic from a seed, on CPU):

* `simclr`     - SimCLR: two augmented views, NT-Xent loss on a projection head.
* `simsiam`    - SimSiam: two augmented views, a predictor on one branch and a
                 stop-gradient on the other, negative cosine (no negatives).
* `autoencoder` - convolutional autoencoder; the embedding is the bottleneck.
* `vae`        - variational autoencoder; the embedding is the posterior mean.
* `rotation`   - predict which of 0/90/180/270 degrees an image was rotated by.
* `supervised` - cross-entropy on a chosen SUBSET of the factors (e.g. shape and
                 size but not colour); the embedding is the penultimate layer.
* `random`     - the untrained, randomly initialised encoder.
* `pca`        - principal components of (average-pooled) pixels, fitted on the
                 train split, as a fixed linear layer (`PixelPCA`).
"""

from __future__ import annotations

import copy
import io
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

from ..models.augment import augment
from ..workspace import atomic_write_bytes

ENCODER_SPEC = "torch:conceptlens.demo.encoders:ConvEncoder"
PCA_SPEC = "torch:conceptlens.demo.encoders:PixelPCA"


# ---------------------------------------------------------------- determinism
def set_determinism(threads: int = 1) -> None:
    """Fixed thread count and deterministic kernels: a rebuild gives the same weights."""
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


def stable_seed(seed: int, *names: str) -> int:
    """A 31-bit seed derived from `seed` and names (stable across processes, unlike hash())."""
    h = zlib.crc32(("/".join(map(str, names))).encode())
    return int(np.random.SeedSequence([seed, h]).generate_state(1)[0] & 0x7FFFFFFF)


# ---------------------------------------------------------------- models
class ConvEncoder(nn.Module):
    """Four stride-2 conv blocks (conv-BN-ReLU), global average pooling, linear to `embed_dim`.

    About 65k parameters at width 16; works for any input side divisible by 16.
    """

    def __init__(self, in_size: int = 64, width: int = 16, embed_dim: int = 64, in_channels: int = 3):
        super().__init__()
        self.in_size, self.width, self.embed_dim = in_size, width, embed_dim
        chans = [in_channels, width, 2 * width, 4 * width, 4 * width]
        blocks = []
        for i in range(4):
            blocks += [
                nn.Conv2d(chans[i], chans[i + 1], 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(chans[i + 1]),
                nn.ReLU(inplace=True),
            ]
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(chans[-1], embed_dim)
        self.out_channels = chans[-1]

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


class ConvDecoder(nn.Module):
    """Mirror of `ConvEncoder` for the autoencoder (training only; not saved)."""

    def __init__(self, in_size: int = 64, width: int = 16, embed_dim: int = 64, out_channels: int = 3):
        super().__init__()
        self.side = in_size // 16
        self.c0 = 4 * width
        self.fc = nn.Linear(embed_dim, self.c0 * self.side * self.side)
        chans = [4 * width, 4 * width, 2 * width, width]
        layers = []
        for i in range(3):
            layers += [
                nn.ConvTranspose2d(chans[i], chans[i + 1], 4, stride=2, padding=1),
                nn.BatchNorm2d(chans[i + 1]),
                nn.ReLU(inplace=True),
            ]
        layers += [nn.ConvTranspose2d(width, out_channels, 4, stride=2, padding=1)]
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc(z)).view(-1, self.c0, self.side, self.side)
        return self.net(h)


class PixelPCA(nn.Module):
    """Raw pixels -> average-pool by `pool` -> flatten -> fixed PCA projection.

    `mean` and `components` are buffers filled by `fit` (or loaded from a weights file).
    """

    def __init__(self, in_size: int = 64, pool: int = 4, n_components: int = 64, in_channels: int = 3):
        super().__init__()
        self.in_size, self.pool, self.n_components = in_size, pool, n_components
        d = in_channels * (in_size // pool) ** 2
        self.register_buffer("mean", torch.zeros(d))
        self.register_buffer("components", torch.zeros(n_components, d))

    def flat(self, x: torch.Tensor) -> torch.Tensor:
        if self.pool > 1:
            x = F.avg_pool2d(x, self.pool)
        return x.flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.flat(x) - self.mean) @ self.components.T

    @torch.no_grad()
    def fit(self, x: torch.Tensor) -> PixelPCA:
        """Fit on a normalised batch (the train split); signs fixed for determinism."""
        v = self.flat(x).double()
        mu = v.mean(0)
        _, _, vh = torch.linalg.svd(v - mu, full_matrices=False)
        comp = vh[: self.n_components]
        idx = comp.abs().argmax(dim=1)
        sign = torch.sign(comp[torch.arange(comp.shape[0]), idx])
        comp = comp * sign[:, None]
        self.mean.copy_(mu.float())
        self.components.copy_(comp.float())
        return self


# ---------------------------------------------------------------- weights files
def save_weights(path: Path, model: nn.Module, init_kwargs: dict, preprocess: dict) -> bytes:
    """Write the weights file atomically (plain-PyTorch adapter convention); return its bytes."""
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    buf = io.BytesIO()
    torch.save({"state_dict": state, "init_kwargs": dict(init_kwargs), "preprocess": dict(preprocess)}, buf)
    data = buf.getvalue()
    atomic_write_bytes(Path(path), data)
    return data


def load_weights(path: Path, cls: type | None = None) -> nn.Module:
    """Rebuild a model from a weights file (class given, or ConvEncoder/PixelPCA guessed)."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if cls is None:
        cls = PixelPCA if "components" in ck["state_dict"] else ConvEncoder
    m = cls(**ck["init_kwargs"])
    m.load_state_dict(ck["state_dict"])
    return m.eval()


# ---------------------------------------------------------------- data
@dataclass
class ImageSet:
    """A dataset's images in memory as uint8 (N, 3, S, S), with their table rows."""

    ids: list[str]
    pixels: torch.Tensor
    frame: object  # pandas DataFrame of the images rows, same order

    @property
    def train(self) -> np.ndarray:
        return np.flatnonzero((self.frame["split"] == "train").to_numpy())


def load_imageset(ws, dataset: str) -> ImageSet:
    df = ws.read("images").to_pandas()
    df = df[df["dataset"] == dataset].sort_values("image_id").reset_index(drop=True)
    if df.empty:
        raise ValueError(f"dataset {dataset!r} has no images in {ws.root}")
    arrs = []
    for rel in df["thumbnail"]:
        with Image.open(ws.resolve(rel)) as im:
            arrs.append(np.asarray(im.convert("RGB")))
    px = torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous()
    return ImageSet(list(df["image_id"]), px, df)


def channel_stats(pixels: torch.Tensor) -> tuple[list[float], list[float]]:
    x = pixels.float() / 255.0
    mean = x.mean(dim=(0, 2, 3))
    std = x.std(dim=(0, 2, 3)).clamp_min(1e-3)
    return [round(float(v), 4) for v in mean], [round(float(v), 4) for v in std]


def normalise(pixels: torch.Tensor, mean, std) -> torch.Tensor:
    x = pixels.float() / 255.0
    return (x - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)


# ---------------------------------------------------------------- training
def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.2) -> torch.Tensor:
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = z1.shape[0]
    sim = z @ z.T / temperature
    sim.fill_diagonal_(float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, target)


def _batches(n: int, batch_size: int, g: torch.Generator) -> Iterable[torch.Tensor]:
    perm = torch.randperm(n, generator=g)
    for i in range(0, n - batch_size + 1 if n >= batch_size else 1, batch_size):
        yield perm[i : i + batch_size]


@dataclass
class Snapshot:
    epoch: int
    model: nn.Module


def _train(
    model_parts: nn.Module,
    encoder: nn.Module,
    epochs: Iterable[int],
    n: int,
    batch_size: int,
    lr: float,
    g: torch.Generator,
    step: Callable[[torch.Tensor], torch.Tensor],
    desc: str,
    progress: bool,
) -> list[Snapshot]:
    from tqdm import tqdm

    save_at = sorted(set(int(e) for e in epochs))
    opt = torch.optim.Adam(model_parts.parameters(), lr=lr)
    snaps = []
    steps = (max(n // batch_size, 1)) * save_at[-1]
    bar = tqdm(total=steps, desc=desc, disable=not progress, leave=False)
    for epoch in range(1, save_at[-1] + 1):
        model_parts.train()
        for idx in _batches(n, batch_size, g):
            loss = step(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bar.update(1)
            bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
        if epoch in save_at:
            snaps.append(Snapshot(epoch, copy.deepcopy(encoder).eval()))
    bar.close()
    return snaps


def train_simclr(
    x01: torch.Tensor,
    mean,
    std,
    *,
    seed: int,
    epochs=(1, 5, 15),
    width: int = 16,
    embed_dim: int = 64,
    batch_size: int = 256,
    lr: float = 2e-3,
    temperature: float = 0.2,
    flip: bool = True,
    color: float = 0.4,
    progress: bool = True,
    desc: str = "simclr",
) -> list[Snapshot]:
    """SimCLR on [0, 1] images `x01` (N, 3, S, S); returns encoders at the given epochs."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    enc = ConvEncoder(x01.shape[-1], width, embed_dim)
    proj = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 32))
    parts = nn.ModuleList([enc, proj])
    m = torch.tensor(mean).view(1, -1, 1, 1)
    s = torch.tensor(std).view(1, -1, 1, 1)

    def step(idx):
        xb = x01[idx]
        v1 = (augment(xb, g, flip=flip, color=color) - m) / s
        v2 = (augment(xb, g, flip=flip, color=color) - m) / s
        return nt_xent(proj(enc(v1)), proj(enc(v2)), temperature)

    return _train(parts, enc, epochs, len(x01), min(batch_size, len(x01)), lr, g, step, desc, progress)


def train_simsiam(
    x01: torch.Tensor,
    mean,
    std,
    *,
    seed: int,
    epochs=(1, 5),
    width: int = 16,
    embed_dim: int = 64,
    batch_size: int = 256,
    lr: float = 2e-3,
    flip: bool = True,
    color: float = 0.4,
    progress: bool = True,
    desc: str = "simsiam",
) -> list[Snapshot]:
    """SimSiam (Chen & He 2021) on [0, 1] images: symmetrised negative cosine between one
    view's prediction and the other view's projection, the latter without gradient."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    enc = ConvEncoder(x01.shape[-1], width, embed_dim)
    proj = nn.Sequential(
        nn.Linear(embed_dim, embed_dim),
        nn.BatchNorm1d(embed_dim),
        nn.ReLU(),
        nn.Linear(embed_dim, embed_dim),
        nn.BatchNorm1d(embed_dim),
    )
    pred = nn.Sequential(
        nn.Linear(embed_dim, embed_dim // 2),
        nn.BatchNorm1d(embed_dim // 2),
        nn.ReLU(),
        nn.Linear(embed_dim // 2, embed_dim),
    )
    parts = nn.ModuleList([enc, proj, pred])
    m = torch.tensor(mean).view(1, -1, 1, 1)
    s = torch.tensor(std).view(1, -1, 1, 1)

    def step(idx):
        xb = x01[idx]
        z1 = proj(enc((augment(xb, g, flip=flip, color=color) - m) / s))
        z2 = proj(enc((augment(xb, g, flip=flip, color=color) - m) / s))
        p1, p2 = pred(z1), pred(z2)
        return (
            -(F.cosine_similarity(p1, z2.detach()).mean() + F.cosine_similarity(p2, z1.detach()).mean()) / 2
        )

    return _train(parts, enc, epochs, len(x01), min(batch_size, len(x01)), lr, g, step, desc, progress)


def train_vae(
    x: torch.Tensor,
    *,
    seed: int,
    epochs=(1, 5),
    width: int = 16,
    embed_dim: int = 64,
    batch_size: int = 128,
    lr: float = 2e-3,
    beta: float = 1.0,
    progress: bool = True,
    desc: str = "vae",
) -> list[Snapshot]:
    """VAE on normalised images: Gaussian posterior (mean = the encoder's output, log-variance
    from a second head on the pooled features), mirrored decoder, summed squared error +
    beta KL per image. The saved encoder gives the posterior mean."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    enc = ConvEncoder(x.shape[-1], width, embed_dim)
    logvar = nn.Linear(enc.out_channels, embed_dim)
    dec = ConvDecoder(x.shape[-1], width, embed_dim)
    parts = nn.ModuleList([enc, logvar, dec])

    def step(idx):
        xb = x[idx]
        h = enc.feature_map(xb).mean(dim=(2, 3))
        mu, lv = enc.head(h), logvar(h).clamp(-8, 8)
        eps = torch.randn(mu.shape, generator=g)
        rec = dec(mu + eps * (0.5 * lv).exp())
        kl = 0.5 * (mu.pow(2) + lv.exp() - 1 - lv).sum(dim=1)
        return ((rec - xb).pow(2).flatten(1).sum(dim=1) + beta * kl).mean() / xb[0].numel()

    return _train(parts, enc, epochs, len(x), min(batch_size, len(x)), lr, g, step, desc, progress)


def train_rotation(
    x: torch.Tensor,
    *,
    seed: int,
    epochs=(1, 5),
    width: int = 16,
    embed_dim: int = 64,
    batch_size: int = 128,
    lr: float = 2e-3,
    progress: bool = True,
    desc: str = "rotation",
) -> list[Snapshot]:
    """Rotation prediction (Gidaris et al. 2018): each image of a batch is turned by a random
    multiple of 90 degrees and a linear head on the embedding names the multiple."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    enc = ConvEncoder(x.shape[-1], width, embed_dim)
    head = nn.Linear(embed_dim, 4)
    parts = nn.ModuleList([enc, head])

    def step(idx):
        xb = x[idx]
        turns = torch.randint(0, 4, (len(idx),), generator=g)
        xr = torch.stack([torch.rot90(im, int(t), dims=(1, 2)) for im, t in zip(xb, turns)])
        return F.cross_entropy(head(F.relu(enc(xr))), turns)

    return _train(parts, enc, epochs, len(x), min(batch_size, len(x)), lr, g, step, desc, progress)


def train_autoencoder(
    x: torch.Tensor,
    *,
    seed: int,
    epochs=(2, 10),
    width: int = 16,
    embed_dim: int = 64,
    batch_size: int = 128,
    lr: float = 2e-3,
    progress: bool = True,
    desc: str = "autoencoder",
) -> list[Snapshot]:
    """Autoencoder on normalised images `x`; MSE reconstruction; encoder = bottleneck."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    enc = ConvEncoder(x.shape[-1], width, embed_dim)
    dec = ConvDecoder(x.shape[-1], width, embed_dim)
    parts = nn.ModuleList([enc, dec])

    def step(idx):
        xb = x[idx]
        return F.mse_loss(dec(enc(xb)), xb)

    return _train(parts, enc, epochs, len(x), min(batch_size, len(x)), lr, g, step, desc, progress)


def train_supervised(
    x: torch.Tensor,
    targets: dict[str, torch.Tensor],
    *,
    seed: int,
    epochs=(1, 5),
    width: int = 16,
    embed_dim: int = 64,
    batch_size: int = 128,
    lr: float = 2e-3,
    progress: bool = True,
    desc: str = "supervised",
) -> list[Snapshot]:
    """Cross-entropy on each factor in `targets` (name -> int64 class index), summed."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    enc = ConvEncoder(x.shape[-1], width, embed_dim)
    names = sorted(targets)
    heads = nn.ModuleDict({k: nn.Linear(embed_dim, int(targets[k].max()) + 1) for k in names})
    parts = nn.ModuleList([enc, heads])

    def step(idx):
        z = F.relu(enc(x[idx]))
        return sum(F.cross_entropy(heads[k](z), targets[k][idx]) for k in names)

    return _train(parts, enc, epochs, len(x), min(batch_size, len(x)), lr, g, step, desc, progress)


def random_encoder(in_size: int, *, seed: int, width: int = 16, embed_dim: int = 64) -> ConvEncoder:
    torch.manual_seed(seed)
    return ConvEncoder(in_size, width, embed_dim).eval()


def fit_pca(x: torch.Tensor, *, pool: int, n_components: int = 64) -> PixelPCA:
    return PixelPCA(x.shape[-1], pool, n_components, x.shape[1]).fit(x).eval()


@torch.no_grad()
def embed(model: nn.Module, x: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """Quick in-memory embedding of a normalised batch (for tests and sanity checks)."""
    model.eval()
    return torch.cat([model(x[i : i + batch_size]) for i in range(0, len(x), batch_size)]).numpy()
