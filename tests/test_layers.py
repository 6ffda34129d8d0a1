"""The package's layers import downward only: data flows device -> IR -> compiler -> executor, and
the torch.compile bridge sits on top. Every import is checked, at module level or inside a
function, absolute or relative."""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "lazyxla"

# bottom to top; a layer may import the layers listed before it and the shared utilities
LAYERS = ("ir", "lowering", "runtime", "device", "dynamo")
UTILITIES = {"envflags", "jaxenv", "generations", "metrics", "host_malloc", "__version__"}


def _imports(path: pathlib.Path, root: pathlib.Path = PACKAGE):
    """(line, the lazyxla module or attribute imported) for each import in the file."""
    package = ["lazyxla", *path.relative_to(root).parent.parts]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def _layer_of(name: str):
    parts = name.split(".")
    return parts[1] if parts[0] == "lazyxla" and len(parts) > 1 else None


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_below_it(layer):
    allowed = set(LAYERS[:LAYERS.index(layer) + 1]) | UTILITIES
    upward = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
              for path in sorted((PACKAGE / layer).rglob("*.py"))
              for line, name in _imports(path)
              if _layer_of(name) is not None and _layer_of(name) not in allowed]
    assert not upward, "\n".join(upward)


def test_the_check_sees_function_level_and_relative_imports(tmp_path):
    source = tmp_path / "lazyxla" / "lowering" / "probe.py"
    source.parent.mkdir(parents=True)
    source.write_text("import lazyxla.runtime.executor\nfrom . import registry\n"
                      "def f():\n    from lazyxla.device import dispatch\n    from ..dynamo import bridge\n")
    names = [name for _, name in _imports(source, tmp_path / "lazyxla")]
    assert names == ["lazyxla.runtime.executor", "lazyxla.lowering.registry",
                     "lazyxla.device.dispatch", "lazyxla.dynamo.bridge"]
    assert [_layer_of(n) for n in names] == ["runtime", "lowering", "device", "dynamo"]
