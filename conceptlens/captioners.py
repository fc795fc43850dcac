"""`conceptlens caption`: one caption per image of a dataset -> `captions.parquet`.

Captioner specs (the spec is stored as `captions.captioner`):

- `hf:HUB_ID` or `hf:LOCAL_DIR`: a transformers image-to-text model (BLIP, GIT, ...)
  loaded with AutoProcessor + AutoModelForImageTextToText (or Vision2Seq / CausalLM),
  captions from `generate`.
- `open_clip:ARCH@TAG`, `open_clip:CONFIG.json`, `open_clip:ARCH` + `--weights`: a CoCa
  model, captions from `CoCa.generate` (greedy).
- `vl:<vl_model_id>`: retrieval with a vision-language model of the workspace
  (`conceptlens.vl.VLModel`): each image gets the `groundtruth` caption of the dataset's
  TRAIN split whose text embedding has the highest cosine similarity to the image's.
- `imagenet:MODEL_SPEC` (+ `--weights`): a weak baseline, not a vision-language model:
  "a photo of a(n) {top-1 ImageNet-1k class}" from an ImageNet classifier loaded as `extract`
  loads it (`imagenet:timm:tf_efficientnet_lite0 --weights FILE`, `imagenet:torchvision:resnet50`).

Captioners read the images `extract` reads (the originals when recorded, else the
thumbnails), with transparency composited onto the dataset's background.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .models import load_adapter, resolve_path, weights_file
from .models.base import (
    ModelLoadError,
    download_blocked,
    hf_cache_dir,
    hf_repo_cached,
    hub_endpoint,
    missing_weights,
    offline,
)
from .pixels import DEFAULT_BACKGROUND, dataset_background
from .workspace import Workspace, WorkspaceError

CAPTIONS_SCHEMA = pa.schema([("image_id", pa.string()), ("captioner", pa.string()), ("text", pa.string())])


def _rgb(paths, background=DEFAULT_BACKGROUND):
    """The images as RGB, transparency composited onto `background` (as `extract` does)."""
    from .extract import load_rgb  # local: the command's own, so --help stays light

    return [load_rgb(p, background) for p in paths]


class Captioner:
    """Turns a batch of image files into one sentence each."""

    background = DEFAULT_BACKGROUND  # what transparent pixels become; `caption()` sets the dataset's

    def caption(self, paths: list[Path]) -> list[str]:
        raise NotImplementedError


class HFCaptioner(Captioner):
    def __init__(self, name: str, root=None, device="cpu", max_new_tokens: int = 30):
        import transformers
        from transformers import AutoProcessor

        from .models.huggingface import dtype_kwargs  # local: the command's own, so --help stays light

        local = resolve_path(name, root)
        src = str(local) if local is not None else name
        local_only = local is not None or offline()
        if local is None:  # fail at once when the hub cannot help, as extract does
            why = download_blocked(hub_endpoint())
            if why is not None and not hf_repo_cached(name):
                raise missing_weights(
                    f"hf:{name}",
                    f"the Hugging Face cache {hf_cache_dir()}",
                    None,
                    "pass a local directory written by save_pretrained as hf:DIR",
                    why,
                )
            local_only = local_only or why is not None
        try:
            self.processor = AutoProcessor.from_pretrained(src, local_files_only=local_only)
        except OSError as e:
            if local is not None:
                raise ModelLoadError(f"hf:{name}: {local} holds no processor ({e})") from None
            raise missing_weights(
                f"hf:{name}",
                f"the Hugging Face cache {hf_cache_dir()}",
                e,
                "pass a local directory written by save_pretrained as hf:DIR",
            ) from None
        last = None
        for auto in ("AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModelForCausalLM"):
            cls = getattr(transformers, auto, None)
            if cls is None:
                continue
            try:
                self.model = cls.from_pretrained(src, local_files_only=local_only, **dtype_kwargs())
                break
            except ValueError as e:  # this auto class does not cover the architecture
                last = e
            except OSError as e:
                raise missing_weights(
                    f"hf:{name}",
                    str(local or f"the Hugging Face cache {hf_cache_dir()}"),
                    e,
                    "pass a local directory written by save_pretrained",
                ) from None
        else:
            raise ModelLoadError(f"hf:{name}: not an image-to-text model ({last})")
        self.model.eval().to(device)
        self.device, self.max_new_tokens = device, max_new_tokens

    def caption(self, paths):
        import torch

        inputs = self.processor(images=_rgb(paths, self.background), return_tensors="pt")
        with torch.inference_mode():
            ids = self.model.generate(
                pixel_values=inputs["pixel_values"].to(self.device),
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
            )
        return [t.strip() for t in self.processor.batch_decode(ids, skip_special_tokens=True)]


class CocaCaptioner(Captioner):
    def __init__(self, name: str, weights=None, root=None, device="cpu", max_new_tokens: int = 30):
        import open_clip

        from .models.openclip import create  # local: the command's own, so --help stays light

        self.model, self.preprocess, arch, _ = create(name, weights, root, device)
        if not hasattr(self.model, "text_decoder"):
            raise ModelLoadError(
                f"open_clip:{name}: {arch} cannot generate text; captioning needs "
                "a CoCa model (e.g. open_clip:coca_ViT-B-32@laion2b_s13b_b90k)"
            )
        self.tokenizer = open_clip.get_tokenizer(arch)
        self.sot = getattr(self.tokenizer, "sot_token_id", 49406)
        self.eot = getattr(self.tokenizer, "eot_token_id", 49407)
        self.model.eval()
        self.device, self.max_new_tokens = device, max_new_tokens

    def _greedy(self, x):
        """Greedy decoding (CoCa.generate needs transformers classes removed in v5)."""
        import torch

        m = self.model
        ctx = int(getattr(m, "context_length", 77) or 77)
        image_latent, image_embs = m._encode_image(x)
        out = torch.full((x.shape[0], 1), self.sot, dtype=torch.long, device=x.device)
        done = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
        for _ in range(min(self.max_new_tokens, ctx - 1)):
            logits = m(
                x, out[:, -ctx:], image_latent=image_latent, image_embs=image_embs, output_labels=False
            )["logits"][:, -1]
            nxt = logits.argmax(dim=-1)
            nxt[done] = self.eot
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == self.eot
            if done.all():
                break
        return out

    def caption(self, paths):
        import torch

        x = torch.stack([self.preprocess(im) for im in _rgb(paths, self.background)]).to(self.device)
        with torch.inference_mode():
            ids = self._greedy(x)
        out = []
        for row in ids.tolist():
            row = row[1:]
            if self.eot in row:
                row = row[: row.index(self.eot)]
            out.append(self.tokenizer.decode(row).strip())
        return out


IMAGENET_TEMPLATE = "a photo of {}"  # the class name with its article (`with_article`)

# Words spelt with a vowel but said with a consonant, and the reverse (ImageNet's names among them).
_SAID_WITH_CONSONANT = ("one", "once", "uni", "use", "usu", "ute", "uro", "ure", "eu", "ewe", "ukulele")
_SAID_WITH_VOWEL = ("hour", "honest", "honor", "honour", "heir")


def with_article(noun: str) -> str:
    """`noun` after its indefinite article: "an envelope", "a unicycle", "an hourglass"."""
    word = noun.strip().lower()
    vowel = word[:1] in "aeiou" and not word.startswith(_SAID_WITH_CONSONANT)
    return ("an " if vowel or word.startswith(_SAID_WITH_VOWEL) else "a ") + noun.strip()


def imagenet_caption(name: str) -> str:
    """The caption of an image whose top-1 ImageNet class is `name` (every ImageNet captioner's)."""
    return IMAGENET_TEMPLATE.format(with_article(name))


def imagenet_class_names() -> list[str]:
    """The 1,000 ImageNet-1k class names in class-index order (the order of torchvision's and
    timm's classifiers), named as `conceptlens import imagenet` names its labels: the
    synset's first lemma, with its WordNet id where two synsets share it (timm's ImageNetInfo)."""
    from timm.data import ImageNetInfo

    from .importers.imagenet import readable_names

    info = ImageNetInfo()
    wnids = [info.index_to_label_name(i) for i in range(info.num_classes())]
    names = readable_names({w: info.index_to_description(i) for i, w in enumerate(wnids)})
    return [names[w] for w in wnids]


class ImageNetCaptioner(Captioner):
    """A weak describability baseline, not a vision-language model: each image's caption is
    "a photo of a(n) {top-1 ImageNet-1k class}" of a real classifier, loaded by model spec
    exactly as `extract` loads it (its classifier is the adapter's `head`)."""

    def __init__(self, model_spec: str, weights=None, root=None, device="cpu"):
        self.spec = f"imagenet:{model_spec}"
        self.adapter = load_adapter(model_spec, weights=weights, device=device, root=root)
        self.names = imagenet_class_names()
        if self.adapter.head is None:
            raise ModelLoadError(
                f"{self.spec}: {self.adapter.name} has no classifier weights "
                f"({'the weights file holds none' if weights is not None else 'no classifier'}); "
                "the ImageNet captioner needs an ImageNet-1k classifier"
            )
        self._check(getattr(self.adapter.head, "out_features", len(self.names)))
        self.device = device

    def _check(self, n: int) -> None:
        if n != len(self.names):
            raise ModelLoadError(
                f"{self.spec}: the classifier of {self.adapter.name} has {n} classes, not the "
                f"{len(self.names)} of ImageNet-1k; the ImageNet captioner cannot name them"
            )

    def caption(self, paths):
        import torch

        x = torch.stack([self.adapter.preprocess(im) for im in _rgb(paths, self.background)])
        with torch.inference_mode():
            logits = self.adapter.classify(x.to(self.device))
        self._check(logits.shape[1])
        return [imagenet_caption(self.names[i]) for i in logits.argmax(dim=1).tolist()]


class RetrievalCaptioner(Captioner):
    """Pick, per image, the candidate sentence nearest in a joint image-text space.

    `vl` needs `encode_text(list[str])` and `encode_images(list[Path])`, both returning
    L2-normalised float arrays, so a dot product is the cosine similarity.
    """

    def __init__(self, vl, candidates: list[str]):
        self.candidates = list(dict.fromkeys(candidates))  # unique, order kept
        if not self.candidates:
            raise WorkspaceError("retrieval captioning needs candidate captions; none were given")
        self.vl = vl
        self.text_emb = np.asarray(vl.encode_text(self.candidates), dtype=np.float32)
        if self.text_emb.shape[0] != len(self.candidates):
            raise WorkspaceError(
                f"encode_text returned {self.text_emb.shape[0]} rows for {len(self.candidates)} captions"
            )

    def caption(self, paths):
        img = np.asarray(self.vl.encode_images(list(paths)), dtype=np.float32)
        best = (img @ self.text_emb.T).argmax(axis=1)
        return [self.candidates[i] for i in best]


def train_groundtruth(ws: Workspace, dataset: str) -> list[str]:
    """Ground-truth captions of the dataset's train split: the retrieval candidates."""
    imgs = ws.read("images", columns=["image_id", "dataset", "split"])
    train = imgs.filter(pc.and_(pc.equal(imgs["dataset"], dataset), pc.equal(imgs["split"], "train")))
    if not ws.table_path("captions").exists():
        raise WorkspaceError(
            f"{ws.table_path('captions')}: not found; retrieval captioning "
            "needs the dataset's groundtruth captions"
        )
    caps = ws.read("captions")
    caps = caps.filter(
        pc.and_(
            pc.equal(caps["captioner"], "groundtruth"),
            pc.is_in(caps["image_id"], value_set=train["image_id"]),
        )
    )
    if caps.num_rows == 0:
        raise WorkspaceError(
            f"{ws.table_path('captions')}: no groundtruth captions for the train "
            f"split of dataset {dataset!r}; retrieval has nothing to choose from"
        )
    return caps["text"].to_pylist()


def load_vl(root, vl_model_id: str):
    # Imported here: conceptlens.vl is optional and heavier than this module.
    try:
        from .vl import VLModel  # local: the command's own, so --help stays light
    except ImportError as e:
        raise ModelLoadError(f"vl:{vl_model_id}: conceptlens.vl is not available ({e})") from None
    return VLModel.from_workspace(root, vl_model_id)


def load_captioner(
    spec: str, ws: Workspace, dataset: str, *, weights=None, device="cpu", max_new_tokens: int = 30
) -> Captioner:
    family, sep, name = spec.partition(":")
    if not sep or not name:
        raise ModelLoadError(
            f"captioner spec {spec!r} must be hf:NAME, open_clip:NAME, vl:ID or imagenet:MODEL_SPEC"
        )
    if family == "hf":
        if weights is not None:
            raise ModelLoadError(f"{spec}: --weights is not used for transformers models")
        return HFCaptioner(name, ws.root, device, max_new_tokens)
    if family == "open_clip":
        w = weights_file(weights, ws.root) if weights is not None else None
        return CocaCaptioner(name, w, ws.root, device, max_new_tokens)
    if family == "vl":
        return RetrievalCaptioner(load_vl(ws.root, name), train_groundtruth(ws, dataset))
    if family == "imagenet":
        return ImageNetCaptioner(name, weights, ws.root, device)
    raise ModelLoadError(
        f"captioner spec {spec!r}: unknown family {family!r}; choose from hf, open_clip, vl, imagenet"
    )


def caption(
    workspace,
    dataset: str,
    spec: str,
    *,
    batch_size: int = 16,
    device: str = "cpu",
    weights=None,
    max_new_tokens: int = 30,
    progress: bool = True,
    captioner: Captioner | None = None,
) -> int:
    """Caption every image of `dataset`; upsert rows (captioner=spec); return how many.

    `captioner` lets callers pass a ready-made Captioner (the spec is then only its name).
    """
    from tqdm import tqdm

    from .extract import dataset_images, image_path  # local: the command's own, so --help stays light

    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    ws.meta()
    if spec == "groundtruth":
        raise ValueError("captioner name 'groundtruth' is reserved for the dataset's own captions")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    images = dataset_images(ws, dataset)
    cap = captioner or load_captioner(
        spec, ws, dataset, weights=weights, device=device, max_new_tokens=max_new_tokens
    )
    cap.background = dataset_background(ws, dataset)
    ids = images["image_id"].to_pylist()
    paths = [
        image_path(ws, t, s)
        for t, s in zip(images["thumbnail"].to_pylist(), images["source_path"].to_pylist())
    ]
    texts: list[str] = []
    with tqdm(
        total=len(ids), desc=f"caption {spec}", unit="img", disable=not progress, file=sys.stderr
    ) as bar:
        for i in range(0, len(ids), batch_size):
            out = cap.caption(paths[i : i + batch_size])
            if len(out) != len(paths[i : i + batch_size]):
                raise WorkspaceError(
                    f"captioner {spec} returned {len(out)} captions for "
                    f"{len(paths[i : i + batch_size])} images"
                )
            texts += [str(t) for t in out]
            bar.update(len(out))
    table = pa.Table.from_pydict(
        {"image_id": ids, "captioner": [spec] * len(ids), "text": texts}, schema=CAPTIONS_SCHEMA
    )
    ws.upsert("captions", table, {"captioner": spec, "image_id": ids})
    return len(ids)


# ---- command line -------------------------------------------------------------------


def _run(args) -> int:
    n = caption(
        args.workspace,
        args.dataset,
        args.captioner,
        batch_size=args.batch_size,
        device=args.device,
        weights=args.weights,
        max_new_tokens=args.max_new_tokens,
        progress=not args.quiet,
    )
    print(f"captioner {args.captioner}: wrote {n} captions to {Path(args.workspace) / 'captions.parquet'}")
    return 0


def register(sub, parents) -> None:
    p = sub.add_parser(
        "caption",
        parents=parents,
        help="write one caption per image with a captioning model",
        description="Caption every image of a dataset; rows of the same captioner "
        "for these images are replaced, other captions are kept.",
    )
    p.add_argument("--dataset", required=True, help="dataset of images.parquet to caption")
    p.add_argument(
        "--captioner",
        required=True,
        metavar="SPEC",
        help="hf:Salesforce/blip-image-captioning-base, open_clip:coca_ViT-B-32@TAG, "
        "vl:<vl_model_id> (retrieval among the train split's groundtruth captions), or "
        "imagenet:MODEL_SPEC ('a photo of a(n) {top-1 ImageNet class}', e.g. "
        "imagenet:timm:tf_efficientnet_lite0 with --weights)",
    )
    p.add_argument(
        "--weights", help="local weights file (open_clip CoCa checkpoint, or the imagenet: classifier's)"
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-new-tokens", type=int, default=30, help="longest generated caption")
    p.set_defaults(func=_run)
