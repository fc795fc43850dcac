"""A workspace with the cluster-analysis tables, for the Clusters and Checkpoints pages.

`data/demo` once its analysis stage has run (it has `cluster_metrics.parquet`);
otherwise a tiny shapes workspace with four checkpoints (three of them epochs
1-3 of one run) analysed by the real pipeline (`conceptlens analyze clusters`).
The tiny workspace is built once per test session and shared by the test modules.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from conceptlens import schema
from tests.conftest import DEMO
from tests.helpers import tiny_workspace

KS = (5, 8)


def build_cluster_workspace(root: Path) -> Path:
    ws = tiny_workspace(root, n_shapes=160, dims=(8, 16, 16, 16), seed=0)
    ck = ws.read("checkpoints").to_pandas()
    # rand1..rand3 are three stages of one training run.
    ck["run"] = [None, "tiny-run", "tiny-run", "tiny-run"]
    ck["epoch"] = [None, 1, 2, 3]
    ck["method"] = ["random", "simclr", "simclr", "simclr"]
    ck["epoch"] = ck["epoch"].astype("Int64")
    want = schema.arrow_schema("checkpoints")
    fields = [want.field(c) for c in ck.columns]
    ws.write("checkpoints", pa.Table.from_pandas(ck, schema=pa.schema(fields), preserve_index=False))
    from conceptlens.analysis.clusters import Options, analyze_clusters
    analyze_clusters(root, opts=Options(ks=list(KS), describability=False, rouge_ablation=False,
                                        progress=False))
    (root / ".built").write_text("ok")
    return root


def demo_has_clusters() -> bool:
    return (DEMO / "cluster_metrics.parquet").exists() and (DEMO / "projections.parquet").exists()


@pytest.fixture(scope="session")
def cluster_ws(tmp_path_factory) -> Path:
    """data/demo when it has the cluster tables, else the tiny analysed workspace."""
    if demo_has_clusters():
        return DEMO
    root = tmp_path_factory.getbasetemp() / "clusters-ws"
    if not (root / ".built").exists():
        build_cluster_workspace(root)
    return root
