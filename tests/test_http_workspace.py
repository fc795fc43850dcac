"""A workspace served from a URL (`--workspace http://...`), read through fsspec and DuckDB's
`register_filesystem`, against a real HTTP server started here that answers Range requests
and lists folders, as static file servers do (issue 13)."""

import contextlib
import functools
import http.server
import os
import re
import sys
import threading

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from components import nav
from conceptlens import remote, schema, views
from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.validate import validate_remote
from conceptlens.workspace import Workspace, WorkspaceError
from tests.conftest import ROOT


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """http.server with `Range: bytes=a-b` (206 Partial Content); every request logged."""

    log: list = []

    def log_message(self, *args):
        pass

    def send_head(self):
        rng = self.headers.get("Range")
        type(self).log.append((self.command, self.path, rng))
        path = self.translate_path(self.path)
        if not rng or os.path.isdir(path):
            return super().send_head()
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
        try:
            f = open(path, "rb")
        except OSError:
            self.send_error(404)
            return None
        size = os.fstat(f.fileno()).st_size
        a, b = m.groups()
        start, end = (size - int(b), size - 1) if a == "" else (int(a), min(int(b or size - 1), size - 1))
        if start >= size:
            f.close()
            self.send_error(416)
            return None
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        f.seek(start)
        chunk = f.read(end - start + 1)
        f.close()
        import io

        return io.BytesIO(chunk)


@pytest.fixture(scope="module")
def served(factory_template):
    """(URL of the factory workspace, its folder) on a loopback server for this module."""
    RangeHandler.log = []
    handler = functools.partial(RangeHandler, directory=str(factory_template.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    remote._fingerprint.cache_clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/{factory_template.name}", factory_template
    server.shutdown()
    server.server_close()


def test_the_server_answers_range_requests(served):
    import urllib.request

    url, root = served
    req = urllib.request.Request(url + "/images.parquet", headers={"Range": "bytes=-8"})
    with urllib.request.urlopen(req) as r:
        assert r.status == 206
        assert r.read() == (root / "images.parquet").read_bytes()[-8:]  # the footer magic


def test_metadata_files_and_fingerprint_through_http(served):
    url, root = served
    rws, lws = remote.RemoteWorkspace(url), Workspace(root)
    assert rws.meta() == lws.meta()
    for t in schema.TABLES:
        local = [str(p.relative_to(root)) for p in lws.files(t.name)]
        assert [u[len(url) + 1 :] for u in rws.files(t.name)] == local, t.name
        if t.partitioned:
            assert rws.partitions(t.name) == lws.partitions(t.name), t.name
    fp = rws.fingerprint()
    assert fp == rws.fingerprint() and len(fp) == 16


def test_views_match_the_local_workspace(served):
    url, root = served
    RangeHandler.log.clear()
    rdb, ldb = WorkspaceDB(url), WorkspaceDB(root)
    assert rdb.remote and rdb.tables == ldb.tables and not rdb.errors
    for fn, args in [
        (views.clusters.datasets, {}),
        (views.clusters.cluster_table, dict(dataset="toy", checkpoint="ck1", k=4)),
        (views.clusters.projection, dict(checkpoint="ck0", k=4)),
        (views.checkpoints.summary, dict(dataset="toy", k=4)),
        (views.checkpoints.anmi_matrix, dict(dataset="toy", k=4)),
    ]:
        pd.testing.assert_frame_equal(fn(rdb, **args), fn(ldb, **args), obj=fn.__name__)
    ids_r, x_r = rdb.features("ck2")
    ids_l, x_l = ldb.features("ck2")
    assert list(ids_r) == list(ids_l) and (x_r == x_l).all()
    # DuckDB read parts of files (footers, columns), not whole files.
    assert any(rng for _, path, rng in RangeHandler.log if path.endswith(".parquet"))


def test_every_page_opens_on_the_url(served, monkeypatch):
    url, _ = served
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", url])
    for spec in nav.PAGES:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.switch_page(spec.path).run()
        assert not at.exception, (spec.name, [e.message for e in at.exception])
        assert not at.error, (spec.name, [e.value for e in at.error])
        assert any(url in c.value.replace("\\", "") for c in at.sidebar.caption), spec.name


def test_thumbnails_come_through_http(served):
    from components.data import AppWorkspace
    from components.image_grid import _readable

    url, root = served
    ws = AppWorkspace(url)
    rel = Workspace(root).read("images", columns=["thumbnail"])["thumbnail"][0].as_py()
    data = _readable(ws, rel)
    assert data == (root / rel).read_bytes()
    assert _readable(ws, "thumbnails/missing.png") is None
    with pytest.raises(WorkspaceError, match="leaves the workspace"):
        ws.path("../etc/passwd")


def test_figures_and_report_from_a_url(served, tmp_path):
    url, _ = served
    spec = tmp_path / "s.toml"
    spec.write_text('[[figure]]\nfigure = "purity_coherence"\n[[figure]]\nfigure = "psych_umap"\n')
    assert (
        main(["figures", "--workspace", url, "--out", str(tmp_path / "f"), "--spec", str(spec), "--quiet"])
        == 0
    )
    assert len(list((tmp_path / "f").glob("*.pdf"))) == 2
    out = tmp_path / "report.html"
    assert main(["report", "--workspace", url, "--out", str(out), "--quiet"]) == 0
    page = out.read_text()
    assert "unreadable image" not in page and page.count("data:image/png;base64,") > 10


def test_a_missing_workspace_is_named(served):
    url, _ = served
    with pytest.raises(WorkspaceError, match=re.escape(url + "/nothing/workspace.json")):
        remote.RemoteWorkspace(url + "/nothing").meta()
    problems = validate_remote(url + "/nothing", {"images"})
    assert [p.table for p in problems] == ["workspace.json"] and "not found" in problems[0].message


# ---- failing closed (issue 24) ----------------------------------------------------------
@contextlib.contextmanager
def serving(directory, handler=RangeHandler):
    """A loopback server of `directory` for one test: its base URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(directory))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class RedirectHandler(http.server.BaseHTTPRequestHandler):
    """Every request answered with a redirect to the same path on `target` (host:port)."""

    target = ""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", f"http://{self.target}{self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET


def test_a_redirect_to_another_port_is_refused(factory_template):
    RangeHandler.log = []
    with serving(factory_template.parent) as other:
        RedirectHandler.target = other.removeprefix("http://")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RedirectHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/{factory_template.name}"
            with pytest.raises(WorkspaceError, match="redirect to another host or port is refused"):
                remote.RemoteWorkspace(url).meta()
            (p,) = validate_remote(url, {"images"})
            assert p.table == "workspace.json" and f"redirects to {other}/" in p.message, p
            with pytest.raises(WorkspaceError, match="refused"):
                remote.RemoteWorkspace(url).read_bytes("images.parquet")
            # The other server was never asked for anything.
            assert RangeHandler.log == []
        finally:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize(
    "rel",
    [
        "thumbnails/%2e%2e/%2e%2e/secret.txt",
        "thumbnails/%2E%2E/..%2f/secret.txt",
        "thumbnails/%252e%252e/%252e%252e/secret.txt",
        "thumbnails/..%5c..%5csecret.txt",
        "%2fsecret.txt",
    ],
)
def test_percent_encoded_dots_do_not_leave_the_workspace(factory_template, tmp_path, rel):
    from components.data import AppWorkspace
    from components.image_grid import _readable

    (tmp_path / "ws").symlink_to(factory_template, target_is_directory=True)
    (tmp_path / "secret.txt").write_text("the owner's secret")
    RangeHandler.log = []
    with serving(tmp_path) as base:
        url = base + "/ws"
        with pytest.raises(WorkspaceError, match="leaves the workspace|relative to the workspace"):
            remote.RemoteWorkspace(url).read_bytes(rel)
        assert _readable(AppWorkspace(url), rel) is None
    assert not [path for _, path, _ in RangeHandler.log if "secret" in path]


def test_an_encoded_name_inside_the_workspace_is_fetched_as_that_name(served):
    url, root = served
    data = remote.RemoteWorkspace(url).read_bytes("%2e/images%252eparquet")
    assert data == (root / "images.parquet").read_bytes()


class ListingHandler(http.server.BaseHTTPRequestHandler):
    """A folder listing whose links try to leave the folder (encoded or not)."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        links = [
            "checkpoint_id%3Dck0/",
            "..%2F..%2Fsecret.parquet",
            "%2e%2e/",
            "%252e%252e/",
            "../",
            "./",
            "a%5Cb.parquet",
            "deeper/down.parquet",
            "http://127.0.0.1:1/elsewhere/",
        ]
        body = "".join(f'<a href="{h}">{h}</a>\n' for h in links).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_listing_gives_only_the_folders_children():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ListingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        folder = f"http://127.0.0.1:{server.server_address[1]}/ws/clusters"
        fs = remote.filesystem(folder)
        assert fs.ls(folder + "/", detail=False) == [folder + "/checkpoint_id=ck0/"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_without_range_requests_is_named(factory_template, monkeypatch):
    class Plain(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    with serving(factory_template.parent, Plain) as base:
        url = f"{base}/{factory_template.name}"
        ws = remote.RemoteWorkspace(url)
        assert ws.range_problem() == f"{url}/workspace.json: {remote.NO_RANGES}"
        problems = validate_remote(url, {"images", "clusters"}, WorkspaceDB(url))
        assert [p.message for p in problems] == [f"{url}/workspace.json: {remote.NO_RANGES}"]
        monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", url])
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.switch_page("pages/clusters.py").run()
        assert not at.exception, [e.message for e in at.exception]
        shown = " ".join(re.sub(r"\\(.)", r"\1", e.value) for e in at.error)
        assert "this server does not answer Range requests; see docs/deploy.md" in shown, shown


def _set_type(path, column, typ):
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    i = t.column_names.index(column)
    t = t.set_column(i, column, pa.array([str(v) for v in t[column].to_pylist()], typ))
    path.unlink()
    pq.write_table(t, path)


@pytest.mark.parametrize(
    "name, break_it",
    [
        ("images_missing", lambda root: (root / "images.parquet").unlink()),
        (
            "checkpoints_feature_dim_as_text",
            lambda root: _set_type(root / "checkpoints.parquet", "feature_dim", None),
        ),
        ("images_without_image_id", None),
        ("cluster_metrics_purity_as_text", None),
    ],
)
def test_a_missing_or_mistyped_table_gets_the_local_message(
    factory_copy, tmp_path, monkeypatch, name, break_it
):
    from conceptlens.validate import validate
    from tests.malformed import MALFORMATIONS

    if break_it is None:
        MALFORMATIONS[name].apply(Workspace(factory_copy))
    else:
        break_it(factory_copy)
    with serving(factory_copy.parent) as base:
        url = f"{base}/{factory_copy.name}"
        db = WorkspaceDB(url)
        for spec in nav.PAGES:
            local = {
                (p.file, p.table, p.column, p.message)
                for p in validate(factory_copy, deep=False, tables=spec.tables)
                if "type" in p.message or "missing" in p.message
            }
            far = {(p.file, p.table, p.column, p.message) for p in validate_remote(url, set(spec.tables), db)}
            assert far == local, (spec.name, far, local)
        monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", url])
        shown_on = 0
        for spec in nav.PAGES:
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
            at.switch_page(spec.path).run()
            assert not at.exception, (spec.name, [e.message for e in at.exception])
            text = " ".join(re.sub(r"\\(.)", r"\1", e.value) for e in at.error)
            assert "Exception" not in text, (spec.name, text)
            shown_on += bool(text)
        assert shown_on
