package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/sandbox"
)

// TestSandboxRunWithout runs real confined commands through `sandbox run`: a write outside the
// sandbox's folder and an inet socket are refused, and --without lets exactly the layer it names
// go (the diagnosis a user runs when a program fails confined), with a warning every time.
func TestSandboxRunWithout(t *testing.T) {
	st := sandbox.Probe()
	if st.Landlock == 0 || !st.Seccomp {
		t.Skipf("this kernel lacks Landlock or seccomp: %s", st)
	}
	env := isolated(t)
	outside := filepath.Join(t.TempDir(), "written")
	write := []string{"sandbox", "run", "--", "/bin/sh", "-c", "echo x > " + outside}
	// The socket comes from the system's own Python, which every host that runs kernels has.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	sock := []string{"sandbox", "run", "--", py, "-c", "import socket; socket.socket(socket.AF_INET)"}

	if _, errOut, code := run(t, env, write...); code == 0 {
		t.Fatalf("a confined write outside its folder succeeded: %s", errOut)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("the confined write outside its folder left its file")
	}
	if _, _, code := run(t, env, sock...); code == 0 {
		t.Fatal("a confined program made an inet socket")
	}

	// Without Landlock the write goes through; the socket is still refused by seccomp.
	with := func(layer string, args []string) []string {
		return append([]string{"sandbox", "run", "--without", layer}, args[2:]...)
	}
	_, errOut, code := run(t, env, with("landlock", write)...)
	if code != 0 || !strings.Contains(errOut, "without landlock: this is not the sandbox kernels get") {
		t.Fatalf("--without landlock: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("--without landlock: the write did not happen: %v", err)
	}
	if _, _, code := run(t, env, with("landlock", sock)...); code == 0 {
		t.Fatal("--without landlock also let the socket through")
	}
	// Without seccomp the socket is made; the write is refused again.
	os.Remove(outside)
	if _, errOut, code := run(t, env, with("seccomp", sock)...); code != 0 {
		t.Fatalf("--without seccomp: exit %d, %s", code, errOut)
	}
	if _, _, code := run(t, env, with("seccomp", write)...); code == 0 {
		t.Fatal("--without seccomp also let the write through")
	}
	if _, errOut, code := run(t, env, "sandbox", "run", "--without", "network", "--", "/bin/true"); code == 0 || !strings.Contains(errOut, `sandbox layer "network": want one of`) {
		t.Fatalf("unknown layer: exit %d, %s", code, errOut)
	}
}
