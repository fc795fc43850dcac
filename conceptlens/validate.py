"""Check a workspace against the format in `schema.py`: layout, shapes, values and files.

`validate` never writes and never raises: a check that fails unexpectedly becomes a
Problem naming its file. It imports only numpy, pyarrow, PIL and the standard library
because the dashboard runs it with nothing but requirements.txt installed.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import schema
from . import selections as S
from .hierarchy import tree_problems
from .remote import FSSPEC_NO_RANGES, NO_RANGES, RemoteWorkspace
from .workspace import Workspace, WorkspaceError, parse_partition, partition_value

META = Workspace.META
META_FIELDS = ("schema_version", "name", "description", "created", "provenance")
# Undecodable thumbnails are reported one by one up to this many, then summed up.
MAX_IMAGE_PROBLEMS = 100
# A path that starts at a root or a drive (`/x`, `\\x`, `C:/x`, `C:\\x`).
PACKAGE_PREFIX = "pypi:"  # models.packages.PREFIX (validate imports no model code)
_ABSOLUTE = re.compile(r"[/\\]|[A-Za-z]:[/\\]")
_FILE, _ROW = "__file", "__row"  # bookkeeping columns: which file and row a value came from


@dataclass(frozen=True)
class Problem:
    file: str  # path relative to the workspace
    table: str
    column: str | None
    message: str
    example: str | None = None

    def __str__(self) -> str:
        where = f"{self.file} (table {self.table}"
        where += f", column {self.column})" if self.column else ")"
        s = f"{where}: {self.message}"
        if self.example:
            s += f"; example: {self.example}"
        return s


def validate(
    root: str | os.PathLike, deep: bool = True, tables: Iterable[str] | None = None
) -> list[Problem]:
    """Every problem of the workspace at `root` (an empty list means valid).

    `deep=False` is the dashboard's check on open: it reads no embedding and decodes no
    image. `tables` restricts the report to those tables (and "workspace.json"); the
    tables they reference are read for their keys, but their own problems are not
    reported, so a page whose tables are sound can render next to a broken one.
    """
    try:
        return Validator(Path(root), deep, tables).run()
    except Exception as e:  # a bug in a check must not take the dashboard down
        return [Problem(".", "workspace", None, f"validation stopped unexpectedly: {why_of(e)}")]


def format_problems(problems: list[Problem]) -> str:
    return "\n".join(f"- {p}" for p in problems)


def summary_json(problems: list[Problem]) -> str:
    return json.dumps([dataclasses.asdict(p) for p in problems], indent=2)


def why_of(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__


@dataclass
class _Loaded:
    """One table in memory: every file's schema columns (minus embeddings), typed as the
    schema says, plus partition columns and where each row came from."""

    spec: schema.Table
    table: pa.Table
    files: list[str]
    # Columns missing or mistyped in some file: already reported, skipped by later checks.
    skipped: set[str]
    unread: set[int]  # indices of files that could not be read (already reported)


class Validator:
    """One check of a workspace (`validate`), its problems in `problems`; `remote.py` runs
    its workspace.json check on a URL."""

    def __init__(self, root: Path, deep: bool, tables: Iterable[str] | None):
        self.root, self.deep = root, deep
        self.problems: list[Problem] = []
        self.unknown: list[str] = []
        if tables is None:
            self.selected = {META} | set(schema.TABLES_BY_NAME)
        else:
            names = {tables} if isinstance(tables, str) else set(tables)
            self.unknown = sorted(n for n in names if n != META and n not in schema.TABLES_BY_NAME)
            self.selected = names - set(self.unknown)
        self._listed: dict[str, list[tuple[str, dict]] | None] = {}
        self._loaded: dict[str, _Loaded | None] = {}
        self._dirs: dict[str, tuple[str | None, dict | None]] = {}

    # ---- plumbing --------------------------------------------------------
    def report(
        self, file: str, table: str, column: str | None, message: str, example: str | None = None
    ) -> None:
        if table in self.selected:
            self.problems.append(Problem(file, table, column, message, example))

    def guarded(self, file: str, table: str, fn, *args):
        try:
            return fn(*args)
        except Exception as e:
            self.report(file, table, None, f"could not be checked: {why_of(e)}")
            return None

    def run(self) -> list[Problem]:
        for name in self.unknown:
            self.problems.append(Problem(".", name, None, "no such table in the workspace format"))
        if not self.root.is_dir():
            what = "is not a directory" if self.root.exists() else "does not exist (not a directory)"
            self.problems.append(Problem(".", "workspace", None, f"{self.root} {what}"))
            return self.problems
        if not self.check_meta():
            return self.problems
        for spec in schema.TABLES:
            if spec.name in self.selected:
                self.guarded(spec.path, spec.name, self.check_table, spec)
        return self.problems

    # ---- workspace.json --------------------------------------------------
    def check_meta(self) -> bool:
        """Report workspace.json's problems; False when its version makes the tables unreadable.

        Problems that make the whole workspace unreadable are reported whatever `tables`
        asks for: no page can trust its tables then.
        """

        def blocking(message, column=None):
            self.problems.append(Problem(META, META, column, message))

        try:
            meta = json.loads((self.root / META).read_bytes())
        except FileNotFoundError:
            blocking(f"not found: is {self.root} a workspace?")
            return True
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            blocking(f"invalid JSON ({e})")
            return True
        except OSError as e:
            blocking(f"cannot be read ({why_of(e)})")
            return True
        if not isinstance(meta, dict):
            blocking("must hold a JSON object")
            return True
        for field in META_FIELDS:
            if field not in meta:
                self.report(META, META, field, "required field is missing")
        for field in ("name", "description", "created"):
            if field in meta and not isinstance(meta[field], str):
                self.report(META, META, field, f"must be a string, got {meta[field]!r}")
        created = meta.get("created")
        if isinstance(created, str):
            try:
                _dt.datetime.fromisoformat(created)
            except ValueError:
                self.report(META, META, "created", f"{created!r} is not an ISO-8601 time")
        if "provenance" in meta and not isinstance(meta["provenance"], dict):
            self.report(META, META, "provenance", "must be a JSON object")
        if "schema_version" not in meta:
            return True
        v = meta["schema_version"]
        if not isinstance(v, str) or not re.fullmatch(r"\d+\.\d+", v):
            blocking(
                f"unreadable version {v!r}: expected MAJOR.MINOR, e.g. {schema.SCHEMA_VERSION!r}",
                "schema_version",
            )
            return False
        major = v.split(".")[0]
        if major == "1":
            blocking(
                f"format {v}: run `conceptlens migrate --workspace {self.root}` to upgrade it to "
                f"{schema.SCHEMA_VERSION}",
                "schema_version",
            )
            return False
        if major != schema.SCHEMA_MAJOR:
            blocking(
                f"version {v} is not readable by this ConceptLens (reads {schema.SCHEMA_MAJOR}.x)",
                "schema_version",
            )
            return False
        return True

    # ---- layout ----------------------------------------------------------
    def listed(self, spec: schema.Table) -> list[tuple[str, dict]] | None:
        """The table's files with their partition values (None: the table is absent)."""
        if spec.name not in self._listed:
            self._listed[spec.name] = None
            self._listed[spec.name] = self.guarded(spec.path, spec.name, self._list, spec)
        return self._listed[spec.name]

    def _list(self, spec: schema.Table) -> list[tuple[str, dict]] | None:
        base = self.root / spec.path
        if not os.path.lexists(base):
            if spec.required:
                self.report(spec.path, spec.name, None, "required table is missing")
            return None
        if not spec.partitioned:
            if base.is_dir():
                self.report(spec.path, spec.name, None, "is a folder; this table is one Parquet file")
                return None
            return [(spec.path, {})]
        if not base.is_dir():
            self.report(
                spec.path,
                spec.name,
                None,
                f"is a file; this table is a folder of partitions ({spec.pattern})",
            )
            return None
        out: list[tuple[str, dict]] = []
        self._walk(spec, base, spec.path, 0, {}, out)
        return out

    def _walk(self, spec, folder: Path, rel: str, depth: int, values: dict, out: list) -> None:
        # One listing per folder, no stat per file: this runs on every dashboard open.
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        levels = ", ".join(spec.partition)
        for e in entries:
            r = f"{rel}/{e.name}"
            if depth < len(spec.partition):
                col = spec.partition[depth]
                if not e.is_dir():
                    self.report(
                        r,
                        spec.name,
                        col,
                        f"a file where a partition folder {col}=VALUE is "
                        f"expected (partitioned by {levels}: {spec.pattern})",
                    )
                    continue
                try:
                    value = _parse_folder(spec, col, e.name)
                except (ValueError, WorkspaceError) as err:
                    self.report(r, spec.name, col, f"partition folder name does not parse: {err}")
                    continue
                self._walk(spec, Path(e.path), r, depth + 1, {**values, col: value}, out)
            elif e.is_dir():
                self.report(
                    r,
                    spec.name,
                    None,
                    f"unexpected folder: this table has {len(spec.partition)} "
                    f"partition level(s) ({levels}), then its Parquet files",
                )
            elif e.name.startswith(".") or not e.name.endswith(".parquet"):
                self.report(
                    r,
                    spec.name,
                    None,
                    "stray file in a partition folder: only *.parquet files "
                    "belong here (a temporary file left by an interrupted write?)",
                )
            else:
                out.append((r, values))

    # ---- reading ---------------------------------------------------------
    def loaded(self, name: str) -> _Loaded | None:
        if name not in self._loaded:
            self._loaded[name] = None  # a failed load is not retried
            spec = schema.TABLES_BY_NAME[name]
            self._loaded[name] = self.guarded(spec.path, name, self._load, spec)
        return self._loaded[name]

    def _load(self, spec: schema.Table) -> _Loaded | None:
        files = self.listed(spec)
        if files is None:
            return None
        skipped: set[str] = set()
        unread: set[int] = set()
        parts = []
        for i, (rel, values) in enumerate(files):
            t = self.guarded(rel, spec.name, self._read_file, spec, rel, values, skipped)
            if t is None:
                unread.add(i)
                continue
            for c in spec.partition:
                typ = schema.arrow_type(spec.column(c).type)
                t = t.append_column(c, pa.repeat(pa.scalar(values[c], typ), t.num_rows))
            t = t.append_column(_FILE, pa.array(np.full(t.num_rows, i, np.int32)))
            parts.append(t.append_column(_ROW, pa.array(np.arange(t.num_rows, dtype=np.int64))))
        if parts:
            table = pa.concat_tables(parts, promote_options="default")
        else:
            table = pa.schema([pa.field(_FILE, pa.int32()), pa.field(_ROW, pa.int64())]).empty_table()
        return _Loaded(spec, table, [f for f, _ in files], skipped, unread)

    def _read_file(self, spec: schema.Table, rel: str, values: dict, skipped: set) -> pa.Table | None:
        try:
            pf = pq.ParquetFile(self.root / rel)
            fields = pf.schema_arrow
        except Exception as e:
            self.report(rel, spec.name, None, f"cannot be read as Parquet ({why_of(e)})")
            return None
        too_wide = extra_columns_problem(spec, fields.names)
        if too_wide:  # from the footer alone: no column of such a file is read
            self.report(rel, spec.name, None, too_wide)
            return None
        for c in spec.partition:
            if c in fields.names:
                held = sorted({str(v) for v in pf.read(columns=[c])[c].to_pylist()})
                clash = [v for v in held if v != str(values[c])]
                self.report(
                    rel,
                    spec.name,
                    c,
                    f"partition column {c} is also stored inside the file; it belongs only in "
                    f"the folder name {c}={values[c]}"
                    + (f", and the file holds other values: {clash[:3]}" if clash else ""),
                )
        keep = []
        for col in spec.file_columns:
            why = column_type_problem(col, fields)
            if why:
                if why != ABSENT or col.required:
                    self.report(rel, spec.name, col.name, why)
                skipped.add(col.name)
            elif not (spec.name == "features" and col.type == schema.FLOAT_LIST):
                keep.append(col)  # (embeddings are streamed by the deep check)
        try:
            t = pf.read(columns=[c.name for c in keep]).select([c.name for c in keep])
        except Exception as e:
            self.report(rel, spec.name, None, f"cannot be read as Parquet ({why_of(e)})")
            return None
        # One Arrow type per column, so every partition concatenates.
        t = t.cast(pa.schema([pa.field(c.name, schema.arrow_type(c.type)) for c in keep]))
        for col in keep:
            if not col.nullable and t[col.name].null_count:
                bad = pc.is_null(t[col.name])
                i = _first(bad)
                self.report(
                    rel,
                    spec.name,
                    col.name,
                    f"{t[col.name].null_count} null value(s) in a non-nullable column",
                    _example(t, i, spec, (), i),
                )
        return t

    # ---- one table -------------------------------------------------------
    def check_table(self, spec: schema.Table) -> None:
        ld = self.loaded(spec.name)
        if ld is not None:
            for check in (self.check_key, self.check_references, self.check_values, self.check_paths):
                self.guarded(spec.path, spec.name, check, ld)
        if spec.name == "features":
            self.check_features(ld)
        if spec.name == "cluster_metrics" and ld is not None:
            self.guarded(spec.path, spec.name, self.check_sizes, ld)

    def check_key(self, ld: _Loaded) -> None:
        spec, t = ld.spec, ld.table
        key = list(spec.key)
        if ld.skipped & set(key) or not set(key) <= set(t.column_names) or t.num_rows == 0:
            return
        # Rows with a null key part were reported as nulls; they are not duplicates.
        if any(t[k].null_count for k in key):  # a filter copies every column: only when needed
            t = t.filter(functools.reduce(pc.and_, [pc.is_valid(t[k]) for k in key]))
        if self._surely_unique(ld, t, key) or _codes_unique(t, key):
            return
        counts = t.group_by(key).aggregate([([], "count_all")])
        dup = counts.filter(pc.greater(counts["count_all"], 1))
        if dup.num_rows == 0:
            return
        first = dup.slice(0, 1).to_pylist()[0]
        rows = t.filter(functools.reduce(pc.and_, [pc.equal(t[k], first[k]) for k in key])).slice(0, 2)
        (f1, f2), (r1, r2) = rows[_FILE].to_pylist(), rows[_ROW].to_pylist()
        again = f"rows {r1} and {r2}" if f1 == f2 else f"row {r1}, and {ld.files[f2]} row {r2}"
        # Partition values are in the file names; name the columns that repeat inside them.
        shown = [k for k in key if k not in spec.partition] or key
        ex = ", ".join(f"{k}={first[k]!r}" for k in shown) + f" ({again})"
        self.report(
            ld.files[f1],
            spec.name,
            ",".join(shown),
            f"key ({', '.join(key)}) is not unique: {dup.num_rows} value(s) repeat",
            ex,
        )

    @staticmethod
    def _surely_unique(ld: _Loaded, t: pa.Table, key: list[str]) -> bool:
        """True when no key repeats, found without hashing the partition values of every
        row (1.4M strings at 28 checkpoints x 50,000 images, most of a page's cold start):
        rows of different partition folders differ in them, so when each folder is one
        file and one key column is left, that column's distinct values per file decide.
        False: the full check must say."""
        inner = [k for k in key if k not in ld.spec.partition]
        folders = [f.rsplit("/", 1)[0] for f in ld.files]
        if len(inner) != 1 or not ld.spec.partition or len(set(folders)) != len(folders):
            return False
        # Files were concatenated in order: each one's rows are a slice.
        file_of = t[_FILE].to_numpy()
        bounds = np.flatnonzero(np.diff(file_of)) + 1
        col = t[inner[0]]
        for s, e in zip(np.r_[0, bounds], np.r_[bounds, len(file_of)]):
            if pc.count_distinct(col.slice(int(s), int(e - s))).as_py() != e - s:
                return False
        return True

    def check_references(self, ld: _Loaded) -> None:
        spec, t = ld.spec, ld.table
        for col in spec.columns:
            if not col.references or col.name in ld.skipped:
                continue
            if col.name not in t.column_names and col.name not in spec.partition:
                continue
            ref_table, ref_col = col.references.split(".")
            target = self.loaded(ref_table)
            if target is None or ref_col in target.skipped or ref_col not in target.table.column_names:
                continue  # the referenced table's own problems say why
            domain = pc.unique(target.table[ref_col].combine_chunks())
            if col.pseudo_references:
                domain = pa.concat_arrays([domain, self._pseudo_ids(*col.pseudo_references)])
            if col.name in spec.partition:
                # A partition is one folder: report the folder, once.
                known = set(domain.to_pylist())
                seen = set()
                for rel, values in self.listed(spec) or []:
                    v = values[col.name]
                    if v in known or v in seen:
                        continue
                    seen.add(v)
                    folder = rel.rsplit("/", len(spec.partition) - spec.partition.index(col.name))[0]
                    self.report(
                        folder,
                        spec.name,
                        col.name,
                        f"partition {col.name}={v} has no row in {ref_table} ({col.references})",
                        f"{col.name}={v!r}",
                    )
                continue
            if col.type == schema.STRING_LIST:
                # Every element of a list refers; a row is reported once.
                lists = t[col.name].combine_chunks()
                bad = pc.invert(pc.is_in(pc.list_flatten(lists), value_set=domain))
                rows = np.unique(
                    pc.list_parent_indices(lists).to_numpy()[
                        np.asarray(pc.fill_null(bad, False).to_numpy(zero_copy_only=False))
                    ]
                )
                if len(rows):
                    i = int(rows[0])
                    self.report(
                        ld.files[t[_FILE][i].as_py()],
                        spec.name,
                        col.name,
                        f"{len(rows)} row(s) hold value(s) not found in {col.references}",
                        _example(t, i, spec, (col.name,)),
                    )
                continue
            # A null foreign key refers to nothing: only non-nullable columns report it (as a null).
            missing = pc.and_(pc.is_valid(t[col.name]), pc.invert(pc.is_in(t[col.name], value_set=domain)))
            n = pc.sum(missing).as_py() or 0
            if n:
                i = _first(missing)
                self.report(
                    ld.files[t[_FILE][i].as_py()],
                    spec.name,
                    col.name,
                    f"{n} value(s) not found in {col.references}",
                    _example(t, i, spec, (col.name,)),
                )

    def _pseudo_ids(self, prefix: str, ref: str) -> pa.Array:
        """`prefix + X` for every X of `ref` (none when that table is absent or broken)."""
        table, column = ref.split(".")
        target = self.loaded(table)
        if target is None or column in target.skipped or column not in target.table.column_names:
            return pa.array([], pa.string())
        values = pc.unique(target.table[column].combine_chunks()).drop_null()
        return pc.binary_join_element_wise(
            pa.array([prefix] * len(values), pa.string()), values.cast(pa.string()), ""
        )

    def check_values(self, ld: _Loaded) -> None:
        spec, t = ld.spec, ld.table
        have = set(t.column_names) - ld.skipped

        def flag(col, bad, message, shown=()):
            bad = pc.fill_null(bad, False)
            n = pc.sum(bad).as_py() or 0
            if n:
                i = _first(bad)
                self.report(
                    ld.files[t[_FILE][i].as_py()],
                    spec.name,
                    col.name,
                    f"{n} value(s) {message}",
                    _example(t, i, spec, (col.name, *shown)),
                )

        for col in spec.columns:
            if col.name in have and col.finite and col.type == schema.FLOAT_LIST:
                lists = t[col.name].combine_chunks()
                bad = pc.invert(pc.is_finite(pc.list_flatten(lists)))
                rows = np.zeros(t.num_rows, bool)
                rows[pc.list_parent_indices(lists).to_numpy()[bad.to_numpy(zero_copy_only=False)]] = True
                flag(col, pa.array(rows), "hold NaN or infinity")
            if col.name not in have or col.type not in (schema.INT, schema.FLOAT, schema.STRING):
                continue
            v = t[col.name]
            if col.bounds:
                lo, hi = col.bounds
                ok = pc.is_valid(v) if lo is None else pc.greater_equal(v, lo)
                if hi is not None:
                    ok = pc.and_(ok, pc.less_equal(v, hi))
                text = (
                    f"[{lo:g}, {hi:g}]"
                    if lo is not None and hi is not None
                    else (f">= {lo:g}" if lo is not None else f"<= {hi:g}")
                )
                flag(col, pc.invert(ok), f"not {text}" if text[0] in "<>" else f"outside {text}")
            if col.positive:
                flag(col, pc.invert(pc.greater(v, 0)), "not > 0")
            if col.finite and col.type == schema.FLOAT:
                flag(col, pc.invert(pc.is_finite(v)), "are NaN or infinite")
            if col.allowed:
                allowed = pa.array(col.allowed, pa.string())
                flag(
                    col,
                    pc.and_(pc.is_valid(v), pc.invert(pc.is_in(v, value_set=allowed))),
                    f"not one of {', '.join(col.allowed)}",
                )
            if col.less_than in have:
                flag(col, pc.greater_equal(v, t[col.less_than]), f"not < {col.less_than}", (col.less_than,))
            for other in col.at_most:
                if other in have:
                    flag(col, pc.greater(v, t[other]), f"greater than {other}", (other,))
            if col.differs_from in have:
                flag(
                    col, pc.equal(v, t[col.differs_from]), f"equal to {col.differs_from}", (col.differs_from,)
                )
            if col.present_with in have:
                flag(
                    col,
                    pc.and_(pc.is_null(v), pc.is_valid(t[col.present_with])),
                    f"null where {col.present_with} is not null",
                    (col.present_with,),
                )
        if spec.name == "checkpoints" and {"concept_names", "concept_dim", "feature_dim"} <= have:
            # Concept-major features: k learnt concepts of concept_dim dimensions each.
            k = pc.list_value_length(t["concept_names"])
            flag(
                spec.column("concept_dim"),
                pc.not_equal(pc.multiply(k, t["concept_dim"]), t["feature_dim"]),
                "times the number of concept_names differ from feature_dim",
                ("feature_dim", "concept_names"),
            )
            # The value rules above skip list columns.
            flag(
                spec.column("concept_names"),
                pc.and_(pc.is_null(t["concept_names"]), pc.is_valid(t["concept_dim"])),
                "null where concept_dim is not null",
                ("concept_dim",),
            )

        if spec.name == "selections":
            self._check_selections(ld, flag, have)
        if spec.name == "label_hierarchy":
            self._check_hierarchy(ld, flag, have)

    def _check_hierarchy(self, ld: _Loaded, flag, have: set) -> None:
        """Label hierarchies (conceptlens/hierarchy.py): one images column per dataset, every
        parent a node of the same dataset, no cycle, and every image's value in that column
        a node."""
        spec, t = ld.spec, ld.table
        if not {"dataset", "node", "parent", "images_column"} <= have:
            return
        ds, nodes, parents = (t[c].to_pylist() for c in ("dataset", "node", "parent"))
        cols = t["images_column"].to_pylist()
        by_ds: dict[str, dict] = {}
        for d, n, p in zip(ds, nodes, parents):
            by_ds.setdefault(d, {})[n] = p
        first_col: dict[str, str] = {}
        for d, c in zip(ds, cols):
            first_col.setdefault(d, c)
        flag(
            spec.column("images_column"),
            pa.array([c != first_col[d] for d, c in zip(ds, cols)]),
            "differ from the dataset's first row (one images column per dataset)",
        )
        flag(
            spec.column("parent"),
            pa.array([p is not None and p not in by_ds[d] for d, p in zip(ds, parents)]),
            "are not nodes of the same dataset",
        )
        file_of = {d: ld.files[f] for d, f in zip(ds, t[_FILE].to_pylist())}
        for d, parent in sorted(by_ds.items()):
            cycles = [m for m in tree_problems(parent) if m.startswith("cycle")]
            for m in cycles:
                self.report(file_of[d], spec.name, "parent", f"dataset {d!r}: {m}")
        images = self.loaded("images")
        if images is None or "dataset" in images.skipped or not images.files:
            return
        names = pq.read_schema(self.root / images.files[0]).names
        for d, col in sorted(first_col.items()):
            if col not in names:
                self.report(
                    file_of[d],
                    spec.name,
                    "images_column",
                    f"dataset {d!r}: images has no column {col!r}",
                    f"images_column={col!r}",
                )
                continue
            img = pq.read_table(self.root / images.files[0], columns=["dataset", col])
            values = img.filter(pc.equal(img["dataset"], d))[col].to_pylist()
            off = [str(v) for v in values if v is not None and str(v) not in by_ds[d]]
            if off:
                bad = sorted(set(off))
                more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
                self.report(
                    file_of[d],
                    spec.name,
                    "node",
                    f"dataset {d!r}: {len(off)} image(s) hold a value of images.{col} that is not a "
                    f"node of the hierarchy: {', '.join(map(repr, bad[:3]))}{more}",
                )

    def _check_selections(self, ld: _Loaded, flag, have: set) -> None:
        """Saved selections (conceptlens/selections.py): names as `save` accepts them, each id
        once and an image of the selection's own dataset, n_images its count."""
        spec, t = ld.spec, ld.table

        def rule(check, value) -> bool:
            try:
                check(value)
            except S.SelectionError:
                return True
            return False

        if "name" in have:
            bad = [v is not None and rule(S.check_name, v) for v in t["name"].to_pylist()]
            flag(spec.column("name"), pa.array(bad), f"are not 1 to {S.MAX_NAME} printable characters")
        if "origin" in have:
            bad = [v is not None and rule(S.check_origin, v) for v in t["origin"].to_pylist()]
            flag(spec.column("origin"), pa.array(bad), f"are empty or longer than {S.MAX_ORIGIN} characters")
        if "image_ids" not in have:
            return
        lists = t["image_ids"].to_pylist()
        ids_col = spec.column("image_ids")
        if "n_images" in have:
            flag(
                spec.column("n_images"),
                pa.array(
                    [
                        n is not None and ids is not None and n != len(ids)
                        for n, ids in zip(t["n_images"].to_pylist(), lists)
                    ]
                ),
                "differ from the number of image_ids",
            )
        flag(
            ids_col,
            pa.array([ids is not None and len(set(ids)) != len(ids) for ids in lists]),
            "repeat an id",
        )
        images = self.loaded("images")
        if images is None or not {"image_id", "dataset"} <= set(images.table.column_names) - images.skipped:
            return
        of = {}
        for d, i in zip(images.table["dataset"].to_pylist(), images.table["image_id"].to_pylist()):
            of.setdefault(d, set()).add(i)
        flag(
            ids_col,
            pa.array(
                [
                    ids is not None and not set(ids) <= of.get(d, set())
                    for d, ids in zip(t["dataset"].to_pylist(), lists)
                ]
            ),
            "hold ids that are not images of the selection's dataset",
        )

    # ---- files named by a table -----------------------------------------
    def check_paths(self, ld: _Loaded) -> None:
        spec, t = ld.spec, ld.table
        for col in spec.columns:
            if not col.is_path or col.name not in t.column_names or col.name in ld.skipped:
                continue
            bad: dict[str, list[str]] = {}
            ok = []
            # Unique values: thumbnails may be shared, and each path is checked once.
            for v in pc.unique(t[col.name].combine_chunks()).drop_null().to_pylist():
                if col.absolute_ok and v and (_ABSOLUTE.match(v) or v.startswith(PACKAGE_PREFIX)):
                    ok.append(v)  # a file outside the workspace (or a package's), checked where it is used
                    continue
                why = self._path_problem(v)
                if why:
                    bad.setdefault(why, []).append(v)
                else:
                    ok.append(v)
            for why, values in bad.items():
                mask = pc.is_in(t[col.name], value_set=pa.array(values, pa.string()))
                i = _first(mask)
                self.report(
                    ld.files[t[_FILE][i].as_py()],
                    spec.name,
                    col.name,
                    f"{len(values)} path(s) {why}",
                    _example(t, i, spec, (col.name,)),
                )
            if self.deep and spec.name == "images" and col.name == "thumbnail":
                self._decode_images(ld, ok)

    def _path_problem(self, rel: str) -> str | None:
        # Plain string operations: this runs once per thumbnail (50,000 in a scale workspace).
        if rel == "" or _ABSOLUTE.match(rel):
            return "are not relative to the workspace (absolute or empty)"
        head, _, name = rel.rpartition("/")
        parent = head.rstrip("/") or head  # as os.path.split: `a//b` is in `a`
        folder, entries = self._listing(parent)
        if folder == "outside":
            return "leave the workspace (through `..` or a symlinked folder)"
        if name in ("", ".", ".."):
            return "do not name a file"
        entry = entries.get(name) if entries is not None else None
        if entry is None:
            return "do not exist"
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if not _is_inside(target, self.root_real):
                return "are symlinks leading outside the workspace"
            return None if os.path.isfile(target) else "are broken symlinks or not files"
        return None if entry.is_file(follow_symlinks=False) else "are not files"

    @functools.cached_property
    def root_real(self) -> str:
        return os.path.realpath(self.root)

    def _listing(self, parent: str) -> tuple[str | None, dict | None]:
        """(`outside` or None, {name: DirEntry} or None) for one folder, listed once."""
        if parent not in self._dirs:
            real = os.path.realpath(self.root / parent)
            if not _is_inside(real, self.root_real):
                self._dirs[parent] = ("outside", None)
            else:
                try:
                    with os.scandir(real) as it:
                        self._dirs[parent] = (None, {e.name: e for e in it})
                except OSError:
                    self._dirs[parent] = (None, None)
        return self._dirs[parent]

    def _decode_images(self, ld: _Loaded, paths: list[str]) -> None:

        t, failed = ld.table, []
        for rel in paths:
            try:
                with open_thumbnail(self.root / rel) as im:
                    im.load()
            except Exception as e:
                failed.append((rel, e))
        for rel, e in failed[:MAX_IMAGE_PROBLEMS]:
            i = _first(pc.equal(t["thumbnail"], rel))
            why = str(e) if isinstance(e, ThumbnailTooLarge) else f"does not decode ({why_of(e)})"
            self.report(
                ld.files[t[_FILE][i].as_py()],
                "images",
                "thumbnail",
                f"image file {why.replace(str(self.root) + os.sep, '')}",
                _example(t, i, ld.spec, ("thumbnail",)),
            )
        if len(failed) > MAX_IMAGE_PROBLEMS:
            self.report(
                ld.files[0],
                "images",
                "thumbnail",
                f"{len(failed) - MAX_IMAGE_PROBLEMS} more image file(s) do not decode or are too large",
            )

    # ---- checks across tables -------------------------------------------
    def _checkpoints(self) -> dict[str, dict]:
        ck = self.loaded("checkpoints")
        if ck is None or "checkpoint_id" in ck.skipped or "checkpoint_id" not in ck.table.column_names:
            return {}
        cols = [
            c for c in ("checkpoint_id", "feature_dim") if c in ck.table.column_names and c not in ck.skipped
        ]
        return {r["checkpoint_id"]: r for r in ck.table.select(cols).to_pylist() if r["checkpoint_id"]}

    def check_features(self, ld: _Loaded | None) -> None:
        """Features partitions and checkpoint rows match one to one; embeddings (deep)."""
        ckpts = self.guarded("checkpoints.parquet", "features", self._checkpoints) or {}
        present = {v["checkpoint_id"] for _, v in self.listed(schema.TABLES_BY_NAME["features"]) or []}
        for cid in sorted(set(ckpts) - present):
            self.report(
                f"features/checkpoint_id={cid}",
                "features",
                "checkpoint_id",
                "no features partition for this row of checkpoints.parquet",
                f"checkpoint_id={cid!r}",
            )
        if not self.deep or ld is None:
            return
        for i, rel in enumerate(ld.files):
            if i in ld.unread:
                continue
            cid = rel.split("/")[1].partition("=")[2]
            dim = ckpts.get(cid, {}).get("feature_dim")
            self.guarded(rel, "features", self._check_embeddings, ld, i, rel, dim)

    def _check_embeddings(self, ld: _Loaded, i: int, rel: str, dim: int | None) -> None:
        """Stream every embedding of one file in batches: nulls, length, NaN/infinity."""
        pf = pq.ParquetFile(self.root / rel)
        names = pf.schema_arrow.names
        if (
            "embedding" not in names
            or schema.logical_type(pf.schema_arrow.field("embedding").type) != schema.FLOAT_LIST
        ):
            return  # reported when the file was read
        first = {"null": None, "length": None, "finite": None}
        count = dict.fromkeys(first, 0)
        row0 = 0
        for batch in pf.iter_batches(columns=["embedding"], batch_size=8192):
            emb = batch.column(0)
            lens = pc.fill_null(pc.list_value_length(emb), 0).to_numpy(zero_copy_only=False)
            checks = {"null": pc.is_null(emb).to_numpy(zero_copy_only=False)}
            if dim is not None:
                checks["length"] = ~checks["null"] & (lens != dim)
            flat = pc.list_flatten(emb).to_numpy(zero_copy_only=False)
            finite = np.isfinite(flat)
            rows = np.zeros(len(emb), bool)
            if not finite.all():
                rows[np.repeat(np.arange(len(emb)), lens)[~finite]] = True
            checks["finite"] = rows
            for what, bad in checks.items():
                where = np.flatnonzero(bad)
                count[what] += len(where)
                if len(where) and first[what] is None:
                    r = int(where[0])
                    first[what] = (row0 + r, int(lens[r]))
            row0 += batch.num_rows
        t = ld.table.filter(pc.equal(ld.table[_FILE], i))
        messages = {
            "null": "null embedding(s) in a non-nullable column",
            "length": f"embedding(s) do not have length feature_dim={dim}",
            "finite": "embedding(s) contain NaN or infinity",
        }
        for what, n in count.items():
            if n:
                row, length = first[what]
                ex = _example(t, _first(pc.equal(t[_ROW], row)), ld.spec, ())
                if what == "length":
                    ex += f", length {length}"
                self.report(rel, "features", "embedding", f"{n} {messages[what]}", ex)

    def check_sizes(self, ld: _Loaded) -> None:
        """Cluster sizes add up to the images clustered in the matching clusters partition."""
        t = ld.table
        if "size" in ld.skipped or "size" not in t.column_names or t.num_rows == 0:
            return
        n_images: dict[tuple, int] = {}
        for rel, v in self.listed(schema.TABLES_BY_NAME["clusters"]) or []:
            try:
                n = pq.ParquetFile(self.root / rel).metadata.num_rows  # the footer, not the data
            except Exception:
                continue  # reported with the clusters table
            key = (v["checkpoint_id"], v["k"])
            n_images[key] = n_images.get(key, 0) + n
        sums = t.group_by(["checkpoint_id", "k"]).aggregate([("size", "sum"), (_FILE, "min")])
        for r in sums.to_pylist():
            key = (r["checkpoint_id"], r["k"])
            if key in n_images and r["size_sum"] != n_images[key]:
                self.report(
                    ld.files[r[f"{_FILE}_min"]],
                    "cluster_metrics",
                    "size",
                    f"cluster sizes sum to {r['size_sum']} but clusters/checkpoint_id={key[0]}/"
                    f"k={key[1]} holds {n_images[key]} image(s)",
                    f"checkpoint_id={key[0]!r}, k={key[1]}",
                )


ABSENT = "required column is missing"  # or, for an optional column, only skipped


def column_type_problem(col: schema.Column, fields: pa.Schema) -> str | None:
    """Why a file with Arrow schema `fields` cannot give column `col`: `ABSENT` (also for
    an optional column, which is then skipped silently), a type mismatch, or None."""
    if col.name not in fields.names:
        return ABSENT
    typ = fields.field(col.name).type
    got = schema.logical_type(typ)
    if (
        got == col.type
        or (col.type == schema.FLOAT and got == schema.INT)
        or (pa.types.is_null(typ) and col.nullable)
    ):
        return None
    return f"has type {typ}, expected {col.type}"


def extra_columns_problem(spec: schema.Table, names: Iterable[str]) -> str | None:
    """A file holding more columns than its table's beyond the allowance, in words."""
    known = {c.name for c in spec.columns}
    extra = [n for n in names if n not in known]
    if len(extra) <= spec.max_extra_columns:
        return None
    return (
        f"holds {len(extra):,} columns that are not the table's (at most "
        f"{spec.max_extra_columns} allowed; e.g. {', '.join(map(repr, extra[:3]))}): not read"
    )


# ---- a remote workspace: the dashboard's check ---------------------------------------------------
# Here rather than in conceptlens.remote: a remote workspace is storage, which conceptlens.db
# opens; checking one needs the Validator, and remote importing this module closed a cycle
# (db -> remote -> validate -> selections -> db).
class _MetaOnly:
    """Enough of a path for the workspace.json check to read it from a URL."""

    def __init__(self, ws: RemoteWorkspace, rel: str = ""):
        self.ws, self.rel = ws, rel

    def __truediv__(self, rel: str):
        return _MetaOnly(self.ws, rel)

    def read_bytes(self) -> bytes:
        try:
            return self.ws.read_bytes(self.rel)
        except WorkspaceError as e:
            if "not found" in str(e):
                raise FileNotFoundError(str(e)) from None
            raise OSError(str(e)) from None

    def __str__(self) -> str:
        return self.ws.root


def validate_remote(url: str, tables, db=None) -> list:
    """The dashboard's check of a remote workspace: workspace.json as `validate` checks
    it, a server without Range requests, and of the `tables` asked for what `validate`
    would say of a missing required table, a missing or mistyped column or too many
    columns (from the Parquet footers, read only when DuckDB's view shows one), and the
    tables DuckDB could not open (`db.errors`). Rows are not read here."""
    ws = RemoteWorkspace(url)
    v = Validator(_MetaOnly(ws), deep=False, tables=tables)
    readable = v.check_meta()
    problems = list(v.problems)
    if not readable or any(p.table == ws.META and p.column is None for p in problems):
        return problems  # workspace.json unreadable: the tables are not looked at
    ranges = ws.range_problem()
    if ranges:
        return problems + [Problem(".", "workspace", None, ranges)]
    if db is None:
        return problems
    for name in sorted(v.selected - {ws.META}):
        spec = schema.TABLES_BY_NAME[name]
        if name not in db.tables and name not in db.errors:
            if spec.required:
                problems.append(Problem(spec.path, name, None, "required table is missing"))
            continue
        found = _footer_problems(ws, spec) if name in db.errors or _view_differs(db, spec) else []
        if found:
            problems += found
        elif name in db.errors:
            why = NO_RANGES if FSSPEC_NO_RANGES in db.errors[name] else db.errors[name]
            problems.append(Problem(spec.path, name, None, f"cannot be read: {why}"))
    return problems


def _view_differs(db, spec: schema.Table) -> bool:
    """Whether DuckDB's view of a table (its files' columns by name) lacks a required
    column, has one of another type, or too many columns: then its files are looked at."""
    cur = db.cursor()
    try:
        fields = cur.sql(f'SELECT * FROM "{spec.name}" LIMIT 0').to_arrow_table().schema
    finally:
        cur.close()
    fields = pa.schema([f for f in fields if f.name not in spec.partition])
    for col in spec.file_columns:
        why = column_type_problem(col, fields)
        if why and (why != ABSENT or col.required):
            return True
    return extra_columns_problem(spec, fields.names) is not None


def _footer_problems(ws: RemoteWorkspace, spec: schema.Table) -> list:
    """`validate`'s problems of each file's columns, from its Parquet footer (Range reads)."""
    out = []
    for url in ws.files(spec.name):
        rel = url[len(ws.root) + 1 :]
        try:
            with ws.fs.open(url, "rb") as f:
                fields = pq.ParquetFile(f).schema_arrow
        except Exception as e:
            why = NO_RANGES if FSSPEC_NO_RANGES in str(e) else why_of(e)
            out.append(Problem(rel, spec.name, None, f"cannot be read as Parquet ({why})"))
            continue
        wide = extra_columns_problem(spec, fields.names)
        if wide:
            out.append(Problem(rel, spec.name, None, wide))
            continue
        for col in spec.file_columns:
            why = column_type_problem(col, fields)
            if why and (why != ABSENT or col.required):
                out.append(Problem(rel, spec.name, col.name, why))
    return out


class ThumbnailTooLarge(ValueError):
    pass


def open_thumbnail(source):
    """PIL's `Image.open` of a thumbnail (path or file object), refused with a
    ThumbnailTooLarge naming its pixel count above schema.MAX_THUMBNAIL_PIXELS, before any
    pixel is decoded (and without PIL's DecompressionBombWarning)."""
    from PIL import Image  # local: off the dashboard's cold start

    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else getattr(source, "name", "image")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im = Image.open(source)
        except Image.DecompressionBombError as e:
            n = re.search(r"\((\d+) pixels\)", str(e))
            pixels = f"{int(n.group(1)):,} pixels" if n else "too many pixels"
            raise ThumbnailTooLarge(
                f"{name} has {pixels}, more than the {schema.MAX_THUMBNAIL_PIXELS:,} a thumbnail may have"
            ) from None
    w, h = im.size
    if w * h > schema.MAX_THUMBNAIL_PIXELS:
        im.close()
        raise ThumbnailTooLarge(
            f"{name} has {w} x {h} = {w * h:,} pixels, more than the "
            f"{schema.MAX_THUMBNAIL_PIXELS:,} a thumbnail may have"
        )
    return im


def _parse_folder(spec: schema.Table, col: str, name: str):
    """One partition folder name -> its typed value, by the rules writers follow."""
    value = parse_partition(dataclasses.replace(spec, partition=(col,)), [name])[col]
    canonical = partition_value(spec, col, value)
    if name != f"{col}={canonical}":
        raise ValueError(f"write it {col}={canonical}: readers look for that name")
    return value


def _codes_unique(t: pa.Table, key: list[str]) -> bool:
    """True when no key repeats, decided on one int64 code per row (each column's
    dictionary code in a mixed radix) without a group-by: Acero's costs 0.1 s a table in
    thread start-up alone, most of the dashboard's check of the demo's 28 tables. False
    when the codes would overflow or some repeat: the group-by then names the duplicate."""
    code = np.zeros(t.num_rows, np.int64)
    radix = 1
    for k in key:
        codes = pc.dictionary_encode(t[k]).combine_chunks()
        size = max(len(codes.dictionary), 1)
        if radix * size >= 2**62:
            return False
        code += codes.indices.to_numpy(zero_copy_only=False).astype(np.int64) * radix
        radix *= size
    if radix <= 2**26:  # a bitmap of at most 64 MB: one pass, no sort (7M cluster links)
        seen = np.zeros(radix, bool)
        seen[code] = True
        return int(np.count_nonzero(seen)) == t.num_rows
    code.sort()
    return not bool((code[1:] == code[:-1]).any())


def _is_inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _first(mask) -> int:
    """Index of the first true value of a boolean (Chunked)Array."""
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    return int(np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))[0])


def _example(t: pa.Table, i: int, spec: schema.Table, shown: tuple[str, ...], row: int | None = None) -> str:
    """`image_id='x', cluster=7 (row 3)`: the row's key (partition columns are in the file
    name) and the columns at fault."""
    cols = [c for c in spec.key if c not in spec.partition] + list(shown)
    cols = [c for c in dict.fromkeys(cols) if c in t.column_names]
    if row is None:
        row = t[_ROW][i].as_py() if _ROW in t.column_names else i
    text = ", ".join(f"{c}={_short(t[c][i].as_py())}" for c in cols)
    return f"{text} (row {row})" if text else f"row {row}"


def _short(value, limit: int = 200) -> str:
    """A value's repr, cut (a selection's list of 5,000 ids is one value)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
