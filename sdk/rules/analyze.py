"""Static facts about a candidate file, for kbplatform's rule engine (sdk/rules).

Reads {"source": ..., "reference": ...} as JSON on stdin and writes the facts as JSON on stdout.
It parses both files with the standard library's ast and never imports or runs them, so it needs
neither torch nor a GPU: any Python 3.9 or newer will do.
"""

import ast
import json
import re
import sys

# Calls that move, shape or create data rather than compute: the reference calling them does not
# make them operators a kernel was meant to replace.
BOOKKEEPING = {
    "view", "reshape", "contiguous", "size", "dim", "numel", "unsqueeze", "squeeze", "permute",
    "transpose", "t", "flatten", "unflatten", "expand", "expandas", "repeat", "to", "float",
    "double", "half", "bfloat16", "cpu", "cuda", "type", "clone", "detach", "item", "tolist",
    "empty", "emptylike", "zeros", "zeroslike", "ones", "oneslike", "full", "fulllike", "arange",
    "randn", "rand", "randint", "randnlike", "tensor", "astensor", "split", "chunk", "cat",
    "concat", "stack", "narrow", "select", "dataptr", "stride", "iscontiguous", "newempty",
    "newzeros", "newones", "newfull", "numpy", "parameter", "module", "modulelist",
    "moduledict", "sequential", "identity", "nograd", "inferencemode", "manualseed", "device",
    "dtype", "emptystrided", "asstrided", "getdevice", "isavailable", "synchronize", "len",
    "range", "int", "isinstance", "tuple", "list", "dict", "super", "init", "buffer",
    "registerbuffer", "registerparameter", "dropout",
}

# Methods that compute when called on a tensor.
TENSOR_COMPUTE = {
    "matmul", "mm", "bmm", "sum", "mean", "max", "min", "amax", "amin", "softmax", "logsoftmax",
    "exp", "log", "sigmoid", "tanh", "relu", "clamp", "clampmin", "clampmax", "pow", "sqrt",
    "rsqrt", "abs", "norm", "var", "std", "cumsum", "cumprod", "argmax", "argmin", "prod",
    "logsumexp", "add", "sub", "mul", "div", "addmm", "baddbmm", "tril", "triu", "maskedfill",
    "where", "gelu", "neg", "reciprocal", "sin", "cos", "erf", "hardtanh", "leakyrelu", "square",
}

# Operators that are the same computation under another name.
SYNONYMS = {
    "mm": "matmul", "bmm": "matmul", "addmm": "matmul", "baddbmm": "matmul", "linear": "matmul",
    "einsum": "matmul", "tensordot": "matmul", "dot": "matmul", "mv": "matmul",
    "scaleddotproductattention": "attention", "multiheadattention": "attention",
    "amax": "max", "amin": "min", "clampmin": "clamp", "clampmax": "clamp",
}

TORCH_OP_SPACES = ("torch.nn.functional.", "torch.special.", "torch.linalg.", "torch.fft.",
                   "torch.ops.aten.", "torch.Tensor.", "torch.nn.", "torch._C._nn.", "torch.")
NOT_OPS = ("torch.nn.init.", "torch.nn.parameter", "torch.utils.",
           "torch.cuda.", "torch.backends.", "torch.autograd.", "torch.testing.", "torch.jit.",
           "torch.library.", "torch.distributed.", "torch.compiler.", "torch._dynamo.",
           "torch.nn.utils.", "torch.nn.modules.")

# Names under torch that are types, constants or layouts, never operators.
NOT_AN_OP = re.compile(r"(u?int\d*|float\d*|float8.*|bfloat16|half|double|long|short|bool|complex\d*|cfloat|cdouble|"
                       r"size|tensor|device|dtype|layout|generator|pi|inf|nan|e|strided|contiguousformat|channelslast.*|"
                       r"preserveformat|sparse.*|qint.*|quint.*)$")

LOW_PRECISION = ("float16", "bfloat16", "half", "float8")

CPP_TORCH_CALL = re.compile(r"\b(?:torch|at)::(?:native::)?([a-z_0-9]+)\s*\(")
TRITON_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit"}


def norm(name):
    n = name.lower().replace("_", "")
    n = re.sub(r"([123])d$", "", n)
    return SYNONYMS.get(n, n)


def lineof(node):
    return getattr(node, "lineno", 0)


class Module:
    """One parsed file: its aliases, top-level functions and classes, and string constants."""

    def __init__(self, tree):
        self.tree = tree
        self.alias = {}      # local name -> dotted name it stands for
        self.funcs = {}      # top-level function name -> node
        self.classes = {}    # top-level class name -> node
        self.strings = {}    # top-level name -> string value
        self.attrs = {}      # (class, attr) -> value node assigned to self.attr
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        self.alias.setdefault(a.name.split(".")[0], a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.alias[a.asname or a.name] = node.module + "." + a.name
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
        # Two passes so that aliases of aliases resolve (F = nn.functional after from torch import nn).
        for _ in range(2):
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    name = node.targets[0].id
                    s = self.string(node.value)
                    if s is not None:
                        self.strings[name] = s
                        continue
                    d = self.dotted(node.value)
                    if d and d != name:
                        self.alias[name] = d
        for cls in self.classes.values():
            for node in ast.walk(cls):
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            self.attrs[(cls.name, t.attr)] = node.value

    def dotted(self, node):
        """The dotted name an expression stands for, with aliases resolved, or None."""
        if isinstance(node, ast.Name):
            return self.alias.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return base + "." + node.attr if base else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            base = self.dotted(node.args[0])
            return base + "." + node.args[1].value if base else None
        return None

    def string(self, node):
        """A string value built from constants, top-level names, + and f-strings, or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.strings:
            return self.strings[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = self.string(node.left), self.string(node.right)
            if a is not None or b is not None:
                return (a or "") + (b or "")
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        if isinstance(node, (ast.List, ast.Tuple)):
            parts = [self.string(e) for e in node.elts]
            if any(p is not None for p in parts):
                return "\n".join(p or "" for p in parts)
        return None


def torch_op(dotted):
    """The normalised operator a dotted name calls, if it is a PyTorch operator."""
    if not dotted or not dotted.startswith("torch.") or dotted.startswith(NOT_OPS) or dotted == "torch.nn.functional":
        return None
    for space in TORCH_OP_SPACES:
        if dotted.startswith(space):
            rest = dotted[len(space):]
            if space == "torch.ops.aten.":
                rest = rest.split(".")[0]
            if "." in rest or not rest:
                return None
            op = norm(rest.rstrip("_") if not rest.startswith("__") else rest)
            return None if op in BOOKKEEPING or NOT_AN_OP.match(op) else op
    return None


class Walker:
    """Follows ModelNew.forward (or Model.forward) through everything it reaches in its file."""

    def __init__(self, mod, root_class, extensions=()):
        self.mod = mod
        self.extensions = set(extensions)  # names bound to built extensions: their methods are kernels
        self.root = root_class
        self.ops = {}         # op -> evidence
        self.fallback = {}    # op -> evidence (only inside except handlers)
        self.calls = []       # (dotted or None, node, owner class) of every call reached
        self.subscript_calls = []  # kernel[grid](...) launches
        self.seen = set()
        self.dynamic = []

    def run(self):
        cls = self.mod.classes.get(self.root)
        if cls is None:
            return self
        self.visit_method(cls, "forward")
        return self

    def visit_method(self, cls, name):
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                self.visit(node, cls.name)
                return True
        for base in cls.bases:
            b = self.mod.classes.get(getattr(base, "id", ""))
            if b is not None and self.visit_method(b, name):
                return True
        return False

    def visit_class_call(self, name):
        cls = self.mod.classes.get(name)
        if cls is not None:
            self.visit_method(cls, "forward") or self.visit_method(cls, "__call__")

    def visit(self, fn, owner):
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        handlers, inner = set(), set()
        for node in ast.walk(fn):
            if isinstance(node, ast.ExceptHandler):
                for sub in ast.walk(node):
                    handlers.add(id(sub))
            if isinstance(node, ast.Attribute):
                inner.add(id(node.value))  # torch.nn in torch.nn.functional.gelu names no operator
        for node in ast.walk(fn):
            in_handler = id(node) in handlers
            if id(node) in inner:
                continue
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                self.reach("matmul", "the @ operator at line %d" % lineof(node), in_handler)
            if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(getattr(node, "ctx", None), ast.Load):
                d = self.mod.dotted(node)
                op = torch_op(d)
                if op:
                    self.reach(op, "%s at line %d" % (d, lineof(node)), in_handler)
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            d = self.mod.dotted(f)
            self.calls.append((d, node, owner))
            if isinstance(f, ast.Subscript):
                self.subscript_calls.append(f.value)
            if isinstance(f, ast.Call) and torch_op(d):
                self.reach(torch_op(d), "%s (through getattr) at line %d" % (d, lineof(node)), in_handler)
            if isinstance(f, ast.Name):
                if f.id in self.mod.funcs:
                    self.visit(self.mod.funcs[f.id], None)
                elif f.id in self.mod.classes:
                    self.visit_class_call(f.id)
                elif f.id in ("eval", "exec", "__import__", "compile"):
                    self.dynamic.append("%s() at line %d" % (f.id, lineof(node)))
                elif f.id == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
                    base = self.mod.dotted(node.args[0]) or ""
                    if base.startswith("torch"):
                        self.dynamic.append("getattr(%s, <computed name>) at line %d" % (base, lineof(node)))
            if isinstance(f, ast.Attribute):
                recv = f.value
                if isinstance(recv, ast.Call) and getattr(recv.func, "id", None) == "super" and owner:
                    # super().forward(x): the base class's method, when the file defines the base.
                    for base in self.mod.classes[owner].bases if owner in self.mod.classes else []:
                        b = self.mod.classes.get(getattr(base, "id", ""))
                        if b is not None:
                            self.visit_method(b, f.attr)
                    continue
                if isinstance(recv, ast.Name) and recv.id == "self" and owner:
                    cls = self.mod.classes.get(owner)
                    if cls is not None and self.visit_method(cls, f.attr):
                        continue
                    self.follow_attr(owner, f.attr, node, in_handler)
                elif isinstance(recv, ast.Name) and recv.id in self.mod.classes and f.attr == "apply":
                    self.visit_method(self.mod.classes[recv.id], "forward")
                elif d is None or not d.startswith("torch"):
                    m = norm(f.attr)
                    if m in TENSOR_COMPUTE and not (isinstance(recv, ast.Name) and recv.id == "self"):
                        base = d.rsplit(".", 1)[0] if d else ""
                        if not base or (base not in self.mod.alias.values() and base not in self.extensions):
                            self.reach(m, "the tensor method .%s() at line %d" % (f.attr, lineof(node)), in_handler)
                if d and d.endswith(".apply"):
                    name = d[:-len(".apply")]
                    if name in self.mod.classes:
                        self.visit_method(self.mod.classes[name], "forward")
        return self

    def follow_attr(self, owner, attr, call, in_handler):
        """self.attr(...) where __init__ set self.attr: a module, an operator, a lambda."""
        value = self.mod.attrs.get((owner, attr))
        if value is None:
            return
        # nn.Conv1d(...).to(torch.bfloat16), .cuda(), .eval(): the module is the innermost call.
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Call):
            value = value.func.value
        target = value.func if isinstance(value, ast.Call) else value
        d = self.mod.dotted(target)
        if isinstance(value, ast.Lambda):
            self.visit(value, owner)
            return
        if isinstance(value, ast.Call) and isinstance(target, ast.Name) and target.id in self.mod.classes:
            self.visit_class_call(target.id)
            return
        if d and d.rsplit(".", 1)[-1] in ("Sequential", "ModuleList") and isinstance(value, ast.Call):
            # The modules a container is built from run when it does.
            for arg in value.args:
                inner = arg.func if isinstance(arg, ast.Call) else arg
                if isinstance(arg, ast.Call) and isinstance(inner, ast.Name) and inner.id in self.mod.classes:
                    self.visit_class_call(inner.id)
                op = torch_op(self.mod.dotted(inner))
                if op:
                    self.reach(op, "self.%s (%s in a %s) called at line %d" % (attr, self.mod.dotted(inner), d.rsplit(".", 1)[-1], lineof(call)), in_handler)
            return
        op = torch_op(d)
        if op:
            self.reach(op, "self.%s (%s) called at line %d" % (attr, d, lineof(call)), in_handler)

    def reach(self, op, evidence, in_handler):
        if in_handler:
            self.fallback.setdefault(op, evidence)
        else:
            self.ops.setdefault(op, evidence)


def reference_facts(source):
    facts = {"reference_ops": [], "reference_low_precision": False, "reference_error": ""}
    if not source.strip():
        return facts
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        facts["reference_error"] = "line %s: %s" % (e.lineno, e.msg)
        return facts
    mod = Module(tree)
    w = Walker(mod, "Model").run()
    facts["reference_ops"] = sorted(w.ops)
    for node in ast.walk(tree):
        d = mod.dotted(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
        if d and d.startswith("torch.") and d.split(".")[-1] in LOW_PRECISION:
            facts["reference_low_precision"] = True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("half", "bfloat16"):
            facts["reference_low_precision"] = True
    return facts


def extension_sources(mod, call):
    """The C++/CUDA text a load_inline or load call builds, by keyword."""
    out = {}
    for kw in call.keywords:
        if kw.arg in ("cpp_sources", "cuda_sources", "sources"):
            s = mod.string(kw.value)
            if s:
                out[kw.arg] = s
    if call.args:
        # load_inline(name, cpp_sources, cuda_sources, ...) and load(name, sources, ...)
        names = ["name", "cpp_sources", "cuda_sources"] if "load_inline" in (mod.dotted(call.func) or "") else ["name", "sources"]
        for key, arg in zip(names, call.args):
            s = mod.string(arg)
            if key != "name" and s:
                out[key] = s
    return out


def candidate_facts(source, ref_ops):
    facts = {
        "parse_error": "", "has_modelnew": False,
        "kernels": {lang: {"defined": [], "launched": []} for lang in ("cuda", "cutlass", "cpp", "triton")},
        "reached_ops": {}, "fallback_ops": {}, "threads": [], "patches": [], "downcasts": [], "dynamic": [],
    }
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        facts["parse_error"] = "line %s: %s" % (e.lineno, e.msg)
        return facts
    mod = Module(tree)
    facts["has_modelnew"] = "ModelNew" in mod.classes
    kernels = facts["kernels"]

    # Extensions: names bound to load_inline/load results, and what their sources hold.
    ext_names, native = set(), []
    for node in ast.walk(tree):
        value, targets = None, []
        if isinstance(node, ast.Assign):
            value, targets = node.value, node.targets
        elif isinstance(node, ast.Call):
            value = node
        if not isinstance(value, ast.Call):
            continue
        d = mod.dotted(value.func) or ""
        if not (d.endswith("load_inline") or d.endswith("cpp_extension.load") or d == "load"):
            continue
        srcs = extension_sources(mod, value)
        for t in targets:
            td = mod.dotted(t) if isinstance(t, (ast.Name, ast.Attribute)) else None
            if td:
                ext_names.add(td)
        line = lineof(value)
        cuda = srcs.get("cuda_sources", "")
        files = srcs.get("sources", "")
        allsrc = "\n".join(srcs.values())
        native.append(allsrc)
        if cuda or ".cu" in files:
            kernels["cuda"]["defined"].append("%s with CUDA sources at line %d" % (d.rsplit(".", 1)[-1], line))
            if re.search(r"#\s*include\s*[<\"](cutlass|cute)/|\b(cutlass|cute)::", allsrc):
                kernels["cutlass"]["defined"].append("CUTLASS/CuTe in the sources of line %d" % line)
        elif srcs.get("cpp_sources", "").strip():
            kernels["cpp"]["defined"].append("load_inline with cpp_sources at line %d" % line)

    # Triton kernels: functions decorated with triton.jit (possibly under autotune/heuristics).
    jit_names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                dd = mod.dotted(dec.func if isinstance(dec, ast.Call) else dec) or ""
                if dd in TRITON_DECORATORS or dd.endswith("triton.jit"):
                    jit_names.add(node.name)
                    kernels["triton"]["defined"].append("@%s %s at line %d" % (dd, node.name, lineof(node)))
                    break

    walker = Walker(mod, "ModelNew", ext_names).run()
    for d, call, _ in walker.calls:
        if not d:
            continue
        base = d.rsplit(".", 1)[0]
        owner_base = "self." + base.split("self.", 1)[1] if base.startswith("self.") else base
        if base in ext_names or owner_base in ext_names or any(d.startswith(e + ".") for e in ext_names) \
                or d.startswith("torch.ops.") and not d.startswith("torch.ops.aten."):
            for lang in ("cuda", "cutlass", "cpp"):
                if kernels[lang]["defined"]:
                    kernels[lang]["launched"].append("%s() at line %d" % (d, lineof(call)))
    for value in walker.subscript_calls:
        name = getattr(value, "id", None)
        if name in jit_names:
            kernels["triton"]["launched"].append("%s[...]() at line %d" % (name, lineof(value)))
    for d, call, _ in walker.calls:
        if d and d.rsplit(".", 1)[-1] == "run" and d.rsplit(".", 1)[0] in jit_names:
            kernels["triton"]["launched"].append("%s at line %d" % (d, lineof(call)))

    # PyTorch reached from the extension's own C++ (at::matmul inside the "kernel").
    for text in native:
        for m in CPP_TORCH_CALL.finditer(text):
            op = norm(m.group(1))
            if op in ref_ops and op not in BOOKKEEPING:
                walker.ops.setdefault(op, "%s inside the extension's C++ source" % m.group(0).rstrip("( "))
    facts["reached_ops"] = walker.ops
    facts["fallback_ops"] = walker.fallback
    facts["dynamic"] = walker.dynamic

    for node in ast.walk(tree):
        d = mod.dotted(node.func) if isinstance(node, ast.Call) else None
        line = lineof(node)
        if d and re.match(r"(threading\.(Thread|Timer)|_thread\.start_new|concurrent\.futures|multiprocessing|os\.fork)", d):
            facts["threads"].append("%s at line %d" % (d, line))
        # Patching: assignments to torch/time attributes, setattr on them, mock.patch of them.
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            td = mod.dotted(t) if isinstance(t, ast.Attribute) else None
            if not td:
                continue
            if re.search(r"allow_tf32|allow_fp16|allow_bf16", td):
                facts["downcasts"].append("%s set at line %d" % (td, line))
            elif re.match(r"(torch|time|timeit|builtins)\.", td) and not td.startswith("torch.backends."):
                facts["patches"].append("assigns %s at line %d" % (td, line))
        if d in ("setattr", "builtins.setattr") and node.args:
            base = mod.dotted(node.args[0]) or ""
            if re.match(r"(torch|time|timeit|builtins)(\.|$)", base):
                facts["patches"].append("setattr on %s at line %d" % (base, line))
        if d and re.search(r"mock\.patch", d):
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and re.match(r"(torch|time)\.", a.value):
                    facts["patches"].append("mock.patch(%r) at line %d" % (a.value, line))
        # Precision: .half(), .to(torch.float16), dtype=torch.bfloat16, autocast.
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("half", "bfloat16") and not node.args:
            facts["downcasts"].append(".%s() at line %d" % (node.func.attr, line))
        if isinstance(node, ast.Call):
            for v in list(node.args) + [k.value for k in node.keywords]:
                vd = mod.dotted(v) if isinstance(v, (ast.Attribute, ast.Name)) else None
                if vd and vd.startswith(("torch.", "triton.language.")) and vd.split(".")[-1] in LOW_PRECISION:
                    facts["downcasts"].append("%s at line %d" % (vd, line))
            if d and ("autocast" in d or d == "torch.set_float32_matmul_precision"):
                facts["downcasts"].append("%s at line %d" % (d, line))
    for text in native:
        for m in re.finditer(r"std::thread|pthread_create|std::async", text):
            facts["threads"].append("%s in the extension's source" % m.group(0))
        for m in re.finditer(r"\b(__half2?|__nv_bfloat16|__float2half\w*|__float2bfloat16\w*|at::kHalf|at::kBFloat16|torch::kFloat16|torch::kHalf|torch::kBFloat16)\b", text):
            facts["downcasts"].append("%s in the extension's source" % m.group(0))
    for name in ("threads", "patches", "downcasts"):
        facts[name] = sorted(set(facts[name]))
    for k in kernels.values():
        k["defined"] = sorted(set(k["defined"]))
        k["launched"] = sorted(set(k["launched"]))
    return facts


def main():
    req = json.load(sys.stdin)
    out = reference_facts(req.get("reference", ""))
    out.update(candidate_facts(req.get("source", ""), set(out["reference_ops"])))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
