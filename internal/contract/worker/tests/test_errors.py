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


def test_triton_build_failures_at_first_launch_are_compile_errors():
    def triton_error(name, module):
        return type(name, (Exception,), {"__module__": module})("out of resource: shared memory, Required: 262144, Hardware limit: 232448")

    assert errors.classify(triton_error("OutOfResources", "triton.runtime.errors"), "call") == "compile_error"
    assert errors.classify(triton_error("PTXASError", "triton.runtime.errors"), "call") == "compile_error"
    assert errors.classify(triton_error("CompilationError", "triton.compiler.errors"), "call") == "compile_error"
    # Not Triton's: a runtime error that merely mentions resources stays one.
    assert errors.classify(triton_error("OutOfResources", "mykernel"), "call") == "runtime_error"


def test_a_write_that_found_no_room_is_named_for_the_driver_to_judge():
    import errno as errno_

    def raised(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            return e

    def chained():
        try:
            raise OSError(errno_.ENOSPC, "No space left on device", "/w/out.0.bin")
        except OSError as e:
            raise RuntimeError("dump failed") from e

    full = errors.describe(raised(chained), "call")
    assert full["errno"] == "ENOSPC" and full["class"] == "runtime_error"
    quota = errors.describe(OSError(errno_.EDQUOT, "Disk quota exceeded"), "call")
    assert quota["errno"] == "EDQUOT"
    other = errors.describe(OSError(errno_.EACCES, "Permission denied"), "call")
    assert "errno" not in other
