"""The package's shape: imports that run one way without circles, and no reach into anyone's private parts.

These replace a line cap per module: a long module that holds one idea is fine, but a module that reads another
module's private attributes, or imports another package's private modules, hides a contract the reader cannot see.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "chatlab"

#: mechanisms that went around a library and were removed; none may come back
REMOVED = (
    "send_query_prepared",
    "pgconn",
    "gc.disable",
    "build_middleware_stack",
    "chatlab_gate",
    "IDLE_LAYERS",
    "HTTP_PROTOCOLS",  # uvicorn's table of its protocol classes, for subclassing them
    "uvicorn.importer",
)
#: underscore names that are documented public API (namedtuple's methods)
PUBLIC_UNDERSCORED = frozenset({"_replace", "_asdict", "_fields", "_make"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(folder: Path) -> dict[str, Path]:
    """Every module under ``folder`` by its dotted name."""
    return {_module_name(path): path for path in sorted(folder.rglob("*.py"))}


MODULES = _modules(PACKAGE)


def _outside_type_checking(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, less what sits under ``if TYPE_CHECKING:`` (imports for annotations only run no code)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _imported(module: str, path: Path) -> Iterator[tuple[str, str]]:
    """(module imported, name imported or "") for every import of a source file, relative ones resolved."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in _outside_type_checking(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                yield base, alias.name


def _edges(module: str, path: Path, modules: dict[str, Path] = MODULES) -> set[str]:
    """The modules of ``modules`` (chatlab's by default) a module imports: ``from pkg import sub`` is an edge to
    ``pkg.sub`` when that is a module."""
    found = set()
    for base, name in _imported(module, path):
        target = f"{base}.{name}" if f"{base}.{name}" in modules else base
        if target in modules and target != module:
            found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_circles() -> None:
    graph = {module: _edges(module, path) for module, path in MODULES.items()}
    assert sum(map(len, graph.values())) > 50  # the graph was read
    assert not _cycles(graph)


def test_the_benchmark_and_the_stress_probes_have_no_import_circles() -> None:
    for folder in ("benchmarks", "stress"):
        modules = _modules(ROOT / folder)
        graph = {module: _edges(module, path, modules) for module, path in modules.items()}
        assert sum(map(len, graph.values())) >= 5, folder  # the graph was read
        assert not _cycles(graph), folder


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def test_no_private_module_or_name_of_another_package_is_imported() -> None:
    wrong = []
    for module, path in MODULES.items():
        for base, name in _imported(module, path):
            if any(_private(part) for part in base.split(".")) and not base.startswith("chatlab"):
                wrong.append(f"{module} imports {base}")
            if _private(name) and not base.startswith("chatlab") and base != "__future__":
                wrong.append(f"{module} imports {base}.{name}")
    assert not wrong, wrong


def _defined_private_names(tree: ast.AST) -> set[str]:
    """Private names a module defines itself: functions, classes, assignments and attributes it sets."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return {name for name in names if _private(name)}


def _private_reads(path: Path) -> set[str]:
    """``something._name`` reads of a private name the module does not define itself (another module's privates)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _defined_private_names(tree)
    return {
        f"{ast.unparse(node)} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own
    }


def test_no_module_reads_private_attributes_it_does_not_define() -> None:
    wrong = {str(path.relative_to(ROOT)): reads for path in MODULES.values() if (reads := _private_reads(path))}
    assert not wrong, wrong


def test_the_private_read_check_sees_a_reach_in(tmp_path: Path) -> None:
    source = tmp_path / "reach.py"
    source.write_text(
        "import redis\n\nclass A:\n    def __init__(self):\n        self._own = 1\n\n"
        "def f(conn, a):\n    return conn._writer, a._own\n",
        encoding="utf-8",
    )
    assert _private_reads(source) == {"conn._writer (line 8)"}


def test_the_mechanisms_that_went_around_libraries_stay_gone() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {word}"
        for path in MODULES.values()
        for word in REMOVED
        if word in path.read_text(encoding="utf-8")
    }
    assert not found, sorted(found)
