"""Coupling counts of the conformance and reference families (issue 26): run from the repository root.

    python3 tools/coupling.py [ROOT]

Prints, for the tree at ROOT (default "."):
- files outside conformance/rope/ that import conformance.rope (any module of it), and how many of
  them are outside tests/rope/ too (RoPE's own tests);
- then for each side, conformance/ (shared layer: core, commands, reports, schemas) and reference/
  (shared layer: numerics, golden, identities, zoo, and the modules families.py, safe_files.py):
  - family modules importing another family's modules of that side (the shared layer excepted),
    and, for conformance families, another family's reference modules;
  - modules of the layer the families build on (conformance/core, reference/numerics) importing a
    family;
  - import cycles inside each family folder (strongly connected components of more than one
    module, counting module-level and function-level imports alike), and the module-level ones;
  - delegating methods: methods whose body is only imports and one return statement (and their lines);
  - function-level imports of the project's own modules (conformance.*, reference.*) in family folders.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SHARED = {"core", "commands", "reports", "schemas"}
# reference/'s shared layer (reference/families.py's SHARED; families.py and safe_files.py are modules,
# not family folders)
REFERENCE_SHARED = {"numerics", "golden", "identities", "zoo"}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(tree: ast.AST, name: str, is_pkg: bool):
    """[(imported module, function-level?)] of a module's AST."""
    out = []

    def visit(node, in_func):
        for child in ast.iter_child_nodes(node):
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.extend((a.name, f) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[:len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                out.append((mod, f))
                out.extend((f"{mod}.{a.name}", f) for a in child.names)
            visit(child, f)

    visit(tree, False)
    return out


def sccs(graph: dict) -> list:
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            strong(v)
    return out


def delegating(tree: ast.AST):
    """[(class.method, lines)] of methods that are only imports and a return."""
    found = []
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = list(fn.body)
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]
            if (len(body) >= 2 and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body[:-1])
                    and isinstance(body[-1], ast.Return)):
                found.append((f"{cls.name}.{fn.name}", fn.end_lineno - fn.lineno + 1))
    return found


def family_names(side: Path, shared) -> list:
    """The family packages of one side: its subpackages (folders with __init__.py) not in shared."""
    return sorted(p.name for p in side.iterdir() if p.is_dir() and p.name not in shared
                  and (p / "__init__.py").exists())


def side_counts(root: Path, mods: dict, known: set, side: str, families: list) -> dict:
    """For the families of one side (``side`` = "conformance" or "reference"): the family modules
    importing another family of that side (cross), the import graphs inside each family folder (any
    import, module-level only), the delegating methods and the function-level imports of the
    project's own modules (conformance.*, reference.*)."""
    cross, func_level, deleg, layer = [], [], [], []
    reference_families = set(family_names(root / "reference", REFERENCE_SHARED))
    base = "core" if side == "conformance" else "numerics"  # the layer the families build on
    graphs = {f: {} for f in families}
    static_graphs = {f: {} for f in families}
    for path, (name, tree) in mods.items():
        parts = name.split(".")
        if parts[0] == side and len(parts) >= 2 and parts[1] == base:
            used = sorted({m.split(".")[1] for m, _ in imports(tree, name, path.name == "__init__.py")
                           if m in known and m.split(".")[0] in ("conformance", "reference") and len(m.split(".")) > 1
                           and m.split(".")[1] in reference_families | set(families)})
            if used:
                layer.append((path.relative_to(root).as_posix(), used))
        if parts[0] != side or len(parts) < 2 or parts[1] not in families:
            continue
        rel = path.relative_to(root).as_posix()
        fam = parts[1]
        targets = [(m, f) for m, f in imports(tree, name, path.name == "__init__.py") if m in known]
        others = sorted({m.split(".")[1] for m, _ in targets if m.startswith(f"{side}.")
                         and m.split(".")[1] in families and m.split(".")[1] != fam})
        if side == "conformance":  # a conformance family reading another family's reference
            others += sorted({f"reference.{m.split('.')[1]}" for m, _ in targets if m.startswith("reference.")
                              and len(m.split(".")) > 1 and m.split(".")[1] in reference_families
                              and m.split(".")[1] != fam})
        if others:
            cross.append((rel, others))
        for m, f in targets:
            if m.startswith(f"{side}.{fam}.") and m != name:
                graphs[fam].setdefault(name, set()).add(m)
                if not f:
                    static_graphs[fam].setdefault(name, set()).add(m)
            if f and (m.startswith("conformance.") or m.startswith("reference.")):
                func_level.append((rel, m))
        deleg += [(rel, d, n) for d, n in delegating(tree)]
        graphs[fam].setdefault(name, set())
    return {"cross": cross, "func_level": func_level, "deleg": deleg, "layer": layer, "base": base,
            "cycles": {f: sccs(g) for f, g in graphs.items()},
            "static": {f: sccs(g) for f, g in static_graphs.items()}}


def print_counts(side: str, c: dict) -> None:
    """The counts of side_counts, one heading per count, then the files or modules behind it."""
    print(f"{side} family modules importing another family: {len(c['cross'])}")
    for r, o in c["cross"]:
        print(f"    {r} -> {', '.join(o)}")
    print(f"{side}/{c['base']} modules importing a family: {len(c['layer'])}")
    for r, o in c["layer"]:
        print(f"    {r} -> {', '.join(o)}")
    cycles, static = c["cycles"], c["static"]
    print(f"{side} import cycles inside family folders (any import): {sum(len(x) for x in cycles.values())} in "
          f"{sum(1 for x in cycles.values() if x)} families")
    for f, cs in cycles.items():
        for cyc in cs:
            print(f"    {f}: {' <-> '.join(m.rsplit('.', 1)[-1] for m in cyc)}")
    print(f"{side} import cycles inside family folders (module-level imports only): "
          f"{sum(len(x) for x in static.values())}")
    print(f"{side} delegating methods (imports + return): {len(c['deleg'])}, {sum(n for *_, n in c['deleg'])} lines")
    for r, d, k in c["deleg"]:
        print(f"    {r}: {d} ({k})")
    func_level = c["func_level"]
    print(f"{side} function-level imports of project modules in family folders: {len(func_level)} "
          f"(in {len({r for r, _ in func_level})} files)")
    for r, m in sorted(set(func_level)):
        print(f"    {r}: {m}")


def main(root: Path) -> None:
    mods = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if any(part.startswith(".") or part in ("build", "__pycache__") for part in rel):
            continue
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        mods[path] = (module_name(root, path), tree)
    known = {name for name, _ in mods.values()}

    rope_users = []
    for path, (name, tree) in mods.items():
        rel = path.relative_to(root).as_posix()
        targets = [m for m, _ in imports(tree, name, path.name == "__init__.py") if m in known]
        if not rel.startswith("conformance/rope/") and any(
                m == "conformance.rope" or m.startswith("conformance.rope.") for m in targets):
            rope_users.append(rel)
    print(f"files outside conformance/rope importing conformance.rope: {len(rope_users)} "
          f"({sum(not r.startswith('tests/rope/') for r in rope_users)} outside tests/rope too)")
    for r in rope_users:
        print(f"    {r}")
    for side, shared in (("conformance", SHARED), ("reference", REFERENCE_SHARED)):
        print_counts(side, side_counts(root, mods, known, side, family_names(root / side, shared)))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
