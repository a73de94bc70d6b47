"""The harness's layers, read from the imports with `ast`: a module imports only from its own
layer or below, the front ends never import each other, and the exporter never imports the
harness. A failure names the file, the line and the two layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Bottom to top. A module may import its own layer and every layer listed before it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("metrics", ("harness.metrics",)),
    ("runtime", ("harness.runtime",)),
    ("onnxgraph", ("harness.onnxgraph",)),
    ("analysis", ("harness.analysis",)),
    ("api", ("harness", "harness.backend", "harness.exporters", "harness.records", "harness.reproducer",
             "harness.verification", "harness.onnx_verification")),
    # harness.testing fails a test with harness.report.failure's per-op table
    ("report", ("harness.report", "harness.testing")),
    ("front end", ("harness.cli", "harness.pytest_plugin")),
]
FRONT_ENDS = ("harness.cli", "harness.pytest_plugin")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """Index of the layer `module` belongs to (the longest matching prefix wins)."""
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, lazy ones inside functions too."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from harness import runtime` imports the subpackage harness.runtime
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if node.module in ("harness", "exporter")]
    return found


def front_end(module: str) -> str | None:
    return next((f for f in FRONT_ENDS if module == f or module.startswith(f + ".")), None)


def violations(root: Path) -> list[str]:
    """Every upward, cross-front-end or exporter->harness import under `root`."""
    found: list[str] = []
    for path in sorted((root / "harness").rglob("*.py")) + sorted((root / "exporter").rglob("*.py")):
        importer = module_name(path) if root == ROOT else ".".join(
            path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for line, imported in imports(path):
            where = f"{path.relative_to(root)}:{line}"
            if importer.startswith("exporter"):
                if (imported == "harness" or imported.startswith("harness.")) and not any(
                        f.startswith(f"{where}:") for f in found):
                    found.append(f"{where}: the exporter imports {imported}; exporter/ never imports harness/")
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
    return found


def test_every_harness_module_has_a_layer():
    unplaced = [module_name(p) for p in (ROOT / "harness").rglob("*.py") if layer_of(module_name(p)) is None]
    assert not unplaced, f"modules outside every layer: {unplaced}; add them to LAYERS"


def test_no_import_goes_up_a_layer():
    found = violations(ROOT)
    assert not found, "layering violations:\n" + "\n".join(found)


def test_harness_top_level_is_small():
    modules = sorted(p.name for p in (ROOT / "harness").glob("*.py"))
    assert len(modules) <= 8, f"harness/ holds {len(modules)} top-level modules: {modules}"


@pytest.mark.parametrize(("planted", "line", "expected"), [
    ("harness/metrics/comparison.py", "from harness.runtime import prepare\n", "(metrics) imports harness.runtime"),
    ("harness/onnxgraph/values.py", "import harness.analysis.fx_rows\n", "(onnxgraph) imports harness.analysis"),
    ("harness/cli/main.py", "from harness.pytest_plugin import pytest_addoption\n", "front end harness.cli imports"),
    ("exporter/graph.py", "from harness import verify\n", "exporter/ never imports harness/"),
])
def test_a_planted_upward_import_is_caught(tmp_path, planted, line, expected):
    """The check can fail: copy the tree, plant one bad import, and it is reported with its line."""
    for package in ("harness", "exporter"):
        for path in (ROOT / package).rglob("*.py"):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    victim = tmp_path / planted
    victim.write_text(victim.read_text() + line)
    line_number = len(victim.read_text().splitlines())
    found = violations(tmp_path)
    assert len(found) == 1 and expected in found[0] and found[0].startswith(f"{planted}:{line_number}:"), found
