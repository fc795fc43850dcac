"""The one interface every model family implements, and the helpers they share."""

from __future__ import annotations

import difflib
import logging
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from ..cache import cached
from ..errors import ConceptLensError

log = logging.getLogger("conceptlens.models")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class ModelLoadError(ConceptLensError):
    """A model or its weights cannot be loaded; the message says where we looked. Not a
    `WorkspaceError`: the workspace is fine, and code that handles an unreadable workspace
    must not take a missing model for one."""


class LayerError(ModelLoadError):
    """`--layer` names no module of the model (or one that never runs for images)."""


def offline() -> bool:
    """True when the user asked the hub libraries not to touch the network."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hf_cache_dir() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.HF_HUB_CACHE)
    except Exception:  # very old huggingface_hub
        return os.path.expanduser("~/.cache/huggingface/hub")


def torch_hub_dir() -> str:
    import torch.hub

    return str(Path(torch.hub.get_dir()) / "checkpoints")


def missing_weights(
    what: str, where: str, cause: Exception | str | None, flag_hint: str = "", why: str | None = None
) -> ModelLoadError:
    """The one message, on one line, for 'weights are not here and we may not download them'."""
    mode = why or ("offline (HF_HUB_OFFLINE=1)" if offline() else "download failed")
    hint = flag_hint or "pass a local weights file with --weights PATH"
    text = str(cause or "").strip()
    because = f" Cause: {text.splitlines()[0] if text else type(cause).__name__}" if cause else ""
    return ModelLoadError(
        f"cannot load weights for {what}: not in the local cache and {mode}. Looked in {where}. "
        f"Copy the files there (e.g. from a machine with internet), or {hint}.{because}"
    )


# How long a download may wait for a server to answer before we call it unreachable.
PROBE_SECONDS = 3.0


def _reachable(url: str, timeout: float = PROBE_SECONDS) -> bool:
    """Whether the server of `url` answers at all (any HTTP status) within `timeout` seconds,
    name lookup included; remembered for the process. The hub libraries would instead retry
    for minutes (five retries of 10 s each, per file)."""
    parts = urlsplit(url)
    return _probe(f"{parts.scheme}://{parts.netloc}", timeout)


# A probe's answer is kept for the process (a server that did not answer is not asked again
# before every file of every model), a few servers at most.
@cached(reads=(), maxsize=16)
def _probe(base: str, timeout: float) -> bool:
    answered = []

    def probe():
        try:
            urllib.request.urlopen(urllib.request.Request(base + "/", method="HEAD"), timeout=timeout)
            answered.append(True)
        except urllib.error.HTTPError:  # an error status is still an answer
            answered.append(True)
        except Exception:
            pass

    t = threading.Thread(target=probe, daemon=True)  # getaddrinfo has no timeout of its own
    t.start()
    t.join(timeout)
    return bool(answered)


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def download_blocked(url: str) -> str | None:
    """Why nothing can be downloaded from `url` now (offline, or its server does not answer),
    else None: checked before a hub library would retry for minutes."""
    if offline():
        return "offline (HF_HUB_OFFLINE=1)"
    if not _reachable(url):
        return f"{urlsplit(url).netloc} cannot be reached (no network?)"
    return None


def hf_repo_cached(repo_id: str) -> bool:
    """Whether the Hugging Face cache holds any snapshot of model repository `repo_id`."""
    snaps = Path(hf_cache_dir()) / f"models--{repo_id.strip('/').replace('/', '--')}" / "snapshots"
    try:
        return any(p.is_file() for p in snaps.rglob("*"))
    except OSError:
        return False


class Adapter:
    """A vision model behind one small interface.

    `model` is the whole `nn.Module` (its `named_modules()` are the valid `--layer`
    names), `preprocess` turns one RGB PIL image into a CHW float tensor, and
    `embed(batch)` returns the default (pooled) embedding, shape (B, D).

    `head` is the classifier taken off a classification model (timm, torchvision) when its
    weights are known (pretrained, random init, or in the weights file), else None:
    `classify(batch)` = `head(embed(batch))`, the model's own logits.
    """

    family: str = ""

    def __init__(
        self, model, preprocess, preprocessing: dict, name: str, method: str = "pretrained", head=None
    ):
        self.model = model
        self.preprocess = preprocess
        self._preprocessing = dict(preprocessing)
        self.name = name  # goes to checkpoints.model
        self.method = method  # default checkpoints.method
        self.head = head
        self.model.eval()
        if head is not None:
            head.eval()

    def embed(self, batch):
        out = self.model(batch)
        return pool(out)

    def classify(self, batch):
        """Logits of the model's own classifier, shape (B, classes)."""
        if self.head is None:
            raise ModelLoadError(
                f"{self.name}: no classifier weights (the weights file has none of its own, or the "
                "model has no classifier), so it cannot classify"
            )
        return self.head(self.embed(batch))

    def describe_preprocessing(self) -> dict:
        return dict(self._preprocessing)

    def to(self, device):
        self.model.to(device)
        if self.head is not None:
            self.head.to(device)
        return self


def first_tensor(out):
    """Modules return tensors, tuples or ModelOutput objects; take the first tensor."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "to_tuple"):  # transformers ModelOutput
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        for o in out:
            t = first_tensor(o)
            if t is not None:
                return t
    return None


def pool(out):
    """Spatial/token mean so every layer gives one vector per image.

    4-D outputs are taken as (B, C, H, W) conv maps; 3-D as (B, tokens, C).
    """
    t = first_tensor(out)
    if t is None:
        raise ModelLoadError(f"model output of type {type(out).__name__} holds no tensor")
    if t.dim() == 4:
        return t.mean(dim=(2, 3))
    if t.dim() == 3:
        return t.mean(dim=1)
    if t.dim() == 2:
        return t
    return t.reshape(t.shape[0], -1)


class _Stop(Exception):
    pass


class LayerProbe:
    """Read one module's output via a forward hook, then stop the forward pass."""

    def __init__(self, adapter: Adapter, layer: str):
        modules = dict(adapter.model.named_modules())
        if layer not in modules or layer == "":
            names = [n for n in modules if n]
            close = difflib.get_close_matches(layer, names, n=5, cutoff=0.5)
            listing = close or names[:15]
            raise LayerError(
                f"--layer {layer!r} is not a module of {adapter.name}. "
                f"{'Did you mean' if close else 'Some valid names'}: {', '.join(listing)}"
                f" ({len(names)} modules in all; list them with "
                f"`dict(model.named_modules())`)"
            )
        self.adapter, self.layer, self.module = adapter, layer, modules[layer]
        self._out = None

    def _hook(self, _mod, _inp, out):
        self._out = out
        raise _Stop  # the rest of the network is not needed

    def embed(self, batch):
        self._out = None
        h = self.module.register_forward_hook(self._hook)
        try:
            self.adapter.embed(batch)
        except _Stop:
            pass
        finally:
            h.remove()
        if self._out is None:
            raise LayerError(
                f"--layer {self.layer!r} did not run when embedding images "
                f"(is it part of the image tower of {self.adapter.name}?)"
            )
        return pool(self._out)


def load_state_dict_file(path: str | os.PathLike) -> dict:
    """torch.load a weights file safely (tensors and plain containers only)."""
    import torch

    p = Path(path)
    if not p.is_file():
        raise ModelLoadError(f"--weights {str(p)!r}: file not found")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ModelLoadError(f"--weights {str(p)!r}: cannot be read by torch.load ({e})") from None
    if not isinstance(obj, dict):
        raise ModelLoadError(
            f"--weights {str(p)!r}: expected a state dict or a dict with "
            f"'state_dict', got {type(obj).__name__}"
        )
    return obj


def unwrap_state_dict(obj: dict) -> dict:
    """Accept {'state_dict': ...} / {'model': ...} wrappers and DataParallel 'module.' prefixes."""
    for k in ("state_dict", "model", "model_state_dict"):
        if k in obj and isinstance(obj[k], dict):
            obj = obj[k]
            break
    if obj and all(isinstance(k, str) and k.startswith("module.") for k in obj):
        obj = {k[len("module.") :]: v for k, v in obj.items()}
    return obj


def _shape(v) -> list[int] | None:
    return list(v.shape) if hasattr(v, "shape") else None


def _by_order(model, target: dict, state: dict, path, head: str | None) -> dict:
    """`state` renamed to the model's names when its tensors match the model's state dict
    `target` one to one in order and shape (the classifier `head` may be absent from the
    file, or for other classes: then it is left out); else ModelLoadError naming the first
    tensor that does not match."""
    ours = list(target.items())
    if head:
        body = [(k, v) for k, v in ours if not _under(k, head)]
        if len(state) == len(body) < len(ours):
            ours = body
    theirs = list(state.items())
    absent = [k for k, _ in ours if k not in state]
    what = (
        f"--weights {str(path)!r} does not fit {type(model).__name__}: by name, {len(absent)} of the "
        f"model's {len(ours)} tensors are not in the file (e.g. {absent[0]!r}); by order"
    )
    other_head = False  # the file's classifier is for other classes: left out, as by name
    for i, ((k, v), (mk, mv)) in enumerate(zip(theirs, ours)):
        if _shape(v) != _shape(mv):
            if _under(mk, head) and len(theirs) == len(ours):
                other_head = True
                continue
            raise ModelLoadError(
                f"{what}, tensor #{i} is {k!r} {_shape(v)} in the file but {mk!r} {_shape(mv)} in the model"
            )
    if len(theirs) != len(ours):
        extra = ("model", ours[len(theirs)]) if len(theirs) < len(ours) else ("file", theirs[len(ours)])
        raise ModelLoadError(
            f"{what}, the file has {len(theirs)} tensors and the model {len(ours)}: all "
            f"{min(len(theirs), len(ours))} in common match in shape, then the {extra[0]} has "
            f"{extra[1][0]!r} {_shape(extra[1][1])}"
        )
    matched = {mk: v for (_, v), (mk, _) in zip(theirs, ours) if not (other_head and _under(mk, head))}
    log.info(
        "weights: %s names its tensors differently; matched all %d by order and shape%s",
        Path(path).name,
        len(matched),
        " (its classifier, for other classes, left out)" if other_head else "",
    )
    return matched


def _under(key: str, prefix: str | None) -> bool:
    return bool(prefix) and (key == prefix or key.startswith(prefix + "."))


def load_into(model, state: dict, path, head: str | None = None) -> bool:
    """Load the state dict `state` (from the file `path`) into `model`, strictly.

    `head` names the model's classifier module: its tensors may be absent from the file, or
    of another shape (another number of classes); they are then left as they are. A file
    that names its tensors differently is accepted when its tensors match the model's one
    to one in order and shape (one log line says so), refused naming the first that does
    not. Returns whether the head's weights came from the file."""
    target = model.state_dict()
    required = [k for k in target if not _under(k, head)]
    if any(k not in state for k in required):
        state = _by_order(model, target, state, path, head)
    else:  # named like the model: a head of another shape (other classes) is left out
        state = {
            k: v for k, v in state.items() if not (_under(k, head) and _shape(v) != _shape(target.get(k)))
        }
    try:
        res = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # shape mismatches
        raise ModelLoadError(
            f"--weights {str(path)!r} does not fit {type(model).__name__}: "
            f"{str(e).strip().splitlines()[-1].strip()}"
        ) from None
    missing = [k for k in res.missing_keys if not _under(k, head)]
    if missing or res.unexpected_keys:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing key(s), e.g. {missing[:3]}")
        if res.unexpected_keys:
            parts.append(f"{len(res.unexpected_keys)} unexpected key(s), e.g. {res.unexpected_keys[:3]}")
        raise ModelLoadError(
            f"--weights {str(path)!r} does not fit {type(model).__name__}: " + "; ".join(parts)
        )
    return (
        bool(head)
        and any(_under(k, head) for k in target)
        and all(k in state for k in target if _under(k, head))
    )


def resize_transform(size: int, mean=IMAGENET_MEAN, std=IMAGENET_STD):
    """Square resize + normalise: the default for models without their own transform."""
    from torchvision import transforms as T

    return T.Compose(
        [T.Resize((size, size), antialias=True), T.ToTensor(), T.Normalize(list(mean), list(std))]
    )


def resize_description(size: int, mean=IMAGENET_MEAN, std=IMAGENET_STD, source="default") -> dict:
    return {
        "resize": [int(size), int(size)],
        "crop": None,
        "interpolation": "bilinear",
        "mean": [float(m) for m in mean],
        "std": [float(s) for s in std],
        "mode": "RGB",
        "source": source,
    }
