# Structured diff of two candidate modules, read with Python's own ast (never imported, no torch).
# stdin: {"old": source, "new": source}. stdout: {"ok": bool, "error": str, "changes": [...]}, each
# change {"change": added|removed|changed, "what": "method ModelNew.forward", "diff": unified text}.
# A module-level string (the inline CUDA/C++ source of a kernel) is diffed as text, line by line.
import ast
import difflib
import json
import sys


def segment(src, node):
    text = ast.get_source_segment(src, node)
    if text is None:
        return ast.dump(node)
    # The segment's first line starts at the node, its others keep their indentation.
    return " " * getattr(node, "col_offset", 0) + text


def names(targets):
    out = []
    for t in targets:
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            out.extend(names(t.elts))
        else:
            out.append(ast.unparse(t) if hasattr(ast, "unparse") else ast.dump(t))
    return out


def entries(src, tree):
    """Top-level definitions by a stable key: (key, label, signature, text to diff, is a string).
    The signature is the ast's dump, so a change of layout or comments alone is no change."""
    out = []
    seen = {}

    def add(key, label, sig, text, is_str=False):
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n:
            key, label = "%s#%d" % (key, n + 1), "%s (#%d)" % (label, n + 1)
        out.append((key, label, sig, text, is_str))

    imports = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            rest, sigs = [], [ast.dump(b) for b in node.bases]
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    what = "method %s.%s" % (node.name, item.name)
                    add(what, what, ast.dump(item), segment(src, item))
                else:
                    rest.append(segment(src, item))
                    sigs.append(ast.dump(item))
            header = "class %s(%s)" % (node.name, ", ".join(segment(src, b) for b in node.bases))
            add("class " + node.name, "class " + node.name + " (outside its methods)", "\n".join(sigs), "\n".join([header] + rest))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            add("function " + node.name, "function " + node.name, ast.dump(node), segment(src, node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            label = "assignment " + ", ".join(names(targets))
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                add(label, label + " (string)", value.value, value.value, True)
            else:
                add(label, label, ast.dump(node), segment(src, node))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            # Imports are one entry: their set matters, not their order or grouping.
            imports.append(segment(src, node))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            add("docstring", "module docstring", node.value.value, node.value.value, True)
        else:
            text = segment(src, node)
            first = text.splitlines()[0][:60]
            add("statement " + first, "statement `%s`" % first, ast.dump(node), text)
    if imports:
        text = "\n".join(sorted(imports))
        out.insert(0, ("imports", "imports", text, text, False))
    return out


def udiff(a, b, label):
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), "before", "after", lineterm="", n=2)
    return "\n".join(list(lines)[2:])


def main():
    req = json.load(sys.stdin)
    old, new = req["old"], req["new"]
    trees = []
    for which, src in (("the earlier", old), ("the later", new)):
        try:
            trees.append(ast.parse(src))
        except (SyntaxError, ValueError) as e:
            json.dump({"ok": False, "error": "%s kernel does not parse: %s (line %s)"
                       % (which, getattr(e, "msg", str(e)), getattr(e, "lineno", "?"))}, sys.stdout)
            return
    a_list, b_list = entries(old, trees[0]), entries(new, trees[1])
    a = {k: (label, sig, text) for k, label, sig, text, _ in a_list}
    b = {k for k, _, _, _, _ in b_list}
    changes = []
    for k, label, sig, text, s in b_list:
        if k not in a:
            changes.append({"change": "added", "what": label, "diff": text if s else ""})
        elif a[k][1] != sig:
            changes.append({"change": "changed", "what": label, "diff": udiff(a[k][2], text, label)})
    for k, label, _, _, _ in a_list:
        if k not in b:
            changes.append({"change": "removed", "what": label, "diff": ""})
    json.dump({"ok": True, "changes": changes}, sys.stdout)


main()
