"""No mlirxla module imports itself through others. Every import statement counts, those inside
functions too: a function-level import is how a cycle hides until the day it runs first."""

import ast
import os
import tomllib

from .conftest import REPOSITORY


def module_files() -> dict[str, str]:
    """Module name -> file, for every module of the packages pyproject.toml maps to folders."""
    with open(os.path.join(REPOSITORY, "pyproject.toml"), "rb") as handle:
        package_dirs = tomllib.load(handle)["tool"]["setuptools"]["package-dir"]
    files = {}
    for package, directory in package_dirs.items():
        root = os.path.join(REPOSITORY, directory)
        for folder, _dirs, names in os.walk(root):
            parts = [part for part in os.path.relpath(folder, root).split(os.sep) if part != "."]
            if "__pycache__" in parts:
                continue
            for name in names:
                if name.endswith(".py"):
                    stem = [] if name == "__init__.py" else [name[:-3]]
                    files[".".join([package, *parts, *stem])] = os.path.join(folder, name)
    return files


def imported_names(module: str, path: str) -> list[str]:
    """The modules (or names inside them) that the file's import statements name, made absolute."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    with open(path) as handle:
        tree = ast.parse(handle.read())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            anchor = package.split(".")[: len(package.split(".")) + 1 - node.level] if node.level else []
            base = ".".join(anchor + ([node.module] if node.module else []))
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in imported_names(module, path):
            # `from package import submodule` names the submodule; `from module import x`, the module
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A chain of imports from `start` back to itself, or None."""
    stack, seen = [[start]], {start}
    while stack:
        path = stack.pop()
        for target in graph[path[-1]]:
            if target == start:
                return path + [start]
            if target not in seen:
                seen.add(target)
                stack.append(path + [target])
    return None


def test_no_import_cycles():
    graph = import_graph()
    cycles = [cycle for module in sorted(graph) if (cycle := cycle_through(module, graph))]
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)
