"""No function of the product longer than about 100 lines without a reason (issue 40): a long
function hides the steps a reader and a test want to see one at a time. Lines are counted
from `def` to the function's last line, its docstring left out. The functions still longer
are listed with their reason; the list is exact, so a new long function fails and so does a
shortened one still listed (strike it here)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT
from tests.test_imports import SOURCES, files

LIMIT = 100

# file:function -> why it is still long
LONG = {
    "conceptlens/cli.py:register": "declares the top-level commands' arguments (score, validate, info, ...)",
    "conceptlens/importers/cli.py:register": "declares every `import` subcommand's arguments, a block each",
    "conceptlens/studies/cli.py:register": "declares every `study` subcommand's arguments, a block each",
    "conceptlens/figures/aligned.py:aligned_frames": "one Plotly figure with animation frames: traces, "
    "frames, sliders and layout are one object",
    "conceptlens/figures/clusters.py:purity_coherence": "one Plotly figure: traces and layout",
    "conceptlens/figures/clusters.py:projection_scatter": "one Plotly figure: traces and layout",
    "conceptlens/figures/checkpoints.py:cluster_sankey": "one Plotly figure: nodes, links and layout",
    "conceptlens/figures/similarity.py:embedding_map": "one Plotly figure: traces and layout",
    "conceptlens/figures/compmap.py:weights_heatmap": "one Plotly figure: heatmap, annotations and layout",
    "conceptlens/extract.py:extract": "the command's steps in order (options, weights, model, resume, embed, "
    "finish), each a helper; what is left passes their results along",
    "conceptlens/importers/manifest.py:scan": "one pass over a manifest's rows, each check naming its row",
    "conceptlens/analysis/cluster_metrics.py:_metrics": "one cluster's metrics and their intervals, "
    "computed together from one set of neighbours",
    "components/selection_panel.py:_choose": "one branch per source of a selection (page, label, "
    "factor, caption, cluster, CSV, saved)",
    "conceptlens/embedding/psych.py:fit_embedding": "one optimisation loop with its restarts and early stop",
    "conceptlens/analysis/scoreboard.py:_run": "one unit's sources gathered, sized, scored and written "
    "in order",
}


def long_functions(root=ROOT, sources=SOURCES, limit: int = LIMIT) -> dict[str, int]:
    """file:function -> lines (docstring left out) of each function longer than `limit`."""
    out = {}
    for path in files(root, sources):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    lines -= first.end_lineno - first.lineno + 1
            if lines > limit:
                out[f"{path.relative_to(root)}:{node.name}"] = lines
    return out


def test_no_function_is_long_without_a_reason():
    assert sorted(long_functions()) == sorted(LONG)


def test_the_count_sees_a_long_function_and_leaves_out_its_docstring(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    doc = '    """' + "\n".join(["a docstring"] * 30) + '"""\n'
    # `short`: its def line and LIMIT - 1 lines besides its docstring; `long`: LIMIT + 2
    short = body.rsplit("\n", 1)[0]
    (pkg / "m.py").write_text(f"def short():\n{doc}{short}\n\n\ndef long():\n{body}\n    return x0\n")
    assert long_functions(tmp_path, ("pkg",)) == {"pkg/m.py:long": LIMIT + 2}
