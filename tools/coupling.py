"""Coupling counts of the conformance families (issue 26): run from the repository root.

    python3 tools/coupling.py [ROOT]

Prints, for the tree at ROOT (default "."):
- files outside conformance/rope/ that import conformance.rope (any module of it), and how many of
  them are outside tests/rope/ too (RoPE's own tests);
- conformance family modules importing another family's modules (conformance.core excepted);
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


def main(root: Path) -> None:
    conf = root / "conformance"
    families = sorted(p.name for p in conf.iterdir() if p.is_dir() and p.name not in SHARED
                      and (p / "__init__.py").exists())
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
    cross = []
    func_level = []
    graphs = {f: {} for f in families}
    static_graphs = {f: {} for f in families}
    deleg = []
    for path, (name, tree) in mods.items():
        rel = path.relative_to(root).as_posix()
        imps = imports(tree, name, path.name == "__init__.py")
        targets = [(m, f) for m, f in imps if m in known]
        if not rel.startswith("conformance/rope/") and any(
                m == "conformance.rope" or m.startswith("conformance.rope.") for m, _ in targets):
            rope_users.append(rel)
        parts = name.split(".")
        if parts[0] == "conformance" and len(parts) >= 2 and parts[1] in families:
            fam = parts[1]
            others = sorted({m.split(".")[1] for m, _ in targets if m.startswith("conformance.")
                             and len(m.split(".")) > 1 and m.split(".")[1] in families
                             and m.split(".")[1] != fam})
            if others:
                cross.append((rel, others))
            for m, f in targets:
                if m.startswith(f"conformance.{fam}.") and m != name:
                    graphs[fam].setdefault(name, set()).add(m)
                    if not f:
                        static_graphs[fam].setdefault(name, set()).add(m)
                if f and (m.startswith("conformance.") or m.startswith("reference.")):
                    func_level.append((rel, m))
            deleg += [(rel, d, n) for d, n in delegating(tree)]
            graphs[fam].setdefault(name, set())

    cycles = {f: sccs(g) for f, g in graphs.items()}
    static = {f: sccs(g) for f, g in static_graphs.items()}
    print(f"files outside conformance/rope importing conformance.rope: {len(rope_users)} "
          f"({sum(not r.startswith('tests/rope/') for r in rope_users)} outside tests/rope too)")
    for r in rope_users:
        print(f"    {r}")
    print(f"family modules importing another family: {len(cross)}")
    for r, o in cross:
        print(f"    {r} -> {', '.join(o)}")
    n = sum(len(c) for c in cycles.values())
    print(f"import cycles inside family folders (any import): {n} in "
          f"{sum(1 for c in cycles.values() if c)} families")
    for f, cs in cycles.items():
        for c in cs:
            print(f"    {f}: {' <-> '.join(m.rsplit('.', 1)[-1] for m in c)}")
    print(f"import cycles inside family folders (module-level imports only): {sum(len(c) for c in static.values())}")
    print(f"delegating methods (imports + return): {len(deleg)}, {sum(n for *_, n in deleg)} lines")
    for r, d, k in deleg:
        print(f"    {r}: {d} ({k})")
    print(f"function-level imports of project modules in family folders: {len(func_level)} "
          f"(in {len({r for r, _ in func_level})} files)")
    for r, m in sorted(set(func_level)):
        print(f"    {r}: {m}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
