"""`conceptlens report`: one self-contained HTML file of a workspace's figures and tables.

The file needs no server and no network: plotly.js is inlined once, every figure is a
Plotly chart (zoom, hover, legend toggles; WebGL traces drawn as SVG so any browser shows
them), thumbnails are data: URIs. Its figures are the catalogue's defaults
(conceptlens/figures/specs/), drawn by the same builds the pages call.
"""

from __future__ import annotations

import base64
import html
import io
import json
import time
from pathlib import Path

from PIL import Image

from . import __version__
from .errors import ConceptLensError

THUMB_PX = 96  # thumbnails are embedded at most this large
SAMPLE_IMAGES = 24  # per dataset
CLUSTER_ROWS = 8  # largest clusters shown with their images
CLUSTER_IMAGES = 8

_CSS = """
body { font-family: Arial, 'Liberation Sans', Helvetica, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 0 24px 48px; color: #222; line-height: 1.45; }
h1 { margin-bottom: 4px; } h2 { margin-top: 40px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta, .caption { color: #555; font-size: 13px; }
.figure { margin: 18px 0 28px; } .figure h3 { margin: 0 0 2px; font-size: 16px; }
.plot { width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 20px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #e5e5e5; }
th { text-align: left; border-bottom: 2px solid #999; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.thumbs { display: flex; flex-wrap: wrap; gap: 4px; margin: 6px 0 14px; }
.thumbs figure { margin: 0; width: 100px; font-size: 11px; color: #555; text-align: center; }
.thumbs img { width: 96px; height: 96px; object-fit: contain; background: #f3f3f3; display: block; }
.cluster { margin: 10px 0 18px; } .skipped { color: #777; font-size: 13px; }
"""


def _data_uri(db, rel: str) -> str | None:
    """A thumbnail as a PNG data: URI at most THUMB_PX wide, None if it does not decode."""
    from .figures.catalog import image_source
    from .remote import open_source  # local: the command's own, so --help stays light

    try:
        with Image.open(open_source(image_source(db, rel))) as im:
            im = im.convert("RGB")
            im.thumbnail((THUMB_PX, THUMB_PX))
            buf = io.BytesIO()
            im.save(buf, format="PNG", optimize=True)
    except Exception:  # an unreadable thumbnail is left out, as the dashboard draws a placeholder
        return None
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _thumbs(db, rows, caption_col: str = "label_name") -> str:
    cells = []
    for r in rows.itertuples(index=False):
        uri = _data_uri(db, r.thumbnail)
        cap = getattr(r, caption_col, None)
        cap = "" if cap is None or cap != cap else str(cap)
        if uri is None:
            cells.append(f'<figure><div class="missing">unreadable image</div>{html.escape(cap)}</figure>')
        else:
            cells.append(
                f'<figure><img src="{uri}" alt="{html.escape(str(r.image_id))}" '
                f'title="{html.escape(str(r.image_id))}">{html.escape(cap)}</figure>'
            )
    return f'<div class="thumbs">{"".join(cells)}</div>'


def _script_json(obj) -> str:
    # Inside <script>, "</" would end the element: JSON allows "<\/" for it.
    return json.dumps(obj, default=str).replace("</", "<\\/")


def _figure_html(fid: str, fig, title: str, params: dict, url: str) -> str:
    from .figures.export import vector_figure

    spec = json.loads(vector_figure(fig).to_json())
    shown = ", ".join(f"{k} = {v}" for k, v in params.items())
    return (
        f'<div class="figure"><h3>{html.escape(title)}</h3>'
        f'<div class="caption">{html.escape(shown)} · dashboard view <code>{html.escape(url)}</code></div>'
        f'<div class="plot" id="{fid}"></div>'
        f'<script type="application/json" id="{fid}-spec">{_script_json(spec)}</script></div>'
    )


def _sections(db, progress: bool) -> tuple[list[str], list[dict], int]:
    """Per page: its default figures; plus the images and tables a reader wants to see."""
    from tqdm.auto import tqdm

    from .figures.catalog import FIGURES, Unavailable, by_page
    from .tables import to_html  # local: the command's own, so --help stays light

    out, skipped, n = [], [], 0
    pages = by_page()
    bar = tqdm(total=sum(f.default for f in FIGURES.values()), desc="report", disable=not progress)
    for page, figs in pages.items():
        parts = []
        for f in figs:
            if not f.default:
                continue
            bar.update()
            try:
                params = f.resolve(db)
                fig = f.build(db, params)
            except Unavailable as e:
                skipped.append({"page": page, "figure": f.name, "reason": str(e)})
                continue
            n += 1
            parts.append(_figure_html(f"fig{n}", fig, f.title, params, f.url(params)))
            if f.name == "purity_coherence":
                parts.append(_clusters_html(db, params))
            if f.name == "cl_id":
                parts.append(_checkpoints_table(db, params, to_html))
        if parts:
            out.append(f"<h2>{html.escape(page.capitalize())}</h2>" + "".join(parts))
    bar.close()
    return out, skipped, n


def _clusters_html(db, p: dict) -> str:
    from . import views

    table = views.clusters.cluster_table(db, p["ds"], p["ckpt"], p["k"], captions=db.has("cluster_captions"))
    if table.empty:
        return ""
    top = table.sort_values(["size", "cluster"], ascending=[False, True]).head(CLUSTER_ROWS)
    parts = [
        f"<h3>The {len(top)} largest clusters of {html.escape(str(p['ckpt']))} (k = {p['k']})</h3>",
    ]
    for m in top.itertuples(index=False):
        facts = [f"{int(m.size)} images"]
        purity = getattr(m, "purity", None)
        if purity is not None and purity == purity:
            facts.append(f"purity {purity:.2f}")
        caption = getattr(m, "caption", None)
        head = f"Cluster {int(m.cluster)}" + (f" — {caption}" if isinstance(caption, str) and caption else "")
        images = views.clusters.cluster_images(db, p["ckpt"], p["k"], int(m.cluster), limit=CLUSTER_IMAGES)
        parts.append(
            f'<div class="cluster"><strong>{html.escape(head)}</strong> '
            f'<span class="caption">{html.escape(" · ".join(facts))}</span>{_thumbs(db, images)}</div>'
        )
    return "".join(parts)


def _checkpoints_table(db, p: dict, to_html) -> str:
    from . import views

    s = views.checkpoints.summary(db, p["ds"], p["k"], clid=db.has("clid_scores"))
    cols = [c for c in ("checkpoint_id", "method", "epoch", "knn_acc", "cl", "id", "clid", "wclid") if c in s]
    if s.empty:
        return ""
    fmt = {c: "%.3f" for c in ("knn_acc", "cl", "clid", "wclid")} | {"id": "%.2f", "epoch": "%d"}
    return f"<h3>All checkpoints of {html.escape(str(p['ds']))} at k = {p['k']}</h3>" + to_html(s[cols], fmt)


def _samples(db) -> str:
    from . import views

    parts = []
    for ds in views.home.datasets(db)["dataset"]:
        rows = views.home.sample_images(db, ds, n=SAMPLE_IMAGES)
        if len(rows):
            parts.append(f"<h3>{html.escape(str(ds))}</h3>{_thumbs(db, rows)}")
    return "<h2>Sample images</h2>" + "".join(parts) if parts else ""


def build_report(workspace, progress: bool = True) -> tuple[str, dict]:
    """The report's HTML and a summary (figures drawn, skipped ones and why)."""
    from plotly.offline import get_plotlyjs

    from .db import WorkspaceDB  # local: the command's own, so --help stays light
    from .figures.export import provenance
    from .remote import workspace_at  # local: the command's own, so --help stays light

    ws = workspace_at(workspace)
    meta = ws.meta()
    db = WorkspaceDB(workspace)
    prov = provenance(str(workspace), ws.fingerprint(), f"conceptlens report --workspace {workspace}")
    sections, skipped, n = _sections(db, progress)
    name = str(meta.get("name") or "ConceptLens workspace")
    skipped_html = (
        '<p class="skipped">Not drawn (nothing to show in this workspace): '
        + "; ".join(html.escape(f"{s['page']}/{s['figure']}: {s['reason']}") for s in skipped)
        + "</p>"
        if skipped
        else ""
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="ConceptLens {__version__}">
<title>{html.escape(name)} — ConceptLens report</title>
<style>{_CSS}</style>
<script type="application/json" id="conceptlens-provenance">{_script_json(prov)}</script>
<script>{get_plotlyjs()}</script>
</head><body>
<h1>{html.escape(name)}</h1>
<p>{html.escape(str(meta.get("description") or ""))}</p>
<p class="meta">Workspace {html.escape(str(workspace))} · fingerprint {html.escape(prov["fingerprint"])} ·
ConceptLens {__version__} · {html.escape(prov["date"])} · figures are interactive (hover, zoom,
click legend entries; the camera icon saves a PNG).</p>
{"".join(sections)}
{skipped_html}
{_samples(db)}
<script>
document.querySelectorAll("script[id$='-spec']").forEach(function (el) {{
  var spec = JSON.parse(el.textContent);
  var div = document.getElementById(el.id.slice(0, -5));
  Plotly.newPlot(div, spec.data, spec.layout, {{responsive: true, displaylogo: false}});
}});
</script>
</body></html>
"""
    return page, {"figures": n, "skipped": skipped}


def _report(args) -> int:
    from .workspace import atomic_write_bytes  # local: the command's own, so --help stays light

    t0 = time.perf_counter()
    page, summary = build_report(args.workspace, progress=not args.quiet)
    out = Path(args.out)
    if out.is_dir():
        raise ConceptLensError(f"--out {out}: is a folder; give a file name such as report.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    data = page.encode()
    atomic_write_bytes(out, data)
    skipped = f"; {len(summary['skipped'])} not drawn" if summary["skipped"] else ""
    seconds = time.perf_counter() - t0
    print(f"{out}: {summary['figures']} figures, {len(data) / 1e6:.1f} MB, {seconds:.1f} s{skipped}")
    return 0


def register(sub, parents) -> None:
    p = sub.add_parser(
        "report",
        parents=parents,
        help="write one self-contained HTML report of a workspace (opens offline, no server)",
    )
    p.add_argument("--out", required=True, help="the HTML file to write, e.g. report.html")
    p.set_defaults(func=_report)
