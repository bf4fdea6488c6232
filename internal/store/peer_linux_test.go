package store

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A socket at the holder's path that another user serves is refused: the client asks the kernel
// who listens (SO_PEERCRED) before it trusts the answer. Needs root, to start the other user's
// process.
func TestSocketOfAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting another user's process needs root")
	}
	// The socket folder is private; for the test it is opened to the other user while they bind
	// the database's socket, as a squatter who got in some other way would, and closed again.
	run, err := os.MkdirTemp("", "kbp-peer-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(run)
	if err := os.Chmod(run, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", run)
	dir := t.TempDir()
	path, err := socketPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o777); err != nil {
		t.Fatal(err)
	}
	squatter := exec.Command("/usr/bin/python3", "-c", `
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n{"pid":1,"command":"squatter"}')
    c.close()
`, path)
	squatter.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	squatter.Stderr = os.Stderr
	out, err := squatter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := squatter.Start(); err != nil {
		t.Skipf("cannot start a process as nobody: %v", err)
	}
	defer func() { _ = squatter.Process.Kill(); _ = squatter.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("the squatter did not start: %q", line)
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	_, info, err := dialHolder(dir)
	if err == nil || !strings.Contains(err.Error(), "another user") {
		t.Fatalf("got %+v, %v; want the socket refused as another user's", info, err)
	}
}
