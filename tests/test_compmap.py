"""CompMap (yun2023): activations against a direct computation on a tiny open_clip model,
interventions and Delta on a hand-built case, the top-k weight accuracies on a hand-built
weight matrix, the CUB and MIT-States importers on fixtures in the release formats, the
analysis end to end (a VL model whose primitives are right by construction), and the page."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from conceptlens.cli import main
from conceptlens.importers.images import ImportInputError
from conceptlens.metrics import compmap as M
from conceptlens.validate import format_problems, validate
from conceptlens.workspace import Workspace

# ---- metrics ---------------------------------------------------------------------------------


def test_prompt_logits_and_group_softmax():
    rng = np.random.default_rng(0)
    img, txt = rng.standard_normal((4, 6)), rng.standard_normal((5, 6))
    z = M.prompt_logits(img, txt)
    for i in range(4):
        for j in range(5):
            cos = img[i] @ txt[j] / (np.linalg.norm(img[i]) * np.linalg.norm(txt[j]))
            assert z[i, j] == pytest.approx(100 * cos)
    groups = np.array(["a", "b", "a", "b", "c"], dtype=object)
    act = M.activations(z, groups, np.array(["softmax", "softmax", "softmax", "softmax", "raw"]))
    from scipy.special import softmax

    assert np.allclose(act[:, [0, 2]], softmax(z[:, [0, 2]], axis=1))
    assert np.allclose(act[:, [1, 3]], softmax(z[:, [1, 3]], axis=1))
    assert np.array_equal(act[:, 4], z[:, 4])
    with pytest.raises(ValueError, match="group 'a' mixes"):
        M.activations(z, groups, np.array(["softmax", "softmax", "raw", "softmax", "raw"]))
    with pytest.raises(ValueError, match="text_emb has a zero row"):
        M.prompt_logits(img, np.zeros((1, 6)))


def test_topk_weight_accuracy_hand_built():
    truth = np.array(
        [
            [1, 1, 0, 0, 0, 0],  # k = 2, top-2 = {0, 2}: 1 hit
            [0, 0, 1, 1, 1, 0],  # k = 3, top-3 = {2, 3, 4}: exact
            [0, 0, 0, 0, 0, 1],  # k = 1, top-1 = {0}: miss
            [0, 0, 0, 0, 0, 0],
        ]
    )  # no ground truth: left out
    W = np.array(
        [
            [3.0, 1.0, 2.0, 0.0, -1.0, 0.5],
            [0.1, 0.2, 2.0, 1.5, 1.0, 0.3],
            [1.0, 0.0, 0.0, 0.0, 0.0, 0.9],
            [9.0, 9.0, 9.0, 9.0, 9.0, 9.0],
        ]
    )
    inst, cls, n_inst, n_cls = M.topk_weight_accuracy(W, truth)
    assert (inst, cls, n_inst, n_cls) == (pytest.approx(4 / 6), pytest.approx(1 / 3), 6, 3)
    # Ties go to the earlier column: [2, 2, 0] with truth {1} -> top-1 is column 0.
    assert M.topk_weight_accuracy([[2.0, 2.0, 0.0]], [[0, 1, 0]])[:2] == (0.0, 0.0)
    assert math.isnan(M.topk_weight_accuracy([[1.0, 2.0]], [[0, 0]])[0])


def test_class_weights_of_two_classes_are_symmetric():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = (X[:, 0] > 0).astype(int)
    classes, W = M.class_weights(M.fit_composition(X, y))
    assert list(classes) == [0, 1] and W.shape == (2, 3)
    assert np.allclose(W[0], -W[1]) and W[1, 0] > 0


def test_interventions_and_delta_hand_built():
    """Two classes, each defined by one primitive (p0, p1); the VL model gets those wrong
    (always 0.5) but sees a spurious background (p2) that separates the classes. The
    learned model leans on p2 only: right on activations, at chance when fed the ground
    truth (Interv(Full): p2 = 0 for both classes), right again when only the positives are
    set (Interv(Partial) keeps p2). The oracle is perfect, so Delta = 1 - 0.5."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 20)
    X = np.column_stack(
        [np.full(40, 0.5), np.full(40, 0.5), np.where(y == 0, 0.9, 0.1) + rng.uniform(-0.05, 0.05, 40)]
    )
    truth = {0: np.array([1.0, 0, 0]), 1: np.array([0, 1.0, 0])}
    G = np.stack([truth[c] for c in y])
    P = M.intervene_partial(X, G)
    assert P[0].tolist() == [1.0, 0.5, X[0, 2]] and P[-1].tolist() == [0.5, 1.0, X[-1, 2]]
    tr = np.arange(40) % 2 == 0
    correct, weights, models = M.score_models(X[tr], G[tr], y[tr], X[~tr], G[~tr], y[~tr], truth.get)
    acc = {m: c.mean() for m, c in correct.items()}
    assert acc == {"prim": 1.0, "interv_full": 0.5, "interv_partial": 1.0, "oracle": 1.0}
    assert acc["oracle"] - acc["interv_full"] == 0.5  # Delta
    # The learned model's top weight is the background, never the class's own primitive.
    assert weights["prim"][:2] == (0.0, 0.0) and weights["oracle"][:2] == (1.0, 1.0)


def test_episodes_are_disjoint_seeded_and_checked():
    y = np.repeat(np.arange(6), 10)
    eps = M.sample_episodes(y, ways=4, shots=2, queries=3, n_episodes=20, seed=1)
    assert eps[0].classes.tolist() == M.sample_episodes(y, 4, 2, 3, 20, 1)[0].classes.tolist()
    for e in eps:
        assert len(e.classes) == 4 and len(e.support) == 8 and len(e.query) == 12
        assert not set(e.support) & set(e.query)
        assert set(y[e.support]) == set(y[e.query]) == set(e.classes)
        assert all((y[e.support] == c).sum() == 2 for c in e.classes)
    with pytest.raises(ValueError, match="need 7 classes"):
        M.sample_episodes(y, 7, 2, 3, 1)
    with pytest.raises(ValueError, match="shots must be"):
        M.sample_episodes(y, 2, 0, 3, 1)


def test_intervals_against_their_definitions():
    from scipy import stats

    v = np.array([0.2, 0.4, 0.9, 0.5, 0.6])
    m, lo, hi = M.mean_interval(v, (0, 1))
    half = stats.norm.ppf(0.975) * stats.sem(v)
    assert (m, lo, hi) == (pytest.approx(0.52), pytest.approx(0.52 - half), pytest.approx(0.52 + half))
    assert M.mean_interval([0.99, 1.0, 1.0], (0, 1))[2] == 1.0  # clipped to the range
    # Wilson: the p solving (p_hat - p)^2 = z^2 p (1 - p) / n, a quadratic in p.
    for k, n in ((8, 10), (0, 7), (30, 30)):
        z2 = stats.norm.ppf(0.975) ** 2
        roots = np.sort(np.roots([1 + z2 / n, -(2 * k / n + z2 / n), (k / n) ** 2]).real)
        p, lo, hi = M.wilson(k, n)
        assert p == k / n and lo == pytest.approx(max(0, roots[0]), abs=1e-9)
        assert hi == pytest.approx(min(1, roots[1]), abs=1e-9)


# ---- activations on a tiny open_clip model ---------------------------------------------------
def _tiny_vl(ws: Workspace, tmp_path, dataset: str = "shapes") -> None:
    """A tiny open_clip CLIP (random weights) from tests.tiny_models' config, shipped in `ws`."""
    import pyarrow as pa
    import torch

    from conceptlens import schema
    from conceptlens.vl import build_clip
    from tests.tiny_models import tiny_open_clip_config

    cfg = json.loads(tiny_open_clip_config(tmp_path / "tiny.json").read_text())
    # VLModel tokenizes with open_clip's SimpleTokenizer, whose ids go up to 49407.
    cfg["text_cfg"]["vocab_size"] = 49408
    (ws.root / "models").mkdir(exist_ok=True)
    (ws.root / "models" / "vl-tiny.json").write_text(json.dumps(cfg))
    torch.manual_seed(0)
    torch.save(build_clip(cfg).state_dict(), ws.root / "models" / "vl-tiny.pt")
    ws.write(
        "vl_models",
        pa.Table.from_pylist(
            [
                {
                    "vl_model_id": "vl-tiny",
                    "dataset": dataset,
                    "spec": "open_clip:vl-tiny",
                    "config": "models/vl-tiny.json",
                    "weights": "models/vl-tiny.pt",
                    "weights_sha256": None,
                }
            ],
            schema=schema.arrow_schema("vl_models"),
        ),
    )


def _with_primitives(ws: Workspace) -> pd.DataFrame:
    from conceptlens.demo import compmap as dc

    rows = ws.read("images").to_pandas()
    dc.write(ws, rows.to_dict("records"))
    return rows


def test_activations_match_a_direct_open_clip_computation(ws, tmp_path):
    import open_clip
    import torch

    from conceptlens.analysis import runner
    from conceptlens.vl import OPENAI_MEAN, OPENAI_STD

    w = Workspace(ws)
    _tiny_vl(w, tmp_path)
    images = _with_primitives(w)
    runner.run(ws, "compmap", {"episodes": 3, "ways": [2], "shots": [1], "queries": 1}, progress_bars=False)
    got = w.read("compmap_activations", vl_model="vl-tiny").to_pandas()
    prims = w.read("primitives", dataset="shapes").to_pandas().sort_values("position")

    # Directly: open_clip's own model, transform and tokenizer; torch's softmax per group.
    cfg = json.loads((ws / "models" / "vl-tiny.json").read_text())
    model = open_clip.model.CLIP(**cfg)
    model.load_state_dict(torch.load(ws / "models" / "vl-tiny.pt"))
    model.eval()
    tf = open_clip.image_transform(
        cfg["vision_cfg"]["image_size"], is_train=False, mean=OPENAI_MEAN, std=OPENAI_STD
    )
    tok = open_clip.tokenizer.SimpleTokenizer(context_length=cfg["text_cfg"]["context_length"])
    images = images.sort_values("image_id")
    with torch.no_grad():
        x = torch.stack([tf(Image.open(ws / p).convert("RGB")) for p in images["thumbnail"]])
        i = torch.nn.functional.normalize(model.encode_image(x), dim=-1)
        t = torch.nn.functional.normalize(model.encode_text(tok(list(prims["prompt"]))), dim=-1)
        logits = 100 * i @ t.T
        act = logits.clone()
        for g in prims["group"].unique():
            cols = np.flatnonzero(prims["group"].to_numpy() == g)
            act[:, cols] = torch.softmax(logits[:, cols], dim=1)
    want = pd.DataFrame(
        {
            "image_id": np.repeat(images["image_id"].to_numpy(), len(prims)),
            "primitive": np.tile(prims["primitive"].to_numpy(), len(images)),
            "logit_direct": logits.numpy().ravel(),
            "act_direct": act.numpy().ravel(),
        }
    )
    both = got.merge(want, on=["image_id", "primitive"])
    assert len(both) == len(got) == len(images) * len(prims) == 40 * 22
    assert np.allclose(both["logit"], both["logit_direct"], atol=2e-3)
    assert np.allclose(both["activation"], both["act_direct"], atol=1e-4)
    # Each group's activations are a distribution over its values.
    sums = both.merge(prims[["primitive", "group"]]).groupby(["image_id", "group"])["activation"].sum()
    assert np.allclose(sums, 1.0)
    assert validate(ws) == [], format_problems(validate(ws))


def test_open_clip_spec_gives_the_same_activations(ws, tmp_path):
    """`open_clip:CONFIG.json` with the row's weights file (open_clip's own preprocessing and
    tokenizer) scores like the shipped-model path (`vl.VLModel`)."""
    from conceptlens.analysis import runner  # noqa: F401  (first: the analyses import it)
    from conceptlens.analysis.common import Context
    from conceptlens.analysis.compmap import compute_activations, load_vl

    w = Workspace(ws)
    _tiny_vl(w, tmp_path)
    images = _with_primitives(w).sort_values("image_id").head(8)
    prims = w.read("primitives", dataset="shapes").to_pandas().sort_values("position")
    row = w.read("vl_models").to_pylist()[0]
    ctx = Context(w, progress=False)
    shipped, _ = compute_activations(ctx, load_vl(w, row), images, prims)
    by_spec, _ = compute_activations(
        ctx, load_vl(w, {**row, "spec": "open_clip:models/vl-tiny.json", "config": None}), images, prims
    )
    assert np.allclose(shipped, by_spec, atol=1e-3)


def _tiny_hf_clip(folder):
    """A tiny transformers CLIP (random weights) with a tokenizer built from open_clip's own BPE
    vocabulary (shipped in the package: nothing is downloaded), saved with save_pretrained."""
    import transformers as T
    from open_clip.tokenizer import SimpleTokenizer

    st = SimpleTokenizer()
    names = {"<start_of_text>": "<|startoftext|>", "<end_of_text>": "<|endoftext|>"}
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text(json.dumps({names.get(k, k): v for k, v in st.encoder.items()}))
    merges = sorted(st.bpe_ranks, key=st.bpe_ranks.get)
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
    tok = T.CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    vit = dict(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        image_size=32,
        patch_size=8,
    )
    T.CLIPModel(
        T.CLIPConfig(
            vision_config=vit,
            projection_dim=16,
            text_config=dict(
                hidden_size=32,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=37,
                vocab_size=49408,
            ),
        )
    ).save_pretrained(folder)
    T.CLIPProcessor(
        image_processor=T.CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=tok,
    ).save_pretrained(folder)


@pytest.mark.slow
def test_activations_of_a_hugging_face_clip(ws):
    """`hf:DIR` VL models: the activations equal what CLIPModel's own forward pass gives."""
    import pyarrow as pa
    import torch
    import transformers as T

    from conceptlens import schema
    from conceptlens.analysis import runner  # noqa: F401  (first: the analyses import it)
    from conceptlens.analysis.common import Context
    from conceptlens.analysis.compmap import compute_activations, load_vl

    w = Workspace(ws)
    torch.manual_seed(0)
    _tiny_hf_clip(ws / "models" / "hf-clip")
    w.write(
        "vl_models",
        pa.Table.from_pylist(
            [
                {
                    "vl_model_id": "hf-clip",
                    "dataset": "shapes",
                    "spec": "hf:models/hf-clip",
                    "config": None,
                    "weights": None,
                    "weights_sha256": None,
                }
            ],
            schema=schema.arrow_schema("vl_models"),
        ),
    )
    images = _with_primitives(w).sort_values("image_id").head(6)
    prims = w.read("primitives", dataset="shapes").to_pandas().sort_values("position")
    model = load_vl(w, w.read("vl_models").to_pylist()[0])
    logits, _ = compute_activations(Context(w, progress=False), model, images, prims)
    m = T.AutoModel.from_pretrained(ws / "models" / "hf-clip")
    proc = T.AutoProcessor.from_pretrained(ws / "models" / "hf-clip")
    x = proc(
        text=list(prims["prompt"]),
        images=[Image.open(ws / p).convert("RGB") for p in images["thumbnail"]],
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        out = m(**x)
    assert np.allclose(logits, 100 * (out.image_embeds @ out.text_embeds.T).numpy(), atol=1e-3)


# ---- the analysis end to end -------------------------------------------------------------------
class PerfectVL:
    """Embeds an image as the indicator of its colour and shape, a prompt as its primitive's
    indicator: the colour and shape activations are the truth (softmax of 70.7 vs 0) and the
    other groups are uniform, so the learned model sees what the oracle sees, by construction."""

    def __init__(self, ws: Workspace):
        from conceptlens.demo import compmap as dc

        self.prims = [p["primitive"] for p in dc.primitives()]
        self.prompts = {p["prompt"]: p["primitive"] for p in dc.primitives()}
        img = ws.read("images").to_pandas()
        self.by_path = {str(ws.resolve(t)): r for t, r in zip(img["thumbnail"], img.to_dict("records"))}

    def _onehot(self, names):
        v = np.zeros(len(self.prims))
        v[[self.prims.index(n) for n in names]] = 1
        return v

    def encode_text(self, texts):
        return np.stack([self._onehot([self.prompts[t]]) for t in texts])

    def encode_images(self, paths):
        return np.stack(
            [self._onehot([f"{g}:{self.by_path[str(p)][g]}" for g in ("color", "shape")]) for p in paths]
        )


@pytest.fixture(scope="module")
def perfect_ws(tmp_path_factory):
    """300 shapes images, the demo's primitives, a VL model that gets every primitive right."""
    import pyarrow as pa

    from conceptlens import schema
    from conceptlens.analysis import compmap, runner
    from harness.factory import shapes_workspace

    w = shapes_workspace(tmp_path_factory.mktemp("cm") / "ws", n=300)
    _with_primitives(w)
    w.write(
        "vl_models",
        pa.Table.from_pylist(
            [
                {
                    "vl_model_id": "vl-perfect",
                    "dataset": "shapes",
                    "spec": "test:perfect",
                    "config": None,
                    "weights": None,
                    "weights_sha256": None,
                }
            ],
            schema=schema.arrow_schema("vl_models"),
        ),
    )
    mp = pytest.MonkeyPatch()
    mp.setattr(compmap, "load_vl", lambda ws, row: PerfectVL(ws))
    try:
        runner.run(
            w.root,
            "compmap",
            {"episodes": 20, "ways": [3], "shots": [1, 2], "queries": 2},
            progress_bars=False,
        )
    finally:
        mp.undo()
    return w


def test_analysis_end_to_end_with_right_primitives(perfect_ws):
    w = perfect_ws
    s = w.read("compmap_scores", vl_model="vl-perfect").to_pandas()
    full = s[s.shots == 0].set_index(["model", "metric"])["value"]
    # Right primitives: the learned model is as good and as interpretable as the oracle.
    for m in ("prim", "interv_full", "interv_partial", "oracle"):
        assert full[m, "accuracy"] == 1.0, m
    assert full["prim", "delta"] == 0.0
    assert full["prim", "acc_class"] == full["oracle", "acc_class"] == 1.0
    assert full["prim", "acc_instance"] == 1.0
    assert set(s.loc[s.shots > 0, "shots"]) == {1, 2} and set(s.loc[s.shots > 0, "episodes"]) == {20}
    assert (s["lo"] <= s["value"]).all() and (s["value"] <= s["hi"]).all()
    img = w.read("images").to_pandas()
    assert set(s.loc[s.shots == 0, "ways"]) == {img.loc[img.split == "train", "label"].nunique()} == {30}
    # The weights: one row per (model, class, primitive); the top two of a class are its own.
    wt = w.read("compmap_weights", vl_model="vl-perfect").to_pandas()
    assert len(wt) == 2 * 30 * 22
    red_star = wt[(wt.model == "prim") & (wt.label == 3)].nlargest(2, "weight")
    assert set(red_star.primitive) == {"color:red", "shape:star"}
    assert validate(w.root) == [], format_problems(validate(w.root))
    # A second run has nothing to do; the run is logged.
    from conceptlens.analysis import runner

    assert runner.missing(w.root, ["compmap"]) == {"compmap": []}


def test_analysis_errors_name_the_table(perfect_ws, tmp_path):
    from conceptlens.analysis import runner

    root = shutil.copytree(perfect_ws.root, tmp_path / "ws")
    with pytest.raises(Exception, match="no VL model 'nope'.*available: vl-perfect"):
        runner.run(root, "compmap", {"vl": ["nope"]}, progress_bars=False)
    shutil.rmtree(root / "label_primitives")
    with pytest.raises(Exception, match="label_primitives"):
        runner.run(root, "compmap", {"vl": ["vl-perfect"]}, force=True, progress_bars=False)


# ---- importers ---------------------------------------------------------------------------------
CUB_ATTRS = [
    "has_bill_shape::dagger",
    "has_bill_shape::curved_(up_or_down)",
    "has_wing_color::blue",
    "has_wing_color::brown",
]
CUB_CLASSES = ["001.Black_footed_Albatross", "002.Laysan_Albatross", "003.Sooty_Albatross"]


def make_cub(root, bad: str | None = None):
    """A CUB_200_2011 folder in the release's formats: 3 classes x 2 images, 4 attributes."""
    rng = np.random.default_rng(0)
    (root / "attributes").mkdir(parents=True)
    images, labels, split, lab = [], [], [], []
    for i in range(6):
        iid, cls = i + 1, i // 2 + 1
        rel = f"{CUB_CLASSES[cls - 1]}/{CUB_CLASSES[cls - 1][4:]}_{iid:04d}_{100 + iid}.jpg"
        (root / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(root / "images" / rel)
        images.append(f"{iid} {rel}")
        labels.append(f"{iid} {cls}")
        split.append(f"{iid} {i % 2}")
        for a in range(1, 5):
            # Class 1: dagger in both images, blue in one; class 2: curved + brown; class 3: none.
            present = int((cls == 1 and (a == 1 or (a == 3 and i == 0))) or (cls == 2 and a in (2, 4)))
            extra = " 0" if (iid, a) == (4, 2) else ""  # the release's six-field lines
            lab.append(f"{iid} {a} {present} 3{extra} 12.5")
    files = {
        "images.txt": images,
        "image_class_labels.txt": labels,
        "train_test_split.txt": split,
        "classes.txt": [f"{i + 1} {c}" for i, c in enumerate(CUB_CLASSES)],
        "attributes.txt": [f"{i + 1} {a}" for i, a in enumerate(CUB_ATTRS)],
        "attributes/image_attribute_labels.txt": lab,
    }
    if bad:
        name, line, text = bad.split("|")
        files[name][int(line) - 1] = text
    for name, lines in files.items():
        (root / name).write_text("\n".join(lines) + "\n")
    return root


def _ws(tmp_path):
    assert main(["init", "--workspace", str(tmp_path / "ws")]) == 0
    return Workspace(tmp_path / "ws")


def test_import_cub(tmp_path):
    src = make_cub(tmp_path / "CUB_200_2011")
    w = _ws(tmp_path)
    assert main(["import", "cub", "--workspace", str(w.root), str(src), "--quiet", "--workers", "1"]) == 0
    img = w.read("images").to_pandas().sort_values("image_id")
    assert len(img) == 6 and set(img.dataset) == {"cub"}
    assert img.label.tolist() == [0, 0, 1, 1, 2, 2]
    assert img.label_name.tolist()[:2] == ["Black footed Albatross"] * 2
    assert img.split.tolist() == ["test", "train"] * 3
    p = w.read("primitives", dataset="cub").to_pandas().sort_values("position")
    assert p.primitive.tolist() == CUB_ATTRS
    assert p.group.tolist() == ["bill shape", "bill shape", "wing color", "wing color"]
    assert p.prompt.tolist()[1] == "a photo of bird whose bill shape is curved (up or down)"
    assert set(p.normalize) == {"softmax"}
    lp = w.read("label_primitives", dataset="cub").to_pandas()
    got = {(r.label, r.primitive): r.value for r in lp.itertuples()}
    assert got == {
        (0, CUB_ATTRS[0]): 1.0,
        (0, CUB_ATTRS[2]): 0.5,
        (1, CUB_ATTRS[1]): 1.0,
        (1, CUB_ATTRS[3]): 1.0,
    }
    ip = w.read("image_primitives", dataset="cub").to_pandas()
    assert len(ip) == 2 + 1 + 4 and set(ip.image_id) <= set(img.image_id)
    assert validate(w.root) == [], format_problems(validate(w.root))


def test_cub_import_then_analysis(tmp_path, capsys):
    """From the release's files to CompMap scores through the command line."""
    src = make_cub(tmp_path / "CUB_200_2011")
    w = _ws(tmp_path)
    assert main(["import", "cub", "--workspace", str(w.root), str(src), "--quiet", "--workers", "1"]) == 0
    _tiny_vl(w, tmp_path, dataset="cub")
    assert (
        main(
            [
                "analyze",
                "compmap",
                "--workspace",
                str(w.root),
                "--quiet",
                "--ways",
                "2",
                "--shots",
                "1",
                "--queries",
                "1",
                "--episodes",
                "2",
            ]
        )
        == 0
    )
    s = w.read("compmap_scores", vl_model="vl-tiny").to_pandas()
    # Three test images, one per class: no episode fits (a note says so), the full shot does.
    assert set(s["shots"]) == {0} and set(s["ways"]) == {3}
    assert s.set_index(["model", "metric"]).loc[("oracle", "accuracy"), "value"] == 1.0
    a = w.read("compmap_activations", vl_model="vl-tiny").to_pandas()
    assert len(a) == 6 * 4
    assert validate(w.root) == [], format_problems(validate(w.root))


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            "attributes/image_attribute_labels.txt|3|1 3 x 3 12.5",
            r"image_attribute_labels.txt line 3: "
            r"is_present must be an integer, got 'x'",
        ),
        ("attributes/image_attribute_labels.txt|5|1 9 1 3 12.5", r"line 5: attribute_id 9 is not in"),
        (
            "attributes/image_attribute_labels.txt|2|1 2 1",
            r"image_attribute_labels.txt line 2: expected "
            r"`<image_id> <attribute_id> <is_present> <certainty_id> <time>`",
        ),
        ("images.txt|4|4", r"images.txt line 4: expected `<image_id> <image_name>`"),
        (
            "attributes.txt|2|2 has_bill_shape",
            r"attributes.txt line 2: attribute 'has_bill_shape' is not "
            r"`group::value`",
        ),
        ("train_test_split.txt|1|1 2", r"train_test_split.txt line 1: is_training_image must be in \[0, 1\]"),
        ("image_class_labels.txt|6|6 7", r"image_class_labels.txt: class_id 7 is not in"),
    ],
)
def test_import_cub_malformed_names_file_and_line(tmp_path, bad, message):
    src = make_cub(tmp_path / "CUB_200_2011", bad=bad)
    w = _ws(tmp_path)
    before = sorted(p.name for p in w.root.iterdir())
    with pytest.raises(ImportInputError, match=message):
        from conceptlens.importers.cub import import_cub

        import_cub(w, src, progress=False, workers=1)
    assert sorted(p.name for p in w.root.iterdir()) == before  # nothing written


def make_mit_states(root, bad: str | None = None):
    pairs = {
        "train": ["ripe apple", "sliced apple", "ripe banana"],
        "val": ["ripe apple", "sliced banana"],
        "test": ["sliced banana", "old car"],
    }
    if bad:
        split, line, text = bad.split("|")
        pairs[split][int(line) - 1] = text
    split_dir = root / "compositional-split-natural"
    split_dir.mkdir(parents=True)
    for s, lines in pairs.items():
        (split_dir / f"{s}_pairs.txt").write_text("\n".join(lines) + "\n")
    rng = np.random.default_rng(0)
    for pair in ("ripe apple", "sliced banana", "old car", "new car"):  # "new car": in no split
        for i in range(2):
            f = root / "release_dataset" / "images" / pair / f"img_{i}.jpg"
            f.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(f)
    return root


def test_import_mit_states(tmp_path, capsys):
    src = make_mit_states(tmp_path / "mit")
    w = _ws(tmp_path)
    assert (
        main(["import", "mit-states", "--workspace", str(w.root), str(src), "--quiet", "--workers", "1"]) == 0
    )
    assert "skipped 1 image folder(s) of pairs no split lists" in capsys.readouterr().out
    p = w.read("primitives", dataset="mit-states").to_pandas().sort_values("position")
    assert p.primitive.tolist() == [
        "attr:old",
        "attr:ripe",
        "attr:sliced",
        "obj:apple",
        "obj:banana",
        "obj:car",
    ]
    assert p.prompt.tolist()[:2] == ["this is old", "this is ripe"] and set(p.normalize) == {"raw"}
    lp = w.read("label_primitives", dataset="mit-states").to_pandas()
    names = dict(zip(lp.label, lp.label_name))
    assert names == {0: "old car", 1: "ripe apple", 2: "ripe banana", 3: "sliced apple", 4: "sliced banana"}
    assert set(lp.loc[lp.label == 4, "primitive"]) == {"attr:sliced", "obj:banana"}
    img = w.read("images").to_pandas()
    split = img.groupby("label_name")["split"].first().to_dict()
    assert split == {"ripe apple": "train", "sliced banana": "val", "old car": "test"}
    assert len(img) == 6
    assert validate(w.root) == [], format_problems(validate(w.root))


def test_import_mit_states_malformed_and_without_images(tmp_path):
    from conceptlens.importers.mit_states import import_mit_states

    src = make_mit_states(tmp_path / "mit", bad="val|2|sliced")
    w = _ws(tmp_path)
    with pytest.raises(
        ImportInputError,
        match=r"val_pairs.txt line 2: expected `attribute object`, "
        r"got 'sliced'",
    ):
        import_mit_states(w, src, progress=False, workers=1)
    src2 = make_mit_states(tmp_path / "mit2", bad="train|3|ripe apple")
    with pytest.raises(
        ImportInputError,
        match=r"train_pairs.txt line 3: pair 'ripe apple' is also "
        r"on line 1",
    ):
        import_mit_states(w, src2, progress=False, workers=1)
    shutil.rmtree(tmp_path / "mit2" / "release_dataset")
    (tmp_path / "mit2" / "compositional-split-natural" / "train_pairs.txt").write_text("ripe apple\n")
    assert import_mit_states(w, tmp_path / "mit2", progress=False) is None
    assert len(w.read("label_primitives", dataset="mit-states")) == 2 * 3


# ---- the page (AppTest) ------------------------------------------------------------------------
PAGE = "pages/compmap.py"


def _selected(at) -> dict:
    return {s.label: s.value for s in at.selectbox}


def test_page_on_the_factory_workspace(monkeypatch, factory_template):
    """The factory's vl-toy sees green as blue in images 1, 13, 25, 37 (tests/compmap_factory.py):
    the page says so for class 1 and shows the stored weights and scores."""
    from tests.test_app import assert_clean, open_app, plain

    at = open_app(monkeypatch, factory_template, PAGE, query={"cls": "1"})
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert _selected(at)["Dataset"] == "toy" and _selected(at)["VL model"] == "vl-toy"
    # Choices at their defaults are left out of the link (docs/dashboard.md); the one given stays.
    assert set(at.query_params) == {"cls"}
    assert len(at.get("plotly_chart")) == 4
    # Weight accuracy of the default setting (3-way 1-shot), as stored.
    table = at.dataframe[0].value
    assert list(table["model"]) == ["Prim", "Oracle-Prim"]
    assert table["Acc-Instance"].tolist() == pytest.approx([2 / 3, 1.0])
    # Per-group table of class 1 (green): 12 of 16 images get the colour right, every shape.
    groups = at.dataframe[1].value.set_index("group")
    assert groups.loc["color", "right"] == 12 and groups.loc["color", "images"] == 16
    assert groups.loc["shape", "right"] == 16
    assert "4 of 16 have a primitive the VL model gets wrong" in plain(at.markdown)
    import plotly.io

    heat = plotly.io.from_json(at.get("plotly_chart")[2].proto.spec)
    stored = pd.read_parquet(factory_template / "compmap_weights/vl_model=vl-toy/part-0.parquet")
    from tests.test_app_clusters import array  # typed arrays travel as base64

    z = array(heat.data[0].z)
    assert z.shape == (3, 5)
    w = stored[(stored.model == "prim") & (stored.label == 0) & (stored.primitive == "color:red")]
    assert z[0, 0] == pytest.approx(w["weight"].iloc[0])


def test_page_deep_link_on_the_demo(monkeypatch, demo_ws):
    from tests.test_app import assert_clean, open_app

    q = {
        "ds": "shapes",
        "vl": "vl-shapes",
        "setting": "10w5s",
        "model": "oracle",
        "sort": "recovered",
        "cls": "3",
    }
    at = open_app(monkeypatch, demo_ws, PAGE, query=q)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    v = _selected(at)
    assert (v["Setting"], v["Model"], v["Sort classes by"], v["Class"]) == ("10w5s", "oracle", "recovered", 3)
    assert {
        k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k] for k in q
    } == q
    stored = pd.read_parquet(demo_ws / "compmap_scores/vl_model=vl-shapes/part-0.parquet")
    want = stored[(stored.ways == 10) & (stored.shots == 5) & (stored.metric == "acc_class")]
    table = at.dataframe[0].value.set_index("model")
    assert table.loc["Prim", "Acc-Class"] == pytest.approx(want.loc[want.model == "prim", "value"].iloc[0])
    assert len(at.get("image")) == 1  # one grid of the class's images


def test_page_says_how_to_compute_a_missing_analysis(monkeypatch, factory_copy):
    from tests.test_app import assert_clean, open_app, plain

    shutil.rmtree(factory_copy / "compmap_scores")
    at = open_app(monkeypatch, factory_copy, PAGE)
    assert_clean(at)
    assert "not computed yet" in plain(at.info)
    assert any("conceptlens analyze compmap --workspace" in c.value for c in at.code)
