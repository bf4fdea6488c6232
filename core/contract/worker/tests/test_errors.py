from kbpworker import errors, extcache


def test_classification():
    assert errors.classify(extcache.CompileError("x"), "load") == "compile_error"
    assert errors.classify(SyntaxError("x"), "load") == "load_error"
    assert errors.classify(errors.LoadError("no ModelNew"), "load") == "load_error"
    assert errors.classify(RuntimeError("CUDA error: an illegal memory access was encountered"), "call") == "illegal_memory_access"
    assert errors.classify(RuntimeError("index 5 is out of bounds for dimension 0"), "call") == "runtime_error"
    assert errors.classify(ValueError("bad"), "call") == "runtime_error"


def test_compile_message_keeps_error_lines():
    log = "\n".join(["[1/2] c++ -c main.cpp", "main.cpp: In function 'f':", "main.cpp:7:5: error: expected ';' before 'return'", "    7 |     return out;", "ninja: build stopped"])
    msg = errors.useful_message(extcache.CompileError(log))
    assert "error: expected ';'" in msg and "CompileError" in msg
