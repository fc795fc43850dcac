"""`conceptlens extract`: every family end to end into a valid workspace; resume; errors."""

from __future__ import annotations

import json
import time

import pyarrow.parquet as pq
import pytest
import torch

import conceptlens.extract as ex
from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.models import ModelLoadError
from conceptlens.models.base import LayerError
from conceptlens.validate import format_problems, validate
from conceptlens.workspace import WorkspaceError, sha256_file
from tests.tiny_models import N_IMAGES, TinyConv, save_torch_weights, tiny_open_clip_config

TINY = "torch:tests.tiny_models:TinyConv"


def _check(root, cid, dim=None):
    problems = validate(root)
    assert not problems, format_problems(problems)
    rows = {r["checkpoint_id"]: r for r in pq.read_table(root / "checkpoints.parquet").to_pylist()}
    row = rows[cid]
    ids, emb = WorkspaceDB(root).features(cid)
    assert len(ids) == N_IMAGES and len(set(ids)) == N_IMAGES
    assert emb.shape == (N_IMAGES, row["feature_dim"])
    if dim is not None:
        assert row["feature_dim"] == dim
    assert json.loads(row["preprocessing"])  # a JSON object
    assert not (root / ".partial" / "features" / cid).exists()
    return row


@pytest.fixture
def tiny_weights(ws):
    (ws / "models").mkdir()
    return save_torch_weights(
        ws / "models" / "enc.pt",
        TinyConv(width=4, dim=6),
        {"width": 4, "dim": 6},
        {"size": 32, "mean": [0.5] * 3, "std": [0.5] * 3},
    )


def test_plain_torch_weights_in_workspace(ws, tiny_weights):
    cid = ex.extract(
        ws,
        "shapes",
        TINY,
        weights=tiny_weights,
        batch_size=16,
        progress=False,
        metadata={"method": "simclr", "epoch": 5, "run": "r1"},
    )
    assert cid == "shapes-torch-tests.tiny_models-TinyConv-enc"
    row = _check(ws, cid, 6)
    assert row["weights"] == "models/enc.pt" and len(row["weights_sha256"]) == 64
    assert (row["method"], row["epoch"], row["run"], row["model"]) == ("simclr", 5, "r1", "TinyConv")
    assert row["source"] == TINY and row["layer"] is None and row["created"]


def test_weights_outside_workspace_are_recorded_by_absolute_path(ws, tmp_path):
    w = save_torch_weights(tmp_path / "out.pt", TinyConv(), preprocess={"size": 32})
    cid = ex.extract(ws, "shapes", TINY, weights=w, checkpoint_id="ext", progress=False)
    row = _check(ws, cid, 12)
    assert row["weights"] == str(w.resolve()) and row["weights_sha256"] == sha256_file(w)


def test_copy_weights_puts_a_copy_in_the_workspace(ws, tmp_path):
    w = save_torch_weights(tmp_path / "out.pt", TinyConv(), preprocess={"size": 32})
    assert (
        main(
            ["extract", "--workspace", str(ws), "--dataset", "shapes", "--model", TINY, "--weights", str(w)]
            + ["--checkpoint-id", "ext", "--copy-weights", "--quiet"]
        )
        == 0
    )
    row = _check(ws, "ext", 12)
    assert row["weights"] == "models/ext/out.pt"
    assert sha256_file(ws / "models" / "ext" / "out.pt") == row["weights_sha256"] == sha256_file(w)


def test_layer_and_bad_layer(ws, tiny_weights):
    cid = ex.extract(ws, "shapes", TINY, weights=tiny_weights, layer="features.3", progress=False)
    assert cid.endswith("-features.3")
    row = _check(ws, cid, 8)
    assert row["layer"] == "features.3"
    # depth: the layer's position in the model's module order, unless --depth says
    names = [n for n, _ in TinyConv(width=4, dim=6).named_modules() if n]
    assert row["depth"] == names.index("features.3") and row["depth"] > 0
    cid2 = ex.extract(
        ws,
        "shapes",
        TINY,
        weights=tiny_weights,
        layer="features.3",
        depth=2,
        checkpoint_id="d2",
        progress=False,
    )
    assert _check(ws, cid2, 8)["depth"] == 2
    assert _check(ws, "d2")["depth"] == 2 and _check(ws, cid)["depth"] == row["depth"]
    with pytest.raises(ValueError, match="--depth"):
        ex.extract(ws, "shapes", TINY, weights=tiny_weights, layer="features.3", depth=-1, progress=False)
    with pytest.raises(LayerError, match="features"):
        ex.extract(ws, "shapes", TINY, weights=tiny_weights, layer="feature.9", progress=False)


def test_reextract_replaces_row(ws, tiny_weights):
    for cid, meta in (("a", None), ("b", None), ("a", {"epoch": 2})):
        ex.extract(ws, "shapes", TINY, weights=tiny_weights, checkpoint_id=cid, metadata=meta, progress=False)
    rows = pq.read_table(ws / "checkpoints.parquet").to_pylist()
    assert sorted(r["checkpoint_id"] for r in rows) == ["a", "b"]
    assert [r["epoch"] for r in rows if r["checkpoint_id"] == "a"] == [2]
    _check(ws, "a")


def test_resume_after_interruption(ws, tiny_weights, monkeypatch):
    ref = ex.extract(
        ws, "shapes", TINY, weights=tiny_weights, batch_size=8, checkpoint_id="ref", progress=False
    )
    calls = {"n": 0}
    real = ex._write_part

    def flaky(partial, index, table):
        if calls["n"] == 2:
            raise KeyboardInterrupt  # like Ctrl-C after two batches
        calls["n"] += 1
        real(partial, index, table)

    monkeypatch.setattr(ex, "_write_part", flaky)
    with pytest.raises(KeyboardInterrupt):
        ex.extract(
            ws, "shapes", TINY, weights=tiny_weights, batch_size=8, checkpoint_id="res", progress=False
        )
    partial = ws / ".partial" / "features" / "res"
    assert len(list(partial.glob("part-*.parquet"))) == 2
    assert not (ws / "features" / "checkpoint_id=res" / "part-0.parquet").exists()
    assert not validate(ws)  # the partial files are invisible to readers
    monkeypatch.setattr(ex, "_write_part", real)

    done = []
    monkeypatch.setattr(ex, "_write_part", lambda p, i, t: (done.append(t.num_rows), real(p, i, t)))
    ex.extract(ws, "shapes", TINY, weights=tiny_weights, batch_size=8, checkpoint_id="res", progress=False)
    assert sum(done) == N_IMAGES - 16  # only the missing images were embedded
    _check(ws, "res")
    a = pq.read_table(ws / "features" / f"checkpoint_id={ref}" / "part-0.parquet")
    b = pq.read_table(ws / "features" / "checkpoint_id=res" / "part-0.parquet")
    assert a.equals(b)


def test_stale_partial_of_another_model_is_discarded(ws, tiny_weights, monkeypatch):
    real = ex._write_part

    def stop(partial, index, table):
        real(partial, index, table)
        raise KeyboardInterrupt

    monkeypatch.setattr(ex, "_write_part", stop)
    with pytest.raises(KeyboardInterrupt):
        ex.extract(ws, "shapes", TINY, checkpoint_id="x", batch_size=8, progress=False)
    monkeypatch.setattr(ex, "_write_part", real)
    ex.extract(ws, "shapes", TINY, weights=tiny_weights, checkpoint_id="x", progress=False)
    assert _check(ws, "x", 6)["feature_dim"] == 6


def test_open_clip_config_and_checkpoint(ws):
    cfg = tiny_open_clip_config(ws / "tiny_clip.json")
    cid = ex.extract(ws, "shapes", "open_clip:tiny_clip.json", progress=False)  # workspace-relative
    assert cid == "shapes-open_clip-tiny_clip"
    row = _check(ws, cid, 16)
    assert row["model"] == "tiny_clip" and row["method"] == "random"
    from conceptlens.models import load_adapter

    torch.save(load_adapter(f"open_clip:{cfg}").model.state_dict(), ws / "ck.pt")
    # how a trained tiny model ships: its config JSON + a checkpoint, both in the workspace
    cid = ex.extract(
        ws,
        "shapes",
        "open_clip:tiny_clip.json",
        weights="ck.pt",
        progress=False,
        layer="visual.transformer.resblocks.0",
    )
    assert _check(ws, cid, 32)["weights"] == "ck.pt"


@pytest.mark.parametrize("name,dim", [("vit", 32), ("dinov2", 32), ("clip", 16), ("resnet", 16)])
def test_hf(ws, hf_models, name, dim):  # noqa: F811
    cid = ex.extract(ws, "shapes", f"hf:{hf_models / name}", batch_size=20, progress=False)
    assert cid == f"shapes-hf-{name}"
    _check(ws, cid, dim)


def test_timm(ws, tmp_path):
    import timm

    torch.save(timm.create_model("test_resnet").state_dict(), tmp_path / "tr.pt")
    cid = ex.extract(ws, "shapes", "timm:test_resnet", weights=tmp_path / "tr.pt", progress=False)
    row = _check(ws, cid)
    assert json.loads(row["preprocessing"])["source"] == "timm"


def test_torchvision(ws, tmp_path):
    from torchvision import models

    torch.save(models.get_model("mobilenet_v3_small").state_dict(), tmp_path / "mv.pt")
    cid = ex.extract(
        ws, "shapes", "torchvision:mobilenet_v3_small", weights=tmp_path / "mv.pt", progress=False
    )
    _check(ws, cid, 1024)


def test_errors(ws):
    with pytest.raises(WorkspaceError, match="datasets: shapes"):
        ex.extract(ws, "nope", TINY, progress=False)
    with pytest.raises(ValueError, match="not columns"):
        ex.extract(ws, "shapes", TINY, metadata={"colour": 1}, progress=False)
    with pytest.raises(WorkspaceError, match="checkpoint_id"):
        ex.extract(ws, "shapes", TINY, checkpoint_id="a/b", progress=False)
    with pytest.raises(FileNotFoundError, match="--weights"):
        ex.extract(ws, "shapes", TINY, weights="missing.pt", progress=False)
    assert not (ws / "features").exists() or not any((ws / "features").iterdir())


def test_missing_hub_model_offline_is_fast(ws, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t = time.time()
    with pytest.raises(ModelLoadError, match="--weights|save_pretrained") as e:
        ex.extract(ws, "shapes", "hf:facebook/dinov2-small", progress=False)
    assert time.time() - t < 10 and "huggingface" in str(e.value)


def test_a_model_that_cannot_load_is_a_model_error_not_a_workspace_one(ws, capsys):
    with pytest.raises(ModelLoadError, match="unknown family") as e:
        ex.extract(ws, "shapes", "nofamily:x", progress=False)
    assert not isinstance(e.value, WorkspaceError)  # the workspace is fine: the model is not
    rc = main(["extract", "--workspace", str(ws), "--dataset", "shapes", "--model", "nofamily:x"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("conceptlens: error: model spec 'nofamily:x': unknown family")
    assert err.count("\n") == 1


def test_cli(ws, tiny_weights, capsys):
    rc = main(
        [
            "extract",
            "--workspace",
            str(ws),
            "--dataset",
            "shapes",
            "--model",
            TINY,
            "--weights",
            str(tiny_weights),
            "--checkpoint-id",
            "cli",
            "--method",
            "supervised",
            "--epoch",
            "3",
            "--batch-size",
            "16",
            "--quiet",
        ]
    )
    assert rc == 0 and "checkpoint cli" in capsys.readouterr().out
    assert _check(ws, "cli", 6)["method"] == "supervised"
    rc = main(
        [
            "extract",
            "--workspace",
            str(ws),
            "--dataset",
            "shapes",
            "--model",
            TINY,
            "--layer",
            "nope",
            "--quiet",
        ]
    )
    assert rc == 1 and "nope" in capsys.readouterr().err
    rc = main(
        [
            "extract",
            "--workspace",
            str(ws),
            "--dataset",
            "shapes",
            "--model",
            "hf:facebook/dinov2-small",
            "--quiet",
        ]
    )
    assert rc == 1 and "Looked in" in capsys.readouterr().err


def test_nan_embeddings_are_refused(ws, monkeypatch):
    from conceptlens.models.base import Adapter

    monkeypatch.setattr(Adapter, "embed", lambda self, b: torch.full((b.shape[0], 3), float("nan")))
    with pytest.raises(WorkspaceError, match="NaN"):
        ex.extract(ws, "shapes", TINY, checkpoint_id="nan", progress=False)
    assert not (ws / "features" / "checkpoint_id=nan" / "part-0.parquet").exists()
    assert not list((ws / ".partial" / "features" / "nan").glob("part-*"))
