"""The layers of the harness and the stages of the exporter, read from the imports with `ast`:
a module imports only from its own layer (stage) or below, the front ends never import each
other, the exporter never imports the harness, the harness's lower layers read only the
exporter's torch-free contract (and the rest of the harness reads anything else of the exporter
only inside functions), and no package module imports the scripts and tests around it (tools/,
bench/, tests/), which may themselves import any package module; and no circle of module-level
imports among the exporter's or the harness's modules. Relative imports are resolved first. A failure names the file, the line and the two layers."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Bottom to top. A module may import its own layer and every layer listed before it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # the exporter's torch-free contract (metadata keys, skeleton, file I/O, records): any layer reads it
    ("exporter contract", ("exporter.contract",)),
    ("metrics", ("harness.metrics",)),
    ("runtime", ("harness.runtime",)),
    ("onnxgraph", ("harness.onnxgraph",)),
    # the rest of the exporter sits under the analysis, the first layer that reads FX graphs
    ("exporter", ("exporter",)),
    ("analysis", ("harness.analysis",)),
    ("api", ("harness", "harness.backend", "harness.exporters", "harness.records", "harness.reproducer",
             "harness.verification", "harness.onnx_verification", "harness.shapes")),
    # harness.testing fails a test with harness.report.failure's per-op table
    ("report", ("harness.report", "harness.testing")),
    ("front end", ("harness.cli", "harness.pytest_plugin")),
]
FRONT_ENDS = ("harness.cli", "harness.pytest_plugin")
# The exporter's stages, bottom to top: a stage imports only its own stage and the ones before it.
# errors.py sits at the bottom with the contract; `exporter` itself (its lazy __init__) and the api
# sit on top.
EXPORTER_STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("contract", ("exporter.contract", "exporter.errors")),
    ("capture", ("exporter.capturing",)),
    ("translate", ("exporter.translate",)),
    ("optimize", ("exporter.optimize",)),
    ("write", ("exporter.write",)),
    ("api", ("exporter", "exporter.api")),
]
# What the harness may import from the exporter at module level (the rest only inside functions,
# so that importing the harness imports no torch through the exporter).
HARNESS_MODULE_LEVEL_EXPORTER = ("exporter.contract",)
# The installed packages, whose modules must not import the scripts and tests around them.
PACKAGES = ("harness", "exporter", "op_table", "model_zoo_cases", "coverage_suite")
OUTSIDE = ("tools", "bench", "tests", "_common")  # bench/_common.py is bench's, imported as _common
SCRIPTS = ("tools", "bench")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int | None:
    """Index of the layer `module` belongs to (the longest matching prefix wins)."""
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def imports(path: Path, importer: str = "", *, lazy: bool = True) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, lazy ones inside functions too
    (unless `lazy=False`: module level only); relative ones resolved against `importer` (the
    file's module name)."""
    found: list[tuple[int, str]] = []
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    for node in (ast.walk if lazy else _module_level)(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if not base:
                continue
            found.append((node.lineno, base))
            # `from harness import runtime` (or `from . import x`) may import a submodule
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names
                      if base in ("harness", "exporter") or node.level]
    return found


def _module_level(tree: ast.AST):
    """The nodes of `tree` outside function bodies (what runs when the module is imported)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        pending += [child for child in ast.iter_child_nodes(node)
                    if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def front_end(module: str) -> str | None:
    return next((f for f in FRONT_ENDS if module == f or module.startswith(f + ".")), None)


def violations(root: Path) -> list[str]:
    """Every upward, cross-front-end or exporter->harness import under `root`, every import of
    tools/, bench/ or tests/ from a package, and every import of tests/ from tools/ or bench/."""
    found: list[str] = []
    paths = [p for folder in (*PACKAGES, *SCRIPTS) for p in sorted((root / folder).rglob("*.py"))]
    for path in paths:
        importer = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for line, imported in imports(path, importer):
            where = f"{path.relative_to(root)}:{line}"
            if any(f.startswith(f"{where}:") for f in found):
                continue  # one finding per line (`from harness import x` reads as two imports)
            if _within(importer, SCRIPTS):
                if _within(imported, ("tests",)):
                    found.append(f"{where}: {importer} imports {imported}; tools/ and bench/ never import tests/")
                continue
            if _within(imported, OUTSIDE):
                found.append(f"{where}: the package module {importer} imports {imported}; "
                             "packages never import tools/, bench/ or tests/ (move the code into the package)")
                continue
            if _within(importer, ("exporter",)):
                if _within(imported, ("harness",)):
                    found.append(f"{where}: the exporter imports {imported}; exporter/ never imports harness/")
                elif _within(imported, ("exporter",)):
                    source_stage, target_stage = layer_of(importer, EXPORTER_STAGES), layer_of(imported, EXPORTER_STAGES)
                    if target_stage > source_stage:
                        found.append(f"{where}: {importer} ({EXPORTER_STAGES[source_stage][0]}) imports {imported} "
                                     f"({EXPORTER_STAGES[target_stage][0]}), a later stage of the exporter")
                continue
            source_layer, target_layer = layer_of(importer), layer_of(imported)
            if source_layer is None or target_layer is None:
                continue
            if target_layer > source_layer:
                found.append(f"{where}: {importer} ({LAYERS[source_layer][0]}) imports {imported} "
                             f"({LAYERS[target_layer][0]}), a layer above it")
            source_front, target_front = front_end(importer), front_end(imported)
            if source_front and target_front and source_front != target_front:
                found.append(f"{where}: front end {source_front} imports front end {target_front}")
        if _within(importer, ("harness",)):
            for line, imported in imports(path, importer, lazy=False):
                where = f"{path.relative_to(root)}:{line}"
                if (_within(imported, ("exporter",)) and not _within(imported, HARNESS_MODULE_LEVEL_EXPORTER)
                        and not any(f.startswith(f"{where}:") for f in found)):
                    found.append(f"{where}: {importer} imports {imported} at module level; the harness imports "
                                 "only exporter.contract there (the rest inside the functions that need it)")
    return found


def test_relative_imports_are_resolved():
    imported = {name for _, name in imports(ROOT / "op_table" / "cases_elementwise.py", "op_table.cases_elementwise")}
    assert {"op_table._samples", "op_table.schema"} <= imported, imported


def test_every_harness_module_has_a_layer():
    unplaced = [module_name(p) for p in (ROOT / "harness").rglob("*.py") if layer_of(module_name(p)) is None]
    assert not unplaced, f"modules outside every layer: {unplaced}; add them to LAYERS"


def test_every_exporter_module_has_a_stage():
    modules = [module_name(p) for p in (ROOT / "exporter").rglob("*.py")]
    unplaced = [m for m in modules if layer_of(m, EXPORTER_STAGES) is None or
                (EXPORTER_STAGES[layer_of(m, EXPORTER_STAGES)][0] == "api" and m not in ("exporter", "exporter.api"))]
    assert not unplaced, f"exporter modules outside every stage: {unplaced}; put them in a stage's folder"


def test_no_import_goes_up_a_layer():
    found = violations(ROOT)
    assert not found, "layering violations:\n" + "\n".join(found)


def test_the_exporter_contract_imports_no_torch():
    """Importing exporter.contract (every module of it), the exporter package itself (its public
    names load lazily) and the harness modules that read only the contract at module level loads
    no torch: checked in a fresh interpreter."""
    contract = sorted(module_name(p) for p in (ROOT / "exporter" / "contract").rglob("*.py"))
    modules = ["exporter", *contract, "exporter.errors", "harness", "harness.report", "harness.report.files",
               "harness.reproducer", "harness.runtime.shared_weights", "harness.cli.main", "harness.cli.scheduler",
               "harness.cli.worker", "harness.pytest_plugin", "harness.pytest_plugin.fixtures"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules) +
            "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
            "assert not loaded, f'torch was imported: {loaded[:5]}'\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exporter.contract.keys" in contract, contract


def test_harness_top_level_is_small():
    modules = sorted(p.name for p in (ROOT / "harness").glob("*.py"))
    assert len(modules) <= 8, f"harness/ holds {len(modules)} top-level modules: {modules}"


@pytest.mark.parametrize(("planted", "line", "expected"), [
    ("harness/metrics/comparison.py", "from harness.runtime import prepare\n", "(metrics) imports harness.runtime"),
    ("harness/onnxgraph/values.py", "import harness.analysis.fx_rows\n", "(onnxgraph) imports harness.analysis"),
    ("harness/cli/main.py", "from harness.pytest_plugin import pytest_addoption\n", "front end harness.cli imports"),
    ("exporter/translate/graph.py", "from harness import verify\n", "exporter/ never imports harness/"),
    ("exporter/translate/symbolics/nn.py", "from ....harness import records\n", "exporter/ never imports harness/"),
    ("harness/metrics/comparison.py", "from exporter.translate.graph import Graph\n", "(metrics) imports exporter.translate.graph"),
    ("harness/runtime/runner.py", "import exporter.capturing.trace\n", "(runtime) imports exporter.capturing.trace"),
    ("harness/metrics/comparison.py", "from exporter.errors import ExportError\n", "(metrics) imports exporter.errors"),
    ("harness/analysis/fx_rows.py", "from exporter.capturing.trace import eval_mode\n", "at module level"),
    ("exporter/capturing/trace.py", "from exporter.translate.registry import Dispatcher\n",
     "(capture) imports exporter.translate.registry (translate), a later stage"),
    ("exporter/contract/keys.py", "import exporter.capturing.signature\n", "(contract) imports exporter.capturing"),
    ("exporter/errors.py", "from exporter.api import export\n", "(contract) imports exporter.api (api)"),
    ("exporter/translate/symbolics/nn.py", "from ...write import printer\n", "(translate) imports exporter.write"),
    ("exporter/optimize/passes.py", "from exporter import api\n", "(optimize) imports exporter"),
    ("harness/analysis/fx_rows.py", "from ..cli import main\n", "(analysis) imports harness.cli"),
    ("harness/verification/__init__.py", "import tools.opinfo_sweep\n", "packages never import tools/"),
    ("op_table/table.py", "from tests.test_ops import CASES\n", "packages never import tools/, bench/ or tests/"),
    ("exporter/capturing/trace.py", "from bench._common import median\n", "packages never import"),
    ("tools/gen_op_table.py", "from tests import test_ops\n", "tools/ and bench/ never import tests/"),
    ("bench/bench_export.py", "import tests.test_spine\n", "tools/ and bench/ never import tests/"),
])
def test_a_planted_upward_import_is_caught(tmp_path, planted, line, expected):
    """The check can fail: copy the tree, plant one bad import, and it is reported with its line."""
    _copy_sources(tmp_path, (*PACKAGES, *SCRIPTS))
    victim = tmp_path / planted
    victim.write_text(victim.read_text() + line)
    line_number = len(victim.read_text().splitlines())
    found = violations(tmp_path)
    assert len(found) == 1 and expected in found[0] and found[0].startswith(f"{planted}:{line_number}:"), found


def _copy_sources(destination: Path, folders: tuple[str, ...]) -> None:
    """The .py files of `folders`, copied under `destination` at the same relative paths."""
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            target = destination / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


@pytest.mark.parametrize(("package", "title"), [("exporter", "Stages of the exporter"), ("harness", "Layers of the harness")])
def test_the_architecture_page_draws_every_folder(package, title):
    """docs/ARCHITECTURE.md's table of a package's stages (layers) names each of its folders, and
    no folder that is gone: the page matches the tree."""
    import re

    section = _section((ROOT / "docs" / "ARCHITECTURE.md").read_text(), title)
    drawn = set(re.findall(rf"`{package}/(\w+)/", section))
    folders = {p.parent.name for p in (ROOT / package).glob("*/__init__.py")}
    assert drawn == folders, f"drawn but absent: {sorted(drawn - folders)}; absent from the page: {sorted(folders - drawn)}"
    stages = EXPORTER_STAGES if package == "exporter" else LAYERS
    prefixes = {prefix.split(".")[1] for _, names in stages for prefix in names if prefix.count(".") == 1
                and prefix.startswith(package + ".")}
    assert folders <= prefixes, (
        f"folders without a stage in tests/test_layering.py: {sorted(folders - prefixes)}")


def import_cycles(root: Path, packages: tuple[str, ...] = ("exporter", "harness")) -> list[list[str]]:
    """The circles of module-level imports among the modules (not the package __init__s, which
    import their own submodules by design) of `packages`: each strongly connected component of
    two or more modules, sorted. An import of `a.b.c` counts as one of the longest existing module."""
    paths = {module_name_under(root, p): p for package in packages for p in (root / package).rglob("*.py")
             if p.name != "__init__.py"}

    def resolve(imported: str) -> str | None:
        parts = imported.split(".")
        while parts and ".".join(parts) not in paths:
            parts.pop()
        return ".".join(parts) or None

    def imported(path: Path, module: str) -> list[str]:  # `from pkg import submodule` names the submodule too
        submodules = [f"{node.module}.{alias.name}" for node in _module_level(ast.parse(path.read_text()))
                      if isinstance(node, ast.ImportFrom) and not node.level and node.module for alias in node.names]
        return [name for _, name in imports(path, module, lazy=False)] + submodules

    graph = {module: {target for name in imported(path, module)
                      if (target := resolve(name)) is not None and target != module}
             for module, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def module_name_under(root: Path, path: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def test_no_import_circles_in_the_exporter_or_the_harness():
    assert import_cycles(ROOT) == []


@pytest.mark.parametrize(("planted", "line", "circle"), [
    ("exporter/capturing/signature.py", "from exporter.capturing.trace import eval_mode\n",
     ["exporter.capturing.signature", "exporter.capturing.specialise", "exporter.capturing.trace"]),
    ("harness/metrics/arrays.py", "from harness.metrics.comparison import compare\n",
     ["harness.metrics.arrays", "harness.metrics.comparison"]),
])
def test_a_planted_import_circle_is_caught(tmp_path, planted, line, circle):
    """The check can fail: copy the packages, close a circle with one import, and it is reported."""
    _copy_sources(tmp_path, ("exporter", "harness"))
    victim = tmp_path / planted
    victim.write_text(victim.read_text() + line)
    assert import_cycles(tmp_path) == [circle]
