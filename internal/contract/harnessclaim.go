package contract

// A candidate's process runs the kernel's code, and that code can raise the worker's own
// exceptions (HarnessError, InputError, TensorFileError, TransportError: `from kbpworker.errors
// import HarnessError`), which the worker reports as harness_error. A harness_error is a verdict
// of `error`, blamed on the platform and left out of fast_p's tasks: a kernel that cannot solve a
// task could make the task vanish from its score. So once the kernel's code has run in the
// process (from the load on), the process's claim that the harness failed is counted as the
// kernel's own failure, and the message says so. Before that (the process's start) it stays the
// harness's. A real harness fault in a candidate's process then reads as a kernel failure; it
// shows on honest kernels too, which the example and GPU checks run.

// untrustedHarnessClaim returns the class and message of a candidate process's failure of class
// cls in phase: a harness_error after the kernel's code ran becomes the kernel's runtime_error
// (load_error during the load or the compile).
func untrustedHarnessClaim(cls, msg, phase string) (string, string) {
	if cls != ClassHarness || phase == "start" {
		return cls, msg
	}
	msg = "the kernel's process reported a failure of the harness after the kernel's code had run in it (a kernel can raise the harness's own exceptions); counted as the kernel's: " + msg
	return untrustedTaskClaim(phase), msg
}
