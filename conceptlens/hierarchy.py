"""Label hierarchies (format 2.4, table `label_hierarchy`): a tree over a dataset's labels.

A dataset's hierarchy names one column of `images` (`label_name`, or a factor column such
as clipart's `category_path`) whose values are its nodes; every node has a parent (none
for a root). Level 0 holds the roots; an image is read at level L as its node's ancestor
at depth L, and an image whose node is shallower than L keeps its own node, so the
deepest level is each image's own value. `images` is never changed: the tree is a table
of its own, read here (`read` from a WorkspaceDB, `load` from a Workspace) and written by
`write`.

Trees come from a column of paths (`from_paths`: `animals/mammals/big_cats` is a child of
`animals/mammals`), from (node, parent) pairs (a manifest's `parent` column, a hierarchy
CSV: `from_pairs`), or from WordNet (conceptlens/importers/wordnet.py).

This module imports only the standard library (and pyarrow to write): `validate` uses
`tree_problems`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import schema
from .errors import ConceptLensError

TABLE = "label_hierarchy"
SEPARATOR = "/"


class HierarchyError(ConceptLensError):
    """A tree that is not one (a cycle, a parent that is no node, an image value that is no node)."""


def tree_problems(parent: Mapping[str, str | None], limit: int = 3) -> list[str]:
    """What makes `parent` (node -> parent, None for a root) not a forest, in words: parents
    that are no node, nodes that are their own ancestor (a cycle). Empty: a forest."""
    out = []
    orphans = sorted({p for p in parent.values() if p is not None and p not in parent})
    if orphans:
        more = f" (and {len(orphans) - limit} more)" if len(orphans) > limit else ""
        out.append(f"parent(s) {', '.join(map(repr, orphans[:limit]))}{more} are not nodes")
    state: dict[str, int] = {}  # 1: on the current walk, 2: reaches a root
    cycles = []
    for start in parent:
        walk, n = [], start
        while n is not None and n in parent and state.get(n) is None:
            state[n] = 1
            walk.append(n)
            n = parent[n]
        if n is not None and state.get(n) == 1:  # back on this walk: a cycle
            cycle = walk[walk.index(n) :]
            cycles.append(" -> ".join(map(repr, cycle + [n])))
        for w in walk:
            state[w] = 2
    if cycles:
        more = f" (and {len(cycles) - limit} more)" if len(cycles) > limit else ""
        out.append(f"cycle(s) {'; '.join(cycles[:limit])}{more}")
    return out


def check_tree(parent: Mapping[str, str | None], where: str) -> None:
    problems = tree_problems(parent)
    if problems:
        raise HierarchyError(f"{where}: not a tree: {'; '.join(problems)}")


def missing_values(parent: Mapping[str, str | None], values: Iterable) -> list[str]:
    """Values (of the images' column) that are not nodes, sorted; nulls are fine (no label)."""
    return sorted({str(v) for v in values if v is not None and str(v) not in parent})


@dataclass(frozen=True)
class Hierarchy:
    """One dataset's tree: `parent` (node -> parent or None), display `names` of some nodes,
    and the images column whose values are its nodes."""

    dataset: str
    column: str
    parent: dict[str, str | None]
    names: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        check_tree(self.parent, f"label hierarchy of dataset {self.dataset!r}")

    def __hash__(self):  # frozen with dict fields: hash by identity (functools caches per object)
        return id(self)

    @functools.cached_property
    def depth(self) -> dict[str, int]:
        """Level of every node (0 = a root)."""
        out: dict[str, int] = {}
        for start in self.parent:
            walk, n = [], start
            while n is not None and n not in out:
                walk.append(n)
                n = self.parent[n]
            d = -1 if n is None else out[n]
            for w in reversed(walk):
                d += 1
                out[w] = d
        return out

    @property
    def levels(self) -> int:
        """How many levels the tree has (its depth + 1); 0 for an empty tree."""
        return max(self.depth.values(), default=-1) + 1

    @functools.cached_property
    def _children(self) -> dict[str | None, list[str]]:
        out: dict[str | None, list[str]] = {}
        for n, p in self.parent.items():
            out.setdefault(p, []).append(n)
        return {p: sorted(c) for p, c in out.items()}

    def children(self, node: str | None) -> list[str]:
        """The children of `node` (of None: the roots), sorted."""
        return list(self._children.get(node, ()))

    def path(self, node: str) -> list[str]:
        """The nodes from the root down to `node`."""
        out = []
        n = node
        while n is not None:
            out.append(n)
            n = self.parent[n]
        return out[::-1]

    def ancestor(self, node: str | None, level: int) -> str | None:
        """`node`'s ancestor at `level` (0 = its root); a node shallower than `level` is kept.
        None stays None (an image without a value)."""
        if node is None:
            return None
        if level < 0:
            raise ValueError(f"level must be >= 0, got {level}")
        if node not in self.parent:
            raise HierarchyError(
                f"label hierarchy of dataset {self.dataset!r}: {node!r} (column {self.column}) is not a node"
            )
        p = self.path(node)
        return p[min(level, len(p) - 1)]

    def nodes_at(self, level: int) -> list[str]:
        """The nodes at depth `level`, sorted."""
        return sorted(n for n, d in self.depth.items() if d == level)

    def name(self, node: str | None) -> str | None:
        """How a node is shown: its name, else the node itself."""
        return None if node is None else self.names.get(node) or node

    def level_names(self) -> list[str]:
        """A short description of each level: `level 0 (top)`, ..., `level 3 (finest)`."""
        n = self.levels
        out = []
        for level in range(n):
            what = " (top)" if level == 0 else (" (finest)" if level == n - 1 else "")
            out.append(f"level {level}{what}")
        return out

    def group(self, node: str | None, level: int, within: str | None = None) -> str | None:
        """The group an image of node `node` falls in at `level`; with `within` (a node),
        images outside its subtree fall in no group (None)."""
        if within is not None:
            if node is None or within not in self.path(node):
                return None
            level = max(level, self.depth[within] + 1)
        return self.ancestor(node, level)

    def rows(self) -> list[dict]:
        """The table's rows (without the partition column `dataset`), by node."""
        return [
            {"images_column": self.column, "node": n, "parent": self.parent[n], "name": self.names.get(n)}
            for n in sorted(self.parent)
        ]


def from_paths(values: Iterable, sep: str = SEPARATOR) -> dict[str, str | None]:
    """node -> parent of the tree a column of paths spells: `a/b/c` is a child of `a/b`,
    itself a child of the root `a`. Null values are skipped; empty parts (`a//b`,
    a leading or trailing separator) are refused."""
    parent: dict[str, str | None] = {}
    for v in values:
        if v is None:
            continue
        v = str(v)
        parts = v.split(sep)
        if any(not p.strip() for p in parts):
            raise HierarchyError(f"path {v!r} has an empty part (separator {sep!r})")
        for i in range(len(parts)):
            node = sep.join(parts[: i + 1])
            parent.setdefault(node, sep.join(parts[:i]) if i else None)
    return parent


def from_pairs(pairs: Iterable[tuple], where: str = "hierarchy") -> dict[str, str | None]:
    """node -> parent from (node, parent) pairs (parent None or empty: a root; a parent never
    listed as a node becomes a root). A node listed twice with two parents is refused."""
    parent: dict[str, str | None] = {}
    for node, par in pairs:
        if node is None or not str(node).strip():
            raise HierarchyError(f"{where}: a node is empty")
        node = str(node)
        par = None if par is None or not str(par).strip() else str(par)
        if node in parent and parent[node] != par:
            raise HierarchyError(f"{where}: node {node!r} has two parents, {parent[node]!r} and {par!r}")
        parent[node] = par
    for par in list(parent.values()):
        if par is not None and par not in parent:
            parent[par] = None
    check_tree(parent, where)
    return parent


# ---- reading and writing a workspace's table ------------------------------------------------
def _build(dataset: str, rows: list[dict]) -> Hierarchy | None:
    if not rows:
        return None
    columns = sorted({r["images_column"] for r in rows})
    if len(columns) != 1:
        raise HierarchyError(
            f"table {TABLE}, dataset {dataset!r}: column names {columns} differ (one per dataset)"
        )
    parent = {r["node"]: r["parent"] for r in rows}
    names = {r["node"]: r["name"] for r in rows if r.get("name")}
    return Hierarchy(dataset, columns[0], parent, names)


def read(db, dataset: str) -> Hierarchy | None:
    """The hierarchy of `dataset` from a WorkspaceDB (None: it has none)."""
    if not db.has(TABLE):
        return None
    name = "name" if "name" in db.columns(TABLE) else "NULL AS name"
    df = db.query(
        f"SELECT images_column, node, parent, {name} FROM {TABLE} WHERE dataset = $ds ORDER BY node",
        {"ds": dataset},
    )
    rows = [
        {k: (None if v != v else v) for k, v in r.items()}  # NaN (a null in pandas) -> None
        for r in df.to_dict("records")
    ]
    return _build(dataset, rows)


def load(ws, dataset: str) -> Hierarchy | None:
    """The hierarchy of `dataset` from a Workspace (None: it has none)."""
    if not ws.has(TABLE, dataset=dataset):
        return None
    t = ws.read(TABLE, dataset=dataset)
    rows = t.to_pylist()
    for r in rows:
        r.setdefault("name", None)
    return _build(dataset, rows)


def write(ws, h: Hierarchy, values: Iterable | None = None) -> int:
    """Write `h` as the dataset's partition of `label_hierarchy` (atomically, replacing an
    earlier one); `values`, the images' column, are checked to be nodes first. -> rows."""
    import pyarrow as pa

    if values is not None:
        bad = missing_values(h.parent, values)
        if bad:
            more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
            raise HierarchyError(
                f"table {TABLE}, dataset {h.dataset!r}: value(s) {', '.join(map(repr, bad[:3]))}{more} "
                f"of images.{h.column} are not nodes of the hierarchy"
            )
    rows = h.rows()
    fields = schema.arrow_schema(TABLE, partition=False)
    table = pa.Table.from_pylist(rows, schema=fields)
    ws.write(TABLE, table, dataset=h.dataset)
    return len(rows)


def remove(ws, dataset: str) -> bool:
    """Drop the dataset's hierarchy (a re-import without one); True when there was one."""
    if not ws.has(TABLE, dataset=dataset):
        return False
    ws.remove_partition(TABLE, dataset=dataset)
    return True


def image_values(ws, dataset: str, column: str) -> list:
    """The values of images.`column` for the images of `dataset` (a clear error when the
    dataset or the column is missing)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = ws.table_path("images")
    names = pq.read_schema(path).names
    if column not in names:
        raise HierarchyError(f"{path}: images has no column {column!r} (columns: {', '.join(names)})")
    t = pq.read_table(path, columns=["dataset", column])
    t = t.filter(pc.equal(t["dataset"], dataset))
    if t.num_rows == 0:
        raise HierarchyError(f"{path}: no image of dataset {dataset!r}")
    return [None if v is None else str(v) for v in t[column].to_pylist()]


def write_from_paths(ws, dataset: str, column: str, sep: str = SEPARATOR) -> Hierarchy:
    """The tree that images.`column`'s paths spell for `dataset` (`from_paths`), written as its
    `label_hierarchy` partition; reads `images` only and writes nothing else."""
    values = image_values(ws, dataset, column)
    h = Hierarchy(dataset, column, from_paths(values, sep))
    write(ws, h, values)
    return h
