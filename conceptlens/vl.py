"""Vision-language models shipped in a workspace: prompting, retrieval and captions.

A VL model is an open_clip `CLIP` built from an architecture config stored in the
workspace (`models/<id>.json`, an ordinary open_clip model config with `embed_dim`,
`vision_cfg` and `text_cfg`, so `open_clip.add_model_config(path)` accepts it) and a
weights file (`models/<id>.pt`, a plain open_clip state dict loadable with
`open_clip.create_model(<id>, pretrained=path)` or `open_clip.factory.load_checkpoint`).
Each has a row in `vl_models.parquet`. Text goes through open_clip's default
`SimpleTokenizer`, whose BPE vocabulary ships inside the package (no download).
Images go through open_clip's eval transform (resize, centre crop, OpenAI mean/std).

Captions by retrieval: `retrieve_captions` gives each image the candidate sentence
with the highest image-text similarity. For the demo the candidates are the
dataset's ground-truth captions of the TRAIN split only, so a test image's caption
is never its own ground truth; `write_captions` stores the result in
`captions.parquet` under captioner `vl:<vl_model_id>`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from .workspace import Workspace, WorkspaceError, sha256_file

CAPTIONER_PREFIX = "vl:"
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def tiny_config(
    image_size: int = 64,
    patch_size: int = 8,
    embed_dim: int = 64,
    vision_width: int = 64,
    vision_layers: int = 3,
    text_width: int = 32,
    text_layers: int = 2,
    context_length: int = 32,
) -> dict:
    """A tiny open_clip architecture: small ViT image tower, tiny text transformer."""
    return {
        "embed_dim": embed_dim,
        "vision_cfg": {
            "image_size": image_size,
            "patch_size": patch_size,
            "layers": vision_layers,
            "width": vision_width,
            "head_width": 32,
            "mlp_ratio": 2.0,
        },
        "text_cfg": {
            "context_length": context_length,
            "vocab_size": 49408,
            "width": text_width,
            "heads": 4,
            "layers": text_layers,
            "mlp_ratio": 2.0,
        },
    }


def tiny_resnet_config(
    image_size: int = 64,
    width: int = 8,
    embed_dim: int = 64,
    text_width: int = 32,
    text_layers: int = 2,
    context_length: int = 32,
) -> dict:
    """A tiny open_clip architecture with a ModifiedResNet (conv) image tower.

    `layers` (1, 1, 1, 1) of bottleneck blocks at base `width` (stem to 1/4, then
    strides 1, 2, 2, 2: an (S/32)^2 grid) and open_clip's attention pooling.
    """
    return {
        "embed_dim": embed_dim,
        "vision_cfg": {"image_size": image_size, "layers": [1, 1, 1, 1], "width": width, "head_width": 16},
        "text_cfg": {
            "context_length": context_length,
            "vocab_size": 49408,
            "width": text_width,
            "heads": 4,
            "layers": text_layers,
            "mlp_ratio": 2.0,
        },
    }


def build_clip(config: dict):
    """Instantiate open_clip's CLIP from a model config dict (random init)."""
    from open_clip.model import CLIP

    cfg = {
        k: v
        for k, v in config.items()
        if k in ("embed_dim", "vision_cfg", "text_cfg", "quick_gelu", "init_logit_scale")
    }
    return CLIP(**json.loads(json.dumps(cfg)))


def _unique(seq: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(seq))


class VLModel:
    """A CLIP-style model that embeds texts and images into one space (rows L2-normalised)."""

    def __init__(
        self,
        model,
        config: dict,
        *,
        vl_model_id: str | None = None,
        dataset: str | None = None,
        device: str = "cpu",
    ):
        import torch
        from open_clip.tokenizer import SimpleTokenizer
        from open_clip.transform import image_transform

        self.model = model.to(device).eval()
        self.config = config
        self.vl_model_id, self.dataset, self.device = vl_model_id, dataset, device
        self.image_size = int(config["vision_cfg"]["image_size"])
        self.context_length = int(config["text_cfg"].get("context_length", 77))
        self.tokenizer = SimpleTokenizer(context_length=self.context_length)
        self.transform = image_transform(self.image_size, is_train=False, mean=OPENAI_MEAN, std=OPENAI_STD)
        self._torch = torch

    # ---- construction ---------------------------------------------------
    @classmethod
    def from_files(cls, config_path, weights_path, **kw) -> VLModel:
        from open_clip.factory import load_checkpoint

        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        model = build_clip(config)
        load_checkpoint(model, str(weights_path), strict=True, weights_only=True)
        return cls(model, config, **kw)

    @classmethod
    def from_workspace(cls, ws_root, vl_model_id_or_dataset: str, device: str = "cpu") -> VLModel:
        """Load a VL model of the workspace by its `vl_model_id` or by its dataset name."""
        ws = Workspace(ws_root)
        p = ws.table_path("vl_models")
        if not p.exists():
            raise WorkspaceError(
                f"{p}: no vl_models table; this workspace ships no vision-language model "
                "(for the demo, run `conceptlens demo build --stages models`)"
            )
        rows = ws.read("vl_models").to_pylist()
        key = vl_model_id_or_dataset
        hit = [r for r in rows if r["vl_model_id"] == key] or [r for r in rows if r["dataset"] == key]
        if not hit:
            raise WorkspaceError(
                f"{p}: no vision-language model {key!r} (by id or dataset); available: "
                f"{', '.join(r['vl_model_id'] + ' (' + r['dataset'] + ')' for r in rows) or 'none'}"
            )
        r = hit[0]
        if not r.get("config") or not r.get("weights"):
            raise WorkspaceError(f"{p}: vl model {r['vl_model_id']!r} has no config or weights file")
        cfg, w = ws.resolve(r["config"]), ws.resolve(r["weights"])
        for f in (cfg, w):
            if not f.exists():
                raise WorkspaceError(f"{f}: file of vl model {r['vl_model_id']!r} not found")
        if r.get("weights_sha256") and sha256_file(w) != r["weights_sha256"]:
            raise WorkspaceError(
                f"{w}: SHA-256 does not match vl_models.parquet (weights of {r['vl_model_id']!r} changed)"
            )
        return cls.from_files(cfg, w, vl_model_id=r["vl_model_id"], dataset=r["dataset"], device=device)

    # ---- encoding -------------------------------------------------------
    def encode_text(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        torch = self._torch
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                tok = self.tokenizer(list(texts[i : i + batch_size])).to(self.device)
                out.append(
                    torch.nn.functional.normalize(self.model.encode_text(tok).float(), dim=-1).cpu().numpy()
                )
        if not out:
            return np.zeros((0, self.config["embed_dim"]), np.float32)
        return np.concatenate(out).astype(np.float32)

    def encode_tensor(self, x, batch_size: int = 256) -> np.ndarray:
        """Embed an already preprocessed batch (N, 3, S, S)."""
        torch = self._torch
        out = []
        with torch.no_grad():
            for i in range(0, len(x), batch_size):
                out.append(
                    torch.nn.functional.normalize(
                        self.model.encode_image(x[i : i + batch_size].to(self.device)).float(), dim=-1
                    )
                    .cpu()
                    .numpy()
                )
        if not out:
            return np.zeros((0, self.config["embed_dim"]), np.float32)
        return np.concatenate(out).astype(np.float32)

    def encode_images(self, paths: list[Path], batch_size: int = 256) -> np.ndarray:
        torch = self._torch
        out = []
        for i in range(0, len(paths), batch_size):
            ims = []
            for p in paths[i : i + batch_size]:
                with Image.open(p) as im:
                    ims.append(self.transform(im.convert("RGB")))
            out.append(self.encode_tensor(torch.stack(ims), batch_size))
        if not out:
            return np.zeros((0, self.config["embed_dim"]), np.float32)
        return np.concatenate(out)

    def classify(self, image_emb: np.ndarray, prompts: dict[str, list[str]]) -> list[str]:
        """Zero-shot classification: class with the highest similarity to its mean prompt."""
        names = list(prompts)
        cls = np.stack([self.encode_text(prompts[n]).mean(0) for n in names])
        cls /= np.linalg.norm(cls, axis=1, keepdims=True)
        return [names[i] for i in (image_emb @ cls.T).argmax(1)]


def retrieve_captions(vl: VLModel, image_paths, candidate_texts, batch_size: int = 256) -> list[str]:
    """For each image, the candidate text with the highest similarity (ties: first one)."""
    cands = _unique(candidate_texts)
    if not cands:
        raise ValueError("retrieve_captions needs at least one candidate text")
    t = vl.encode_text(cands, batch_size)
    out = []
    paths = list(image_paths)
    for i in range(0, len(paths), batch_size):
        e = vl.encode_images(paths[i : i + batch_size], batch_size)
        out += [cands[j] for j in (e @ t.T).argmax(1)]
    return out


def write_captions(ws: Workspace, vl: VLModel, dataset: str | None = None, batch_size: int = 256) -> int:
    """Caption every image of `dataset` by retrieval among its TRAIN-split ground-truth captions.

    Rows go to captions.parquet under captioner `vl:<vl_model_id>` (rows of that
    captioner are replaced; ground-truth and other captioners are kept). Returns the count.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    dataset = dataset or vl.dataset
    if vl.vl_model_id is None or dataset is None:
        raise ValueError("write_captions needs a VL model with an id and a dataset")
    images = ws.read("images", columns=["image_id", "dataset", "split", "thumbnail"]).to_pandas()
    images = images[images["dataset"] == dataset].sort_values("image_id")
    caps = ws.read("captions").to_pandas()
    gt = caps[caps["captioner"] == "groundtruth"]
    train_ids = set(images.loc[images["split"] == "train", "image_id"])
    cands = sorted(set(gt.loc[gt["image_id"].isin(train_ids), "text"]))
    if not cands:
        raise WorkspaceError(
            f"{ws.root}: dataset {dataset!r} has no ground-truth captions on its train split to retrieve from"
        )
    texts = retrieve_captions(vl, [ws.resolve(r) for r in images["thumbnail"]], cands, batch_size)
    captioner = CAPTIONER_PREFIX + vl.vl_model_id
    new = pa.Table.from_pydict(
        {"image_id": list(images["image_id"]), "captioner": [captioner] * len(texts), "text": texts},
        schema=ws.read("captions").schema,
    )
    old = ws.read("captions")
    old = old.filter(pc.invert(pc.equal(old["captioner"], captioner)))
    ws.write("captions", pa.concat_tables([old, new]))
    return len(texts)
