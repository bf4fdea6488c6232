package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The tests run this test binary inside the sandbox (childVar names what the child tries) and
// read what each attempt got: the safety properties are checked on real processes, with the
// real helper, Landlock and seccomp.
const childVar = "KBP_SANDBOX_TEST_CHILD"

func TestMain(m *testing.M) {
	if what := os.Getenv(childVar); what != "" {
		os.Exit(child(what))
	}
	os.Exit(m.Run())
}

// attempt is one thing the child tried: ok when it worked.
type attempt struct {
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
}

func try(err error) attempt {
	if err != nil {
		return attempt{Err: err.Error()}
	}
	return attempt{OK: true}
}

// child runs in the sandbox: it tries each escape named by the parent's variables and prints what
// each got, as JSON.
func child(what string) int {
	out := map[string]attempt{}
	parent := os.Getppid()
	switch what {
	case "escape":
		_, err := os.ReadFile(os.Getenv("SECRET_FILE"))
		out["read_secret"] = try(err)
		out["write_outside"] = try(os.WriteFile(filepath.Join(os.Getenv("OUTSIDE"), "x"), []byte("x"), 0o644))
		out["write_inside"] = try(os.WriteFile(filepath.Join(os.Getenv("INSIDE"), "x"), []byte("x"), 0o644))
		_, err = os.ReadFile(os.Getenv("READABLE"))
		out["read_allowed"] = try(err)
		_, err = os.ReadFile("/proc/" + strconv.Itoa(parent) + "/environ")
		out["read_parent_environ"] = try(err)
		f, err := os.OpenFile("/proc/"+strconv.Itoa(parent)+"/mem", os.O_RDWR, 0)
		if err == nil {
			f.Close()
		}
		out["open_parent_mem"] = try(err)
		out["signal_parent"] = try(syscall.Kill(parent, 0))
		out["ptrace_parent"] = try(unix.PtraceAttach(parent))
		c, err := net.Dial("tcp", os.Getenv("TCP_ADDR"))
		if err == nil {
			c.Close()
		}
		out["connect_tcp"] = try(err)
		c, err = net.Dial("unix", os.Getenv("UNIX_ADDR"))
		if err == nil {
			c.Close()
		}
		out["connect_unix"] = try(err)
		// A unix socket may be made (CUDA's initialisation makes one) but reaches nobody: neither
		// a connection nor a datagram sent to an address gets through.
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		out["unix_socket_made"] = try(err)
		if err == nil {
			err = unix.Sendto(fd, []byte("hello"), 0, &unix.SockaddrUnix{Name: os.Getenv("DGRAM_ADDR")})
			unix.Close(fd)
		}
		out["sendto_unix"] = try(err)
		_, err = net.ListenPacket("udp", "127.0.0.1:0")
		out["udp_socket"] = try(err)
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		out["socketpair"] = try(err)
		out["unshare"] = try(unix.Unshare(unix.CLONE_NEWUSER))
		_, _, errno := unix.Syscall(unix.SYS_BPF, 0, 0, 0)
		out["bpf"] = attempt{OK: errno != unix.EPERM, Err: errno.Error()}
		var lim unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_CORE, &lim)
		out["core_dumps"] = attempt{OK: lim.Cur != 0}
		st, _ := os.ReadFile("/proc/self/status")
		out["capabilities"] = attempt{OK: !strings.Contains(string(st), "CapEff:\t0000000000000000")}
		out["new_privs"] = attempt{OK: !strings.Contains(string(st), "NoNewPrivs:\t1")}
		out["env_has_secret"] = attempt{OK: strings.Contains(strings.Join(os.Environ(), "\n"), "sk-canary")}
		shm := os.Getenv("UNLISTED")
		_, err = os.ReadDir(shm)
		out["list_unlisted"] = try(err)
		out["make_in_unlisted"] = try(os.WriteFile(filepath.Join(shm, "mine"), []byte("x"), 0o600))
		out["remove_in_unlisted"] = try(os.Remove(filepath.Join(shm, "mine")))
		out["mkdir_in_unlisted"] = try(os.Mkdir(filepath.Join(shm, "dir"), 0o700))
	}
	if what == "forks" {
		var started []*exec.Cmd
		var err error
		for len(started) < 2000 {
			c := exec.Command("/bin/sleep", "30")
			if err = c.Start(); err != nil {
				break
			}
			started = append(started, c)
		}
		for _, c := range started {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		out["forks"] = attempt{OK: len(started) >= 2000, Err: fmt.Sprintf("%d started, then %v", len(started), err)}
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return 0
}

func TestSandboxContainsARealProcess(t *testing.T) {
	st := Probe()
	t.Logf("sandbox on this host: %s (missing: %v)", st, st.Missing)
	if st.Landlock == 0 || !st.Seccomp {
		t.Skipf("this kernel lacks Landlock or seccomp: %v", st.Missing)
	}
	root := t.TempDir()
	secret := filepath.Join(root, "home", ".secret")
	outside := filepath.Join(root, "outside")
	inside := filepath.Join(root, "inside")
	readable := filepath.Join(root, "ro", "task.py")
	unlisted := filepath.Join(root, "shm")
	for _, d := range []string{filepath.Dir(secret), outside, inside, filepath.Dir(readable), unlisted} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{secret, readable} {
		if err := os.WriteFile(f, []byte("content"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	sock := filepath.Join(root, "holder.sock")
	ux, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ux.Close()
	dgram := filepath.Join(root, "dgram.sock")
	ud, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: dgram, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ud.Close()

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-canary-1")
	env := Environ(os.Environ(), []string{
		childVar + "=escape", "SECRET_FILE=" + secret, "OUTSIDE=" + outside, "INSIDE=" + inside, "READABLE=" + readable,
		"TCP_ADDR=" + tcp.Addr().String(), "UNLISTED=" + unlisted, "UNIX_ADDR=" + sock, "DGRAM_ADDR=" + dgram, "KBP_TEST_TOKEN=sk-canary-2",
	})
	// Require the whole sandbox where the host has it; where a part is missing (root without a
	// writable pids cgroup, as on the GPU machine), what the host has must still hold.
	mode := ModeRequire
	if len(st.Missing) > 0 {
		mode = ModeBestEffort
	}
	got := runChild(t, Policy{Env: env, ReadOnly: []string{self, filepath.Dir(readable), "/proc", "/etc", "/usr", "/lib", "/lib64"},
		ReadWrite: []string{inside}, Unlisted: []string{unlisted}, Mode: mode})
	allowed := map[string]bool{"write_inside": true, "read_allowed": true, "socketpair": true, "unix_socket_made": true, "make_in_unlisted": true, "remove_in_unlisted": true}
	for name, a := range got {
		if a.OK != allowed[name] {
			t.Errorf("%s: ok=%v (%s), want ok=%v", name, a.OK, a.Err, allowed[name])
		}
	}
	if len(got) < 22 {
		t.Errorf("the child tried %d things, want every attempt reported: %v", len(got), got)
	}
}

// A fork bomb is bounded: by RLIMIT_NPROC for a user, by a pids cgroup for root (whom the kernel
// exempts from RLIMIT_NPROC).
func TestForkBombIsBounded(t *testing.T) {
	st := Probe()
	if st.Tasks == "" {
		t.Skipf("tasks cannot be bounded here: %v", st.Missing)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got := runChild(t, Policy{Env: []string{childVar + "=forks"}, ReadOnly: []string{self, "/proc", "/etc", "/usr", "/bin", "/lib", "/lib64"},
		Devices: []string{"/dev/null"}, MaxTasks: 64, Mode: ModeRequire})
	t.Logf("bounded by %s: %s", st.Tasks, got["forks"].Err)
	// RLIMIT_NPROC counts the user's tasks when the helper starts, its own threads among them,
	// so the bound is the 64 allowed give or take a few threads; a cgroup counts exactly.
	var n int
	fmt.Sscanf(got["forks"].Err, "%d started", &n)
	if got["forks"].OK || n < 16 || n > 64+16 {
		t.Errorf("the child started %d processes (%s), want some but about the 64 allowed", n, got["forks"].Err)
	}
}

// runChild runs this test binary confined by p (its childVar says what to try) and returns what it
// reported.
func runChild(t *testing.T, p Policy) map[string]attempt {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := Command(p, self)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the sandboxed child failed: %v\n%s", err, out)
	}
	var got map[string]attempt
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	return got
}

// A program the helper cannot start says why and exits ExitHelper, before anything runs.
func TestHelperFailureIsReported(t *testing.T) {
	cmd, err := Command(Policy{Env: []string{"PATH=/usr/bin"}}, "/nonexistent/python3")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitHelper || !strings.HasPrefix(string(out), HelperPrefix) {
		t.Fatalf("got %v, %q; want exit %d and a line starting %q", err, out, ExitHelper, HelperPrefix)
	}
}

func TestEnvironKeepsNoSecret(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/root", "OPENAI_API_KEY=sk-1", "ANTHROPIC_API_KEY=sk-2", "GEMINI_API_KEY=g",
		"AWS_SECRET_ACCESS_KEY=a", "KBP_DB=/db", "TORCH_HUB_TOKEN=t", "CUDA_VISIBLE_DEVICES=0", "LC_ALL=C", "SSH_AUTH_SOCK=/s",
		"TORCH_CUDA_ARCH_LIST=9.0", "PYTORCH_CUDA_ALLOC_CONF=x", "DBUS_SESSION_BUS_ADDRESS=y"}
	got := Environ(environ, []string{"HOME=/work", "KBP_CMD_FD=3", "CUTLASS_API_KEY=z", "CUDA_VISIBLE_DEVICES=1"})
	want := []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=1", "LC_ALL=C", "TORCH_CUDA_ARCH_LIST=9.0", "PYTORCH_CUDA_ALLOC_CONF=x", "HOME=/work", "KBP_CMD_FD=3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v\nwant %v", got, want)
	}
}
