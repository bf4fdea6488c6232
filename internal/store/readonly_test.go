package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// filled writes n kernels to a new database in dir and closes it, so that they sit in a table.
func filled(t *testing.T, dir string, n int) {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.PutKernel(KernelRecord{Hash: fmt.Sprintf("k%03d", i), Source: strings.Repeat("x", 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func countKernels(s *Store) (int, error) {
	n := 0
	err := s.scan(pKernel, false, func(_, _ []byte) (bool, error) { n++; return true, nil })
	return n, err
}

// snapshot names every file of dir with its size and modification time: what a reader must not
// change.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %d %d", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// A read-only open reads every record, changes no file (no LOCK pid file, no new log, no
// compaction), refuses writes, and lets another reader in at the same time.
func TestReadOnlyOpenChangesNothing(t *testing.T) {
	dir := t.TempDir()
	filled(t, dir, 30)
	before := snapshot(t, dir)
	r1, err := OpenWith(dir, Options{ReadOnly: true, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := OpenWith(dir, Options{ReadOnly: true, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("a second reader beside the first: %v", err)
	}
	for _, r := range []*Store{r1, r2} {
		if _, err := r.Kernel("k029"); err != nil {
			t.Errorf("read: %v", err)
		}
	}
	if err := r1.PutKernel(KernelRecord{Hash: "new", Source: "x"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write through a read-only store: got %v, want ErrReadOnly", err)
	}
	r1.Close()
	r2.Close()
	if after := snapshot(t, dir); after != before {
		t.Errorf("the folder changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// A reader of a database that was never written creates nothing and sees no records.
func TestReadOnlyOpenOfNoDatabaseCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s, err := OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := countKernels(s); err != nil || n != 0 {
		t.Errorf("got %d kernels, %v; want none", n, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the reader created %s (%v)", dir, err)
	}
}

// A reader goes through the holder like any other command, and still may not write.
func TestReadOnlyOpenGoesThroughTheHolder(t *testing.T) {
	dir := t.TempDir()
	holder, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := holder.PutKernel(KernelRecord{Hash: "held", Source: "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := OpenWith(dir, Options{ReadOnly: true, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.kv.(*remoteKV); !ok {
		t.Fatalf("reader uses %T, want the holder's socket", r.kv)
	}
	if _, err := r.Kernel("held"); err != nil {
		t.Errorf("read through the holder: %v", err)
	}
	if err := r.PutKernel(KernelRecord{Hash: "new", Source: "x"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write through the holder from a reader: got %v, want ErrReadOnly", err)
	}
}

// A process killed while it held the database leaves a log Badger's ReadOnly will not open; the
// reader replays it (nothing lost) and reads every record.
func TestReadOnlyOpenAfterAKilledHolder(t *testing.T) {
	if os.Getenv("KBP_STORE_HELPER") == "kill" {
		s, err := Open(os.Getenv("KBP_STORE_DIR"))
		if err != nil {
			os.Exit(2)
		}
		for i := range 20 {
			if err := s.PutKernel(KernelRecord{Hash: fmt.Sprintf("k%03d", i), Source: "x"}); err != nil {
				os.Exit(3)
			}
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadOnlyOpenAfterAKilledHolder$")
	cmd.Env = append(os.Environ(), "KBP_STORE_HELPER=kill", "KBP_STORE_DIR="+dir)
	if err := cmd.Run(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("helper: %v (want killed)", err)
	}
	if mems, _ := filepath.Glob(filepath.Join(dir, "*.mem")); len(mems) == 0 {
		t.Fatal("the killed process left no log: the test would prove nothing")
	}
	var notice string
	s, err := OpenWith(dir, Options{ReadOnly: true, Wait: 100 * time.Millisecond, Notice: func(m string) { notice = m }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := countKernels(s); err != nil || n != 20 {
		t.Errorf("got %d kernels, %v; want 20", n, err)
	}
	if !strings.Contains(notice, "killed") {
		t.Errorf("notice %q does not say the log was replayed", notice)
	}
}

// A database folder the user may not write (a shared result set) can be read. Badger used to
// fail with "Cannot write pid file .../LOCK". Root may write anywhere, so the reader runs as
// nobody.
func TestReadOnlyFolderCanBeRead(t *testing.T) {
	if os.Getenv("KBP_STORE_HELPER") == "read" {
		s, err := OpenWith(os.Getenv("KBP_STORE_DIR"), Options{ReadOnly: true, Wait: 100 * time.Millisecond})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		n, err := countKernels(s)
		fmt.Println("kernels:", n, err)
		os.Exit(0)
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to run the reader as another user (uid 65534) who may not write the folder")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "db")
	filled(t, dir, 10)
	bin := filepath.Join(base, "store.test")
	self, _ := os.ReadFile(os.Args[0])
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := base; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(t, dir)
	before := snapshot(t, dir)
	cmd := exec.Command(bin, "-test.run=^TestReadOnlyFolderCanBeRead$")
	cmd.Env = append(os.Environ(), "KBP_STORE_HELPER=read", "KBP_STORE_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kernels: 10 <nil>") {
		t.Fatalf("reader as uid 65534: %v\n%s", err, out)
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("the folder changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// readOnly makes dir and its files readable, and writable by nobody (root aside).
func readOnly(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Chmod(filepath.Join(dir, e.Name()), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) }) // so that the test's folder can be removed
}
