"""Model adapters (conceptlens.models) on tiny random-weight models: no downloads."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from conceptlens.models import LayerProbe, ModelLoadError, load_adapter, parse_spec
from conceptlens.models.base import LayerError, pool
from tests.tiny_models import TinyConv, save_torch_weights, tiny_open_clip_config

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _img(size=64):
    return Image.new("RGB", (size, size), (120, 30, 200))


def _embed(adapter, n=2, layer=None):
    x = torch.stack([adapter.preprocess(_img()) for _ in range(n)])
    with torch.inference_mode():
        return (LayerProbe(adapter, layer) if layer else adapter).embed(x)


def test_parse_spec():
    assert parse_spec("torch:a.b:C") == ("torch", "a.b:C")
    assert parse_spec("open_clip:ViT-B-32@openai") == ("open_clip", "ViT-B-32@openai")
    for bad in ("resnet50", "keras:foo", "timm:"):
        with pytest.raises(ModelLoadError):
            parse_spec(bad)


def test_pool_shapes():
    assert pool(torch.ones(2, 5, 3, 3)).shape == (2, 5)  # conv map: spatial mean
    assert pool(torch.ones(2, 7, 4)).shape == (2, 4)  # tokens: mean over tokens
    assert pool((torch.ones(2, 6), "x")).shape == (2, 6)  # tuple outputs: first tensor


def test_plain_torch_with_convention(tmp_path):
    w = save_torch_weights(
        tmp_path / "enc.pt",
        TinyConv(width=4, dim=5),
        {"width": 4, "dim": 5},
        {"size": 32, "mean": [0.5] * 3, "std": [0.25] * 3},
    )
    a = load_adapter("torch:tests.tiny_models:TinyConv", weights=w)
    assert a.preprocess(_img()).shape == (3, 32, 32)
    assert _embed(a).shape == (2, 5)
    d = a.describe_preprocessing()
    assert d["resize"] == [32, 32] and d["std"] == [0.25] * 3 and a.method == "custom"
    assert _embed(a, layer="features.0").shape == (2, 4)


def test_plain_torch_plain_state_dict_defaults(tmp_path):
    torch.save(TinyConv().state_dict(), tmp_path / "sd.pt")
    a = load_adapter("torch:tests.tiny_models:TinyConv", weights=tmp_path / "sd.pt")
    assert a.preprocess(_img()).shape == (3, 224, 224)  # default 224 + ImageNet stats
    assert a.describe_preprocessing()["mean"] == [0.485, 0.456, 0.406]
    assert _embed(a).shape == (2, 12)


def test_plain_torch_token_output_is_mean_pooled():
    a = load_adapter("torch:tests.tiny_models:TinyTokens")
    assert a.method == "random" and _embed(a).shape == (2, 6)


def test_plain_torch_weights_mismatch(tmp_path):
    torch.save({"state_dict": TinyConv(width=4).state_dict()}, tmp_path / "w.pt")
    with pytest.raises(ModelLoadError, match="does not fit"):
        load_adapter("torch:tests.tiny_models:TinyConv", weights=tmp_path / "w.pt")


def test_bad_layer_lists_names():
    a = load_adapter("torch:tests.tiny_models:TinyConv")
    with pytest.raises(LayerError) as e:
        LayerProbe(a, "feature.0")
    assert "features.0" in str(e.value)
    with pytest.raises(LayerError, match="valid names"):
        LayerProbe(a, "zzzzzz")


def test_open_clip_config_file(tmp_path):
    cfg = tiny_open_clip_config(tmp_path / "tiny_clip.json")
    a = load_adapter(f"open_clip:{cfg}")
    assert a.name == "tiny_clip" and a.method == "random"
    assert _embed(a).shape == (2, 16)
    assert a.describe_preprocessing()["size"] == [32, 32]
    assert _embed(a, layer="visual.transformer.resblocks.1").shape == (2, 32)
    # a local checkpoint of the same architecture: open_clip:ARCH + --weights
    torch.save(a.model.state_dict(), tmp_path / "ck.pt")
    b = load_adapter("open_clip:tiny_clip", weights=tmp_path / "ck.pt")
    assert b.method == "custom"
    assert torch.allclose(_embed(a), _embed(b), atol=1e-5)
    with pytest.raises(LayerError, match="did not run"):
        _embed(a, layer="transformer.resblocks.0")  # text tower: not used for images


@pytest.mark.parametrize("name,dim", [("vit", 32), ("dinov2", 32), ("clip", 16), ("resnet", 16)])
def test_hf_local_dirs(hf_models, name, dim):  # noqa: F811
    a = load_adapter(f"hf:{hf_models / name}")
    assert _embed(a).shape == (2, dim)


def test_hf_layer(hf_models):  # noqa: F811
    a = load_adapter(f"hf:{hf_models / 'vit'}")
    # transformers v5 calls the blocks `layers.N`, v4 `encoder.layer.N`
    name = next(n for n, _ in a.model.named_modules() if n.endswith(("layers.0", "layer.0")))
    assert _embed(a, layer=name).shape == (2, 32)


def test_timm_with_weights(tmp_path):
    import timm

    m = timm.create_model("test_resnet", pretrained=False)
    torch.save(m.state_dict(), tmp_path / "t.pt")  # includes the classifier: ignored
    a = load_adapter("timm:test_resnet", weights=tmp_path / "t.pt")
    assert a.describe_preprocessing()["source"] == "timm"
    assert _embed(a).shape == (2, m.num_features)


def test_torchvision_with_weights(tmp_path):
    from torchvision import models

    m = models.get_model("mobilenet_v3_small", weights=None)
    torch.save(m.state_dict(), tmp_path / "mv.pt")
    a = load_adapter("torchvision:mobilenet_v3_small", weights=tmp_path / "mv.pt")
    assert _embed(a).shape == (2, 1024)  # last Linear (classifier.3) replaced by Identity


@pytest.mark.parametrize(
    "spec", ["hf:facebook/dinov2-small", "open_clip:ViT-B-32@openai", "timm:resnet18", "torchvision:resnet18"]
)
def test_missing_weights_offline_fail_fast(monkeypatch, tmp_path, spec):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))  # nothing cached
    monkeypatch.setattr(torch.hub, "_hub_dir", str(tmp_path / "torch"))
    import open_clip  # noqa: F401  (their imports take seconds on a busy machine: not the failure's time)
    import timm  # noqa: F401

    t = time.time()
    with pytest.raises(ModelLoadError) as e:
        load_adapter(spec)
    assert time.time() - t < 5
    msg = str(e.value)
    assert "not in the local cache and offline" in msg and "Looked in" in msg and "--weights" in msg
    assert "\n" not in msg


def test_augment_is_seeded_in_range_and_the_identity_without_its_random_parts():
    from conceptlens.models.augment import augment

    x = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    a = augment(x, torch.Generator().manual_seed(7))
    assert a.shape == x.shape and 0 <= a.min() and a.max() <= 1
    assert torch.equal(a, augment(x, torch.Generator().manual_seed(7)))  # the seed fixes the views
    assert not torch.allclose(a, augment(x, torch.Generator().manual_seed(8)))
    # A crop of the whole image, no flip, no jitter, no grey: the image itself.
    same = augment(x, torch.Generator().manual_seed(7), flip=False, min_scale=1.0, color=0.0, gray_p=0.0)
    torch.testing.assert_close(same, x, atol=1e-5, rtol=0)
    # Greyscale always: the three channels are their mean.
    grey = augment(x, torch.Generator().manual_seed(7), min_scale=1.0, flip=False, color=0.0, gray_p=1.0)
    torch.testing.assert_close(grey, x.mean(dim=1, keepdim=True).expand_as(x), atol=1e-5, rtol=0)
    # A horizontal flip of a full-area crop mirrors the columns.
    g = torch.Generator().manual_seed(3)
    flips = [augment(x[:1], g, min_scale=1.0, color=0.0, gray_p=0.0) for _ in range(8)]
    assert any(torch.allclose(f, x[:1].flip(-1), atol=1e-5) for f in flips)
    assert all(
        torch.allclose(f, x[:1], atol=1e-5) or torch.allclose(f, x[:1].flip(-1), atol=1e-5) for f in flips
    )


SILENT_HUB = """
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)  # connections complete, but nobody ever answers
print(s.getsockname()[1], flush=True)
time.sleep(600)
"""

LOAD = """
import sys, time
import open_clip, timm, transformers  # imported before the clock starts
from conceptlens.models import ModelLoadError, load_adapter
t = time.perf_counter()
try:
    load_adapter(sys.argv[1])
    print("loaded")
except ModelLoadError as e:
    print(f"{time.perf_counter() - t:.2f}")
    print(e)
"""


@pytest.mark.parametrize("spec", ["hf:facebook/dinov2-small", "timm:resnet18", "open_clip:ViT-B-32@openai"])
def test_an_unreachable_hub_fails_at_once_with_one_line(tmp_path, spec):
    """No HF_HUB_OFFLINE, but the hub does not answer (a server that never replies stands in
    for a machine without network): one line within 5 s, not minutes of retries."""
    import subprocess
    import sys

    hub = subprocess.Popen([sys.executable, "-c", SILENT_HUB], stdout=subprocess.PIPE, text=True)
    try:
        port = hub.stdout.readline().strip()
        env = {
            **os.environ,
            "HF_ENDPOINT": f"http://127.0.0.1:{port}",
            "HF_HUB_CACHE": str(tmp_path / "hf"),
            "TORCH_HOME": str(tmp_path / "torch"),
            "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH", "")]
            ),
        }
        for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME"):
            env.pop(k, None)
        out = subprocess.run(
            [sys.executable, "-c", LOAD, spec], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        hub.kill()
        hub.wait()
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, out.stdout + out.stderr
    assert float(lines[0]) < 5, lines
    assert "not in the local cache and 127.0.0.1" in lines[1] and "cannot be reached" in lines[1], lines[1]
    assert "--weights" in lines[1]
