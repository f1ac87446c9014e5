"""The package keeps its shape: stages import only down the data flow, and nothing imports in a
circle.

`lint-imports` checks the contracts of `[tool.importlinter]` in `pyproject.toml` (the layers,
top to bottom, and a worker that imports nothing of racefuzz outside itself, since `repro.py`
embeds it; see docs/architecture.md). The cycle check is separate because a layers contract
says nothing about modules inside one folder: two modules of `worker/` importing each other
break no layer. Both read the import graph grimp builds (import-linter's own library), with
imports under `if TYPE_CHECKING:` included, as mypy follows them too.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "racefuzz"


def test_lint_imports_keeps_every_contract() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout, proc.stdout[-4000:]


def test_the_contracts_name_every_part_of_the_package() -> None:
    # A new folder or module outside the layers would escape both contracts unnoticed.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["type"]: c for c in config["tool"]["importlinter"]["contracts"]}
    layered = {name.strip() for layer in contracts["layers"]["layers"] for name in layer.split("|")}
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    parts = graph.find_children(PACKAGE) - {f"{PACKAGE}.__main__"}
    assert layered == parts
    forbidden = contracts["forbidden"]
    assert forbidden["source_modules"] == [f"{PACKAGE}.worker"]
    assert set(forbidden["forbidden_modules"]) == parts - {f"{PACKAGE}.worker"}


def test_no_two_modules_of_racefuzz_import_each_other_in_a_cycle() -> None:
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    cycles = strongly_connected(sorted(graph.modules), graph.find_modules_directly_imported_by)
    assert not cycles, (
        "import cycles (each line: modules that import each other in a circle):\n"
        + ("\n".join(", ".join(cycle) for cycle in cycles))
    )


def strongly_connected(
    nodes: Iterable[str], edges: Callable[[str], Iterable[str]]
) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, without
    recursion), each sorted, in the order of their first node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(edges(root))))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges(succ)))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_strongly_connected_finds_cycles_and_only_cycles() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e", "f"], "f": ["e"]}
    assert strongly_connected(graph, graph.__getitem__) == [["a", "b", "c"], ["e", "f"]]
    assert strongly_connected(["x", "y"], lambda node: ["y"] if node == "x" else []) == []
