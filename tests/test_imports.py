"""The import graph of `conceptlens/` (issue 22): no import cycle among module-level
imports, no private name used across modules, the demo generator imported only by itself,
the tests, the benchmarks and the CLI's `demo` commands, and no Streamlit in the library.
And the views return data: no display format is declared in `conceptlens/views/`.

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


def parse(path: Path) -> ast.Module:
    return _parse(path, path.stat().st_mtime_ns)


@functools.cache
def _parse(path: Path, mtime: int) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def modules(root: Path, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (its file, whether it is a package's __init__)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
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

    def visit(node: ast.AST, toplevel: bool, function: str | None) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                local = (a.asname or a.name.split(".")[0],)
                out.append(Import(module, f"{rel}:{node.lineno}", a.name, (), local, toplevel, function))
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            local = tuple(a.asname or a.name for a in node.names)
            target = _resolve(module, is_pkg, node)
            out.append(Import(module, f"{rel}:{node.lineno}", target, names, local, toplevel, function))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            toplevel, function = False, getattr(node, "name", function)
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.body:
                visit(child, False, function)
            for child in node.orelse:
                visit(child, toplevel, function)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, toplevel, function)

    visit(parse(path), True, None)
    return out


def graph(root: Path, package: str = PACKAGE) -> tuple[dict, list[Import]]:
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


def cycles(root: Path, package: str = PACKAGE) -> list[list[str]]:
    """Groups of modules that import each other, through module-level imports (Tarjan's
    strongly connected components of more than one module, or a module importing itself)."""
    mods, imps = graph(root, package)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for imp in imps:
        if imp.toplevel:
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


def private_uses(root: Path, package: str = PACKAGE) -> list[str]:
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
def test_no_import_cycle_in_the_package():
    assert cycles(ROOT) == []


def test_no_private_name_is_used_across_modules():
    assert private_uses(ROOT) == []


def test_only_the_demo_its_tests_and_its_cli_commands_import_the_demo():
    assert demo_imports(ROOT) == []


def test_the_library_never_imports_streamlit():
    assert streamlit_imports(ROOT) == []


def test_views_declare_no_display_format():
    assert display_formats(ROOT) == []


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


def test_a_cycle_is_found_and_function_or_type_checking_imports_are_not_one(synthetic):
    assert cycles(synthetic, "pkg") == [["pkg.a", "pkg.b"]]


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


def test_number_formats_in_a_view_are_found(synthetic):
    assert display_formats(synthetic, "pkg") == [
        "pkg/views/table.py:1: '%d'",
        "pkg/views/table.py:1: '%.2f'",
        "pkg/views/table.py:2: '{:.1%}'",
    ]
