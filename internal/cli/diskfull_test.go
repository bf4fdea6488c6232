package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallDisk mounts a 64 MiB tmpfs for the test and returns its folder; it skips where mounting
// is not allowed (not root), since a full disk cannot be made otherwise without filling a real one.
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs to fill (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s): no small disk to fill", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file into dir until the disk has no room left, and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	// The last few kilobytes too: nothing is left for a new page of a memory-mapped file.
	for _, n := range []int{64 << 10, 4 << 10, 512} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return p
}

// crashed reports what in a command's output shows it died instead of failing cleanly.
func crashed(out string) string {
	for _, bad := range []string{"SIGBUS", "fatal error", "goroutine ", "panic:"} {
		if strings.Contains(out, bad) {
			return bad
		}
	}
	return ""
}

// A disk that fills while a study runs stops it with a message, not a crash (Badger writes
// through memory-mapped files, and a full disk under them used to end the process with SIGBUS
// and a 1,156-line goroutine dump): the message says the disk is full, which evaluation was not
// stored and how to go on. Every unit stored before is kept; once there is room again the
// database checks whole and the study resumes and finishes. A command started on the full disk
// is refused at once with the same message.
func TestFullDiskIsAnError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a study")
	}
	disk := smallDisk(t)
	env := isolated(t)
	env["KBP_DB"] = filepath.Join(disk, "db")
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: env}
	args := append([]string{"study", "run", "--tasks", "kbp/l1/relu,kbp/l1/mse_loss", "--model", "replay",
		"--model-config", `{"source":"examples","backend":"cpp"}`, "--backend", "cpp", "--strategy", "oneshot",
		"--device", "cpu", "--size", "cpu"}, fastContract...)
	study := r.command(args...)
	var out, errOut bytesBuffer
	study.Stdout, study.Stderr = &out, &errOut
	if err := study.Start(); err != nil {
		t.Fatal(err)
	}
	defer study.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- study.Wait() }()
	for end := time.Now().Add(4 * time.Minute); !strings.Contains(errOut.String(), ": done in "); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the study ended before its first unit was done: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("no unit finished:\n%s", errOut.String())
		}
	}
	filler := fill(t, disk)
	var err error
	select {
	case err = <-exited:
	case <-time.After(4 * time.Minute):
		t.Fatalf("the study did not stop on the full disk:\n%s", errOut.String())
	}
	all := out.String() + errOut.String()
	if bad := crashed(all); bad != "" {
		t.Fatalf("the study crashed on the full disk (%q):\n%s", bad, all)
	}
	if err == nil {
		t.Fatalf("the study exited 0 on a full disk:\n%s", all)
	}
	for _, want := range []string{"the disk is full", env["KBP_DB"], "every record stored before is kept", "run the command again",
		"the evaluation of kbp/l1/mse_loss (kernel ", "was not stored"} {
		if !strings.Contains(all, want) {
			t.Errorf("the message lacks %q:\n%s", want, lastLines(all, 15))
		}
	}
	t.Logf("the study's last words:\n%s", lastLines(errOut.String(), 6))

	// Started on the full disk, a command is refused before it runs anything.
	o, e, code := r.run("eval", "--task", "kbp/l1/relu", "--kernel", filepath.Join("..", "..", "examples", "kernels", "relu", "cpp.py"), "--device", "cpu", "--size", "cpu")
	if code == 0 || crashed(o+e) != "" || !strings.Contains(e, "the disk is full") || strings.Contains(e, "timing") {
		t.Errorf("eval on the full disk: exit %d:\n%s%s", code, o, e)
	}

	// Room again: nothing was lost, and the study goes on where it stopped.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if o, e, code := r.run("db", "check"); code != 0 {
		t.Fatalf("db check after the disk was freed: exit %d\n%s%s", code, o, e)
	}
	o, e, code = r.run(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("the resumed study: exit %d\n%s\n%s", code, o, e)
	}
	if !strings.Contains(e, "1 of 2 units done in an earlier run") {
		t.Errorf("the unit stored before the disk filled was not kept:\n%s", e)
	}
	if !strings.Contains(e, "2/2 units done") {
		t.Errorf("the resumed study did not finish:\n%s", lastLines(e, 10))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
