#!/usr/bin/env python3
"""Prints the import circles between the top-level modules of a Rust crate (the gateway's).

Reads every `.rs` file under the crate's `src/` (default `gateway/src`), takes the paths it
names that start with `crate::` (in `use` trees, braces expanded, and anywhere in the code),
and draws an edge from the file's top-level module to the top-level module each path enters
(`crate::persist::sqlite::X` from `service.rs`: service -> persist). Paths inside a module
(`super::`, `self::`, a child's name) stay inside it. Comments, doc comments, strings and test
code (`#[cfg(test)]` items and the files they bring in with `#[path]`) are left out: tests may
reach upward. The crate root (`lib.rs`) wires the modules and is not a node.

Prints each set of modules that import one another in a circle (a strongly connected component)
with one circle through it and the lines that make its edges, and exits 1; prints nothing and
exits 0 when the modules import downward only. `--graph` prints every edge as well.
Standard library only.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
CRATE_PATH = re.compile(r"\bcrate\s*::\s*(" + IDENT + r")")
USE = re.compile(r"\buse\s+crate\s*::")
CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')


def blank(text, start, end):
    """`text` with `start..end` replaced by spaces, newlines kept (line numbers stay right)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


TOKEN = re.compile(
    r"//[^\n]*"  # a line comment (doc comments too)
    r"|/\*"  # a block comment, maybe nested
    r"|(?<![A-Za-z0-9_])b?r(#*)\""  # a raw string
    r"|(?<![A-Za-z0-9_])b?\"(?:[^\"\\]|\\.)*\""  # a string
    r"|'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'",  # a char literal (not a lifetime)
    re.S,
)


def strip(text):
    """The code of a Rust file with comments, strings and char literals blanked out (each
    character of them a space, newlines kept: offsets and line numbers stay right)."""
    out, i, n = [], 0, len(text)
    while True:
        m = TOKEN.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        if m.group(0) == "/*":
            depth, j = 1, m.end()
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif m.group(1) is not None:
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
        else:
            j = m.end()
        out.append(re.sub(r"[^\n]", " ", text[m.start():j]))
        i = j


def item_end(code, start):
    """Where the item starting at `start` ends: after its `;` or its balanced `{...}`."""
    depth = 0
    for j in range(start, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
        elif code[j] == ";" and depth == 0:
            return j + 1
    return len(code)


def drop_tests(text, code, path, test_files):
    """`code` (the stripped `text`) without its `#[cfg(test)]` items; the files those bring
    in join `test_files`."""
    while True:
        m = CFG_TEST.search(code)
        if not m:
            return code
        end = item_end(code, m.end())
        attr = PATH_ATTR.search(text, m.end(), end)  # its string is blanked in `code`
        name = re.match(r"\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code[m.end():end])
        if attr:
            test_files.add((path.parent / attr.group(1)).resolve())
        elif name:
            folder = path.parent if path.name in ("mod.rs", "lib.rs") else path.with_suffix("")
            for f in (folder / f"{name.group(1)}.rs", folder / name.group(1) / "mod.rs"):
                test_files.add(f.resolve())
        code = blank(code, m.start(), end)


def use_heads(tree):
    """The first segment after `crate::` of every path in a use tree (`{a::X, b::{Y, Z}}`)."""
    tree = tree.strip()
    if not tree.startswith("{"):
        m = re.match(IDENT, tree)
        return [m.group(0)] if m else []
    heads, depth, part = [], 0, ""
    for c in tree[1:]:
        if c in "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                break
            depth -= 1
        if c == "," and depth == 0:
            heads += use_heads(part)
            part = ""
        else:
            part += c
    heads += use_heads(part)
    return heads


ROOT_MODULE = "(crate root)"


def module_of(path, src):
    """The top-level module a file belongs to."""
    rel = path.relative_to(src)
    if rel.parts in (("lib.rs",), ("main.rs",)):
        return ROOT_MODULE
    return rel.parts[0].removesuffix(".rs")


def graph(src):
    """{module: {module it imports: [file:line, ...]}} for the crate at `src`."""
    files = sorted(p.resolve() for p in src.rglob("*.rs"))
    codes, test_files = {}, set()
    for p in files:
        text = p.read_text(encoding="utf-8")
        codes[p] = drop_tests(text, strip(text), p, test_files)
    files = [p for p in files if p not in test_files]
    modules = {module_of(p, src) for p in files}
    # What the crate root re-exports (`pub use service::GatewayService;`) belongs to its module.
    reexports = {}
    for p in files:
        if module_of(p, src) == ROOT_MODULE:
            for m in re.finditer(r"\bpub\s+use\s+(" + IDENT + r")\s*::", codes[p]):
                end = item_end(codes[p], m.start())
                for name in re.findall(IDENT, codes[p][m.end():end].split("::")[-1]):
                    if name not in ("self", "as"):
                        reexports[name] = m.group(1)
    edges = {m: {} for m in modules}
    for p in files:
        here = module_of(p, src)
        code = codes[p]
        found = []
        for m in USE.finditer(code):
            end = item_end(code, m.end())
            found += [(h, m.start()) for h in use_heads(code[m.end():end - 1])]
            code = blank(code, m.start(), end)
        found += [(m.group(1), m.start()) for m in CRATE_PATH.finditer(code)]
        if here == ROOT_MODULE:
            # The root names its modules without `crate::` (`runner::Deps`, `use service::X`).
            names = "|".join(sorted(modules - {ROOT_MODULE}))
            found += [(m.group(1), m.start()) for m in re.finditer(r"(?<![\w:])(" + names + r")\s*::", code)]
        for head, at in found:
            there = head if head in modules else reexports.get(head, ROOT_MODULE)
            if there != here:
                line = code.count("\n", 0, at) + 1
                where = f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}:{line}"
                edges[here].setdefault(there, []).append(where)
    return edges


def components(edges):
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def circle(edges, comp):
    """One circle through the first module of `comp`, staying inside `comp`."""
    start = comp[0]
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(edges[path[-1]]):
            if w == start:
                return path + [start]
            if w in comp and w not in seen:
                seen.add(w)
                paths.append(path + [w])
    return [start]


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    src = pathlib.Path(args[0]).resolve() if args else ROOT / "gateway" / "src"
    edges = graph(src)
    if "--graph" in argv:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m])) or '(nothing)'}")
    comps = components(edges)
    for comp in comps:
        ring = circle(edges, comp)
        print(f"import circle among {', '.join(comp)}: {' -> '.join(ring)}")
        for a, b in zip(ring, ring[1:]):
            print(f"  {a} -> {b}: {', '.join(edges[a][b])}")
    if comps:
        print(
            f"{len(comps)} import circle(s) in {src}; a module may import only modules below it: "
            "move what both sides need into a module of its own that both import"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
