"""Train the demo's tiny vision-language models (open_clip CLIP) on images + ground-truth captions.

Contrastive (CLIP) training from scratch on the TRAIN split of one dataset. Half of
the captions in a batch are shortened by word dropout (a random subset of their
words, in order, e.g. "a red star"), and the loss has multiple positives: a caption
is a positive for every image in the batch whose full caption contains all its words.
So short prompts land near all the images they describe, and the image tower must
learn each factor (shape as well as colour) to match them.
Deterministic from the seed (CPU, fixed threads, seeded data order).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..vl import OPENAI_MEAN, OPENAI_STD, VLModel, build_clip, tiny_resnet_config
from ..workspace import atomic_write_bytes


def drop_words(text: str, rng: np.random.Generator, p: float | None = None) -> str:
    """Keep the leading article and a random (non-empty) subset of the other words, in order.

    `p` is the drop probability per word; None draws it per caption from U(0, 0.9), so
    short prompts like "a star" are common.
    """
    words = text.replace(",", "").split()
    head, rest = (words[:1], words[1:]) if words and words[0] in ("a", "an") else ([], words)
    if not rest:
        return text
    if p is None:
        p = float(rng.uniform(0.0, 0.9))
    keep = rng.random(len(rest)) >= p
    if not keep.any():
        keep[rng.integers(len(rest))] = True
    return " ".join(head + [w for w, k in zip(rest, keep) if k])


def _words(text: str) -> frozenset:
    return frozenset(text.replace(",", "").split())


def consistency(texts: list[str], full: list[str]) -> torch.Tensor:
    """M[i, j] = 1 when every word of text j occurs in image i's full caption.

    A shortened caption ("a red star") is a true description of every image whose
    caption contains its words, so all of those are its positives (multi-positive CLIP loss).
    """
    tw = [_words(t) for t in texts]
    fw = [_words(f) for f in full]
    return torch.tensor([[1.0 if t <= f else 0.0 for t in tw] for f in fw])


def preprocess_pixels(pixels_uint8: torch.Tensor) -> torch.Tensor:
    """uint8 (N, 3, S, S) at the model's size -> open_clip-normalised float (same as its eval transform)."""
    x = pixels_uint8.float() / 255.0
    m = torch.tensor(OPENAI_MEAN).view(1, 3, 1, 1)
    s = torch.tensor(OPENAI_STD).view(1, 3, 1, 1)
    return (x - m) / s


def train_clip(
    pixels_uint8: torch.Tensor,
    captions: list[str],
    config: dict,
    *,
    seed: int,
    epochs: int = 12,
    batch_size: int = 128,
    lr: float = 2e-3,
    weight_decay: float = 0.05,
    drop_p: float | None = None,
    drop_frac: float = 0.6,
    progress: bool = True,
    desc: str = "vl",
    on_epoch=None,
):
    """Train a CLIP from `config` on (image, caption) pairs; returns the open_clip model."""
    from open_clip.tokenizer import SimpleTokenizer
    from tqdm import tqdm

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = build_clip(config)
    tok = SimpleTokenizer(context_length=config["text_cfg"]["context_length"])
    x = preprocess_pixels(pixels_uint8)
    n = len(x)
    bs = min(batch_size, n)
    steps_per_epoch = max(n // bs, 1)
    total = steps_per_epoch * epochs
    decay = [p for nme, p in model.named_parameters() if p.ndim >= 2 and "embedding" not in nme]
    no_decay = [p for nme, p in model.named_parameters() if not (p.ndim >= 2 and "embedding" not in nme)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )
    warm = max(total // 20, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + np.cos(np.pi * min(s, total) / total))
    )
    bar = tqdm(total=total, desc=desc, disable=not progress, leave=False)
    model.train()
    for epoch in range(epochs):
        perm = torch.randperm(n, generator=g)
        for i in range(steps_per_epoch):
            idx = perm[i * bs : (i + 1) * bs]
            texts = [
                drop_words(captions[j], rng, drop_p) if rng.random() < drop_frac else captions[j]
                for j in idx.tolist()
            ]
            img = F.normalize(model.encode_image(x[idx]), dim=-1)
            txt = F.normalize(model.encode_text(tok(texts)), dim=-1)
            logits = model.logit_scale.exp().clamp(max=100) * img @ txt.T
            # Multi-positive targets: every image a (shortened) caption truly describes.
            pos = consistency(texts, [captions[j] for j in idx.tolist()])
            pos.fill_diagonal_(1.0)
            t_img = pos / pos.sum(1, keepdim=True)  # image i -> its true texts
            t_txt = pos.T / pos.T.sum(1, keepdim=True)  # text j -> images it describes
            loss = 0.5 * (
                torch.sum(-t_img * F.log_softmax(logits, 1), 1).mean()
                + torch.sum(-t_txt * F.log_softmax(logits.T, 1), 1).mean()
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            with torch.no_grad():
                model.logit_scale.clamp_(0, np.log(100))
            bar.update(1)
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")
        if on_epoch is not None:
            model.eval()
            on_epoch(epoch + 1, model)
            model.train()
    bar.close()
    return model.eval()


def save_clip(model, config: dict, config_path: Path, weights_path: Path) -> None:
    """Config JSON (open_clip model config) + plain state dict; the big token table in fp16."""
    state = {}
    for k, v in model.state_dict().items():
        v = v.detach().cpu().clone()
        if k == "token_embedding.weight":
            v = v.half()  # 49408 x width: the bulk of the file; fp16 halves it
        state[k] = v
    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(Path(config_path), (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())
    atomic_write_bytes(Path(weights_path), buf.getvalue())


def zero_shot(
    vl: VLModel, image_emb: np.ndarray, frame, factor: str, values, templates=("a {} shape",)
) -> float:
    """Accuracy of zero-shot classification of `factor` by prompts built from `templates`."""
    prompts = {v: [t.format(v) for t in templates] for v in values}
    pred = vl.classify(image_emb, prompts)
    return float(np.mean(np.asarray(pred) == frame[factor].to_numpy()))


def shapes_config() -> dict:
    return tiny_resnet_config(image_size=64)


def digits_config() -> dict:
    return tiny_resnet_config(image_size=32)
