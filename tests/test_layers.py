"""The package's layers (docs/ARCHITECTURE.md): every import, at module level or inside a function, points down,
and no two modules import each other, directly or around a circle."""

import ast
from pathlib import Path

SEED = Path(__file__).resolve().parents[1] / "src" / "seed"
DATA = {"types", "errors", "paths", "storage", "allocator"}
# layer -> the layers it may import (docs/ARCHITECTURE.md, "The layers, bottom to top")
ALLOWED = {
    "types": set(),
    "errors": set(),
    "paths": set(),
    "allocator": set(),
    "storage": {"errors"},
    "envs": DATA,
    "models": DATA,
    "algos": set(),
    "agent": DATA | {"envs"},
    "dist": DATA | {"envs", "models"},
    "rollout": DATA | {"envs", "models", "agent", "dist"},
    "skills": DATA | {"envs", "models", "agent"},
    "config": DATA | {"envs", "models", "algos", "skills"},
    "train": DATA | {"envs", "models", "algos", "agent", "dist", "rollout", "skills", "config"},
    "report": DATA | {"envs", "models", "agent", "skills", "config", "train"},
    "cli": DATA | {"envs", "models", "algos", "agent", "dist", "rollout", "skills", "config", "train", "report"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in SEED.rglob("*.py"):
        parts = path.relative_to(SEED.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) of every seed import in the file; `from pkg import sub` counts as importing `pkg.sub`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "seed":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if sub in modules else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "seed"]
    return found


def _layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "seed"


def test_every_import_points_down_the_layers():
    modules = _modules()
    assert set(map(_layer, modules)) - {"seed"} <= set(ALLOWED), "a new layer: add it to ALLOWED and ARCHITECTURE.md"
    upward = []
    for module, path in modules.items():
        here = _layer(module)
        for line, target in _imports(path, modules):
            there = _layer(target)
            if here not in ("seed", there) and there not in ALLOWED[here]:
                upward.append(f"{path.relative_to(SEED.parent)}:{line} ({here}) imports {target} ({there})")
    assert not upward, "imports that point up:\n" + "\n".join(upward)


def test_no_import_circle_between_modules():
    modules = _modules()
    graph = {m: sorted({t for _, t in _imports(p, modules) if t in modules and t != m}) for m, p in modules.items()}
    finished: set[str] = set()

    def circle(path: list[str]) -> list[str] | None:
        """A circle reachable from the last module of `path` (depth first), as the modules around it."""
        for nxt in graph[path[-1]]:
            if nxt in path:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in finished:
                found = circle(path + [nxt])
                if found:
                    return found
        finished.add(path[-1])
        return None

    for module in sorted(graph):
        found = None if module in finished else circle([module])
        assert found is None, "modules that import each other: " + " -> ".join(found)
