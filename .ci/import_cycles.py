#!/usr/bin/env python3
"""Finds import circles between the files of a Rust crate's source folder.

Usage: import_cycles.py SRC_DIR [SUBDIR ...]

SRC_DIR is a crate's `src` (holding lib.rs or main.rs). Every path a file names
(`use crate::a::b`, `super::x`, `self::y`, and paths written inline in code, such as
`crate::api::store::Store::open`) is resolved to the file that defines the module it
reaches; a `mod x;` declaration is not an import. A circle is a set of two or more files
that reach each other through these edges (a strongly connected component); a name a
module only re-exports (`pub use`) counts as an edge to the file that defines it, and code
in an inline `mod tests { use super::*; }` names its own file. With SUBDIRs,
only circles whose files all lie below SRC_DIR/SUBDIR are reported for each SUBDIR
(`src api` checks src/api). Exits 1 if any circle is found, printing each one.
"""

import os
import re
import sys

COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"')
USE = re.compile(r"\buse\s+([^;]+);")
INLINE = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def module_files(src):
    """Maps a module path (a tuple of names; () is the crate root) to its file."""
    files = {}
    for root, _dirs, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                files[()] = path
            elif rel[-1] == "mod":
                files[tuple(rel[:-1])] = path
            else:
                files[tuple(rel)] = path
    return files


def expand_use(tree):
    """Expands a use tree (`a::{b, c::{d, e}}`) into its paths, as lists of names."""
    tree = re.sub(r"\s+", "", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def walk(s):
        s = re.sub(r"\bas\b\w*$", "", s)
        if "{" not in s:
            return [s.split(" as ")[0].split("::")]
        head, rest = s.split("{", 1)
        rest = rest[: rest.rfind("}")]
        head = head.rstrip(":")
        out = []
        for part in split_top(rest):
            for path in walk(part):
                out.append((head.split("::") if head else []) + path)
        return out

    return [[p for p in path if p] for path in walk(tree)]


def resolve(path, here, files):
    """The module file a path names from module `here`, and the names after it, or None
    (a path into another crate)."""
    if not path:
        return None
    if path[0] == "crate":
        base, rest = (), list(path[1:])
    elif path[0] in ("super", "self"):
        base, rest = here, list(path)
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    elif here + (path[0],) in files:
        # A path relative to the current module: one of its child modules.
        base, rest = here, list(path)
    else:
        return None
    while base not in files and base:
        # An inline module: its names live in the file of the nearest enclosing module.
        base = base[:-1]
    best, used, cur = base, 0, base
    for i, name in enumerate(rest):
        cur = cur + (name,)
        if cur in files:
            best, used = cur, i + 1
        else:
            break
    return best, rest[used:]


def module_of(path, files):
    for module, file in files.items():
        if file == path:
            return module
    raise KeyError(path)


def inline_modules(text):
    """The inline `mod name { ... }` blocks of a file: (start, end, name), outermost first."""
    blocks = []
    for m in re.finditer(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{", text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        blocks.append((m.end(), i, m.group(1)))
    return blocks


def module_at(pos, module, blocks):
    """The module a position of a file lies in, counting inline `mod` blocks."""
    for start, end, name in blocks:
        if start <= pos < end:
            module = module + (name,)
    return module


def read_code(file):
    with open(file, encoding="utf-8") as fh:
        return STRING.sub('""', COMMENT.sub("", fh.read()))


def reexports(files):
    """Per module, the names it re-exports (`pub use a::b::C;`) and the paths they name."""
    out = {}
    for module, file in files.items():
        names = {}
        for tree in re.findall(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", read_code(file)):
            for path in expand_use(tree):
                if path and path[-1] != "*":
                    names[path[-1]] = path
        out[module] = names
    return out


def edges(src):
    files = module_files(src)
    exported = reexports(files)

    def target_of(path, here, seen=()):
        """The file defining what `path` names from `here`, through re-exports."""
        found = resolve(path, here, files)
        if found is None:
            return None
        module, tail = found
        if tail and tail[0] in exported[module] and (module, tail[0]) not in seen:
            via = exported[module][tail[0]] + tail[1:]
            deeper = target_of(via, module, seen + ((module, tail[0]),))
            if deeper is not None:
                return deeper
        return files[module]

    graph = {f: set() for f in files.values()}
    for module, file in files.items():
        text = read_code(file)
        blocks = inline_modules(text)
        paths = []
        for m in USE.finditer(text):
            here = module_at(m.start(), module, blocks)
            # A re-export is followed by the files that name it, not an edge itself.
            prefix = text[max(0, m.start() - 20):m.start()]
            if re.search(r"\bpub(?:\([^)]*\))?\s*$", prefix):
                continue
            paths.extend((p, here) for p in expand_use(m.group(1)))
        for m in INLINE.finditer(text):
            paths.append((m.group(1).split("::"), module_at(m.start(), module, blocks)))
        for path, here in paths:
            target = target_of(path, here)
            if target and target != file:
                graph[file].add(target)
    return graph


def cycles(graph):
    """Tarjan's strongly connected components with two or more members."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def show(comp, graph):
    """The edges that close a circle, one line a file."""
    for f in comp:
        print("    %s -> %s" % (f, ", ".join(sorted(graph[f] & set(comp)))))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    src = sys.argv[1]
    subdirs = sys.argv[2:]
    graph = edges(src)
    found = 0
    for comp in cycles(graph):
        if subdirs:
            # Only the part of a circle that lies in one subdir counts for it.
            for sub in subdirs:
                prefix = os.path.join(src, sub) + os.sep
                inside = {f for f in comp if f.startswith(prefix)}
                sub_graph = {f: graph[f] & inside for f in inside}
                for c in cycles(sub_graph):
                    found += 1
                    print("circle in %s: %s" % (prefix, ", ".join(c)))
                    show(c, graph)
        else:
            found += 1
            print("circle: " + ", ".join(comp))
            show(comp, graph)
    if not found:
        print("no import circles in %s%s" % (src, (" (" + ", ".join(subdirs) + ")") if subdirs else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
