"""The demo's own encoders and vision-language model (demo.encoders / vl_train, conceptlens.vl)."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from conceptlens.demo import encoders as E  # noqa: E402
from conceptlens.workspace import Workspace, WorkspaceError  # noqa: E402

from .conftest import has_demo  # noqa: E402


@pytest.fixture(autouse=True)
def _threads():
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


def _toy_images(n=48, side=32, seed=0):
    """Bright squares at random places on dark noise: enough structure for a few steps."""
    g = np.random.default_rng(seed)
    x = (g.random((n, 3, side, side)) * 60).astype(np.uint8)
    for i in range(n):
        r, c = g.integers(0, side - 10, 2)
        x[i, :, r : r + 10, c : c + 10] = g.integers(120, 255, 3)[:, None, None]
    return torch.from_numpy(x)


def _sha(sd) -> str:
    h = hashlib.sha256()
    for k in sorted(sd):
        h.update(k.encode())
        h.update(sd[k].detach().contiguous().numpy().tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------- weights files
@pytest.mark.parametrize("kind", ["conv", "pca"])
def test_weights_file_roundtrip_through_plain_adapter(tmp_path, kind):
    from conceptlens.models import load_adapter

    px = _toy_images(40, 32)
    mean, std = E.channel_stats(px)
    x = E.normalise(px, mean, std)
    if kind == "conv":
        model, spec = E.random_encoder(32, seed=3, width=8, embed_dim=16), E.ENCODER_SPEC
        kwargs = {"in_size": 32, "width": 8, "embed_dim": 16}
    else:
        model, spec = E.fit_pca(x, pool=2, n_components=16), E.PCA_SPEC
        kwargs = {"in_size": 32, "pool": 2, "n_components": 16, "in_channels": 3}
    path = tmp_path / "m.pt"
    E.save_weights(path, model, kwargs, {"size": 32, "mean": mean, "std": std})
    blob = torch.load(path, weights_only=True)
    assert set(blob) == {"state_dict", "init_kwargs", "preprocess"}
    assert blob["preprocess"] == {"size": 32, "mean": mean, "std": std}
    ref = E.embed(model, x)
    assert ref.shape == (40, 16)
    # Our own loader and the plain-PyTorch adapter (the extraction path) agree.
    assert np.allclose(E.embed(E.load_weights(path), x), ref, atol=1e-5)
    ad = load_adapter(spec, weights=path)
    assert ad.describe_preprocessing()["mean"] == mean
    from PIL import Image

    im = Image.fromarray(px[0].permute(1, 2, 0).numpy())
    with torch.no_grad():
        out = ad.embed(ad.preprocess(im)[None]).numpy()
    assert np.allclose(out, ref[:1], atol=1e-4)


def test_pca_is_fitted_and_sign_fixed():
    px = _toy_images(64, 32)
    x = E.normalise(px, *E.channel_stats(px))
    p1, p2 = E.fit_pca(x, pool=2, n_components=8), E.fit_pca(x.clone(), pool=2, n_components=8)
    assert torch.equal(p1.components, p2.components)
    c = p1.components
    assert torch.allclose(c @ c.T, torch.eye(8), atol=1e-4)  # orthonormal rows
    z = E.embed(p1, x)
    assert np.all(np.diff(z.var(0)) <= 1e-4)  # variance in decreasing order


# ---------------------------------------------------------------- determinism
@pytest.mark.parametrize("method", ["simclr", "simsiam", "autoencoder", "vae", "rotation", "supervised"])
def test_training_is_deterministic(method):
    E.set_determinism()
    try:
        px = _toy_images(48, 32)
        mean, std = E.channel_stats(px)
        x = E.normalise(px, mean, std)

        def run(seed):
            kw = dict(seed=seed, epochs=(1, 2), width=8, embed_dim=16, progress=False)
            if method in ("simclr", "simsiam"):
                train = E.train_simclr if method == "simclr" else E.train_simsiam
                snaps = train(px.float() / 255, mean, std, batch_size=16, **kw)
            elif method in ("autoencoder", "vae", "rotation"):
                train = {
                    "autoencoder": E.train_autoencoder,
                    "vae": E.train_vae,
                    "rotation": E.train_rotation,
                }[method]
                snaps = train(x, batch_size=16, **kw)
            else:
                y = torch.arange(48) % 3
                snaps = E.train_supervised(x, {"k": y}, batch_size=16, **kw)
            assert [s.epoch for s in snaps] == [1, 2]
            return [_sha(s.model.state_dict()) for s in snaps]

        a, b, c = run(5), run(5), run(6)
        assert a == b
        assert a != c
        assert a[0] != a[1]  # epoch 2 differs from epoch 1
    finally:
        torch.use_deterministic_algorithms(False)


def test_demo_population_for_lu2022():
    """At least 20 trained self-supervised shapes checkpoints (methods x epochs x seeds)."""
    from conceptlens.demo.models import RUNS

    ids = [c for r in RUNS for c in r.checkpoint_ids()]
    assert len(ids) == len(set(ids))
    ssl = {"simclr", "simsiam", "autoencoder", "vae", "rotation"}
    shapes = [r for r in RUNS if r.dataset == "shapes" and r.method in ssl]
    assert sum(len(r.checkpoint_ids()) for r in shapes) >= 20
    assert {r.method for r in shapes} == ssl


def test_stable_seed_is_stable():
    assert E.stable_seed(0, "shapes-simclr") == E.stable_seed(0, "shapes-simclr")
    assert E.stable_seed(0, "shapes-simclr") != E.stable_seed(1, "shapes-simclr")
    assert E.stable_seed(0, "a") != E.stable_seed(0, "b")


# ---------------------------------------------------------------- VL model API
def _tiny_vl(tmp_path, epochs=1):
    from conceptlens.demo import vl_train as V
    from conceptlens.vl import tiny_config

    cfg = tiny_config(image_size=32, patch_size=8, vision_layers=1, text_layers=1, context_length=16)
    px = _toy_images(32, 32)
    caps = [f"a {'bright' if i % 2 else 'dim'} square" for i in range(32)]
    m = V.train_clip(px, caps, cfg, seed=0, epochs=epochs, batch_size=16, progress=False)
    V.save_clip(m, cfg, tmp_path / "v.json", tmp_path / "v.pt")
    return m, cfg, px


def test_vl_files_load_with_open_clip_and_encode(tmp_path):
    import open_clip

    from conceptlens.vl import VLModel

    m, cfg, px = _tiny_vl(tmp_path)
    vl = VLModel.from_files(tmp_path / "v.json", tmp_path / "v.pt")
    t = vl.encode_text(["a red star", "a bright square", "x"])
    assert t.dtype == np.float32 and t.shape == (3, 64)
    assert np.allclose(np.linalg.norm(t, axis=1), 1, atol=1e-5)
    from PIL import Image

    paths = []
    for i in range(3):
        p = tmp_path / f"{i}.png"
        Image.fromarray(px[i].permute(1, 2, 0).numpy()).save(p)
        paths.append(p)
    e = vl.encode_images(paths, batch_size=2)
    assert e.dtype == np.float32 and e.shape == (3, 64)
    assert np.allclose(np.linalg.norm(e, axis=1), 1, atol=1e-5)
    # The files are an ordinary open_clip config + checkpoint (what the open_clip adapter loads).
    open_clip.add_model_config(tmp_path / "v.json")
    oc = open_clip.create_model("v", pretrained=str(tmp_path / "v.pt"))
    with torch.no_grad():
        ref = torch.nn.functional.normalize(oc.encode_text(vl.tokenizer(["a red star"])), dim=-1)
    assert np.allclose(ref.numpy(), t[:1], atol=1e-4)
    assert json.loads((tmp_path / "v.json").read_text())["embed_dim"] == 64


def test_retrieve_captions_picks_the_most_similar(tmp_path):
    from conceptlens.vl import retrieve_captions

    class Fake:
        def encode_text(self, texts, batch_size=256):
            return np.eye(3, dtype=np.float32)[[int(t[-1]) for t in texts]]

        def encode_images(self, paths, batch_size=256):
            return np.eye(3, dtype=np.float32)[[int(str(p)[-1]) for p in paths]]

    got = retrieve_captions(Fake(), ["i2", "i0", "i1", "i0"], ["t0", "t1", "t2", "t1"], batch_size=2)
    assert got == ["t2", "t0", "t1", "t0"]
    with pytest.raises(ValueError):
        retrieve_captions(Fake(), ["i0"], [])


def test_from_workspace_errors(tmp_path):
    from conceptlens.vl import VLModel

    Workspace.create(tmp_path / "ws", name="t")
    with pytest.raises(WorkspaceError, match="vl_models"):
        VLModel.from_workspace(tmp_path / "ws", "shapes")


def test_drop_words_keeps_order_and_article():
    from conceptlens.demo.vl_train import drop_words

    g = np.random.default_rng(0)
    text = "a large yellow checkered square on a sand background, on the right"
    for _ in range(50):
        d = drop_words(text, g).split()
        assert d[0] == "a" and len(d) >= 2
        words = text.replace(",", "").split()
        it = iter(words[1:])
        assert all(w in it for w in d[1:])  # a subsequence


# ---------------------------------------------------------------- the models stage, small
@pytest.mark.slow
def test_build_encoders_extracts_and_resumes(tmp_path):
    from conceptlens.demo.build import build_data
    from conceptlens.demo.models import Run, build_encoders, checkpoint_done

    ws = build_data(tmp_path / "ws", seed=0, n_shapes=120, progress=False)
    runs = (
        Run("shapes", "supervised", (1,), tag="shape-size", options={"factors": ("shape", "size")}),
        Run("shapes", "pca", options={"pool": 4}),
        Run("digits", "random"),
    )
    E.set_determinism()
    try:
        ids = build_encoders(ws, seed=0, runs=runs, progress=False)
    finally:
        torch.use_deterministic_algorithms(False)
    assert ids == ["shapes-supervised-shape-size-e01", "shapes-pca", "digits-random"]
    ck = {r["checkpoint_id"]: r for r in ws.read("checkpoints").to_pylist()}
    for cid in ids:
        assert checkpoint_done(ws, cid)
        assert ck[cid]["weights"] == f"models/{cid}.pt"
        assert ck[cid]["feature_dim"] == 64
        f = ws.read("features", checkpoint_id=cid)
        n = 120 if cid.startswith("shapes") else 1797
        assert f.num_rows == n
    assert ck["shapes-pca"]["method"] == "pca" and ck["shapes-pca"]["epoch"] is None
    assert ck["shapes-supervised-shape-size-e01"]["epoch"] == 1
    assert ck["digits-random"]["source"] == E.ENCODER_SPEC
    from conceptlens.validate import validate

    assert validate(ws.root) == []
    # A rerun changes nothing (resumable, hash-checked).
    mtimes = {p: p.stat().st_mtime_ns for p in (ws.root / "models").iterdir()}
    build_encoders(ws, seed=0, runs=runs, progress=False)
    assert mtimes == {p: p.stat().st_mtime_ns for p in (ws.root / "models").iterdir()}


# ---------------------------------------------------------------- the trained demo VL model
def _demo_vl_workspace(request, tmp_path_factory):
    """The demo (its committed copy, `demo_ws`) when its models stage has run (or
    $CONCEPTLENS_DEMO_WS); else a fresh build (slow)."""
    from pathlib import Path

    demo = request.getfixturevalue("demo_ws") if has_demo() else None
    for root in (os.environ.get("CONCEPTLENS_DEMO_WS"), demo):
        if root and (Path(root) / "vl_models.parquet").exists():
            return Path(root)
    from conceptlens.demo.build import build_data
    from conceptlens.demo.models import build_vl

    root = tmp_path_factory.mktemp("demo_vl")
    ws = build_data(root, seed=0, progress=False)
    build_vl(ws, "shapes", seed=0, progress=False)
    return root


@pytest.mark.slow
def test_demo_vl_zero_shot_beats_chance(request, tmp_path_factory):
    from conceptlens.demo.shapes import COLORS, SHAPES
    from conceptlens.vl import VLModel

    root = _demo_vl_workspace(request, tmp_path_factory)
    ws = Workspace(root)
    vl = VLModel.from_workspace(root, "shapes")
    imgs = ws.read("images").to_pandas()
    test = imgs[(imgs.dataset == "shapes") & (imgs.split == "test")].sort_values("image_id")
    emb = vl.encode_images([ws.resolve(p) for p in test.thumbnail])
    colors = vl.classify(emb, {c: [f"a {c} shape"] for c in COLORS})
    shapes = vl.classify(emb, {s: [f"a {s}"] for s in SHAPES})
    sizes = vl.classify(emb, {z: [f"a {z} shape"] for z in ("small", "medium", "large")})
    acc_c = float(np.mean(np.array(colors) == test["color"].to_numpy()))
    acc_s = float(np.mean(np.array(shapes) == test["shape"].to_numpy()))
    acc_z = float(np.mean(np.array(sizes) == test["size"].to_numpy()))
    print(
        f"zero-shot on {len(test)} test images: colour {acc_c:.3f} (chance 0.167), "
        f"shape {acc_s:.3f} (chance 0.200), size {acc_z:.3f} (chance 0.333)"
    )
    # Measured on the seed-0 build (100 epochs): see docs/demo.md. Chance: 0.167, 0.333, 0.2.
    assert acc_c > 0.8
    assert acc_z > 0.6
    assert acc_s > 0.5  # shape is the hardest factor for this tiny model
    # Retrieval captions are written for every image, from train-split ground truth only.
    caps = ws.read("captions").to_pandas()
    vlc = caps[caps.captioner == f"vl:{vl.vl_model_id}"]
    assert set(vlc.image_id) == set(imgs.loc[imgs.dataset == "shapes", "image_id"])
    gt = caps[caps.captioner == "groundtruth"].merge(imgs[["image_id", "split"]], on="image_id")
    assert set(vlc.text) <= set(gt.loc[gt.split == "train", "text"])
