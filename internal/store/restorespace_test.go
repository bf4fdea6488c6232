package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// backupOf writes a database of n records of size bytes each (random, so that nothing
// compresses them away) and its backup file, and returns the file's path.
func backupOf(t *testing.T, n, size int) string {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := make([]byte, size)
		rand.Read(v)
		if err := s.put(map[string][]byte{fmt.Sprintf("x/%06d", i): v}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "db.bak")
	if _, err := s.BackupFile(path); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// restoreFile restores the backup at path into dir as db restore does: its size from the file.
func restoreFile(dir, path string, force bool) (RestoreReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return RestoreReport{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return RestoreReport{}, err
	}
	return Restore(dir, f, st.Size(), force)
}

// A restore that its disk has no room for is refused before anything is written, with a
// message that names the folder, the room and what to do; one that fits goes through on the same
// disk. On a small tmpfs (root only), with real backups.
func TestRestoreChecksRoom(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	disk := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", disk).Run() })
	big, small := backupOf(t, 16, 1<<20), backupOf(t, 8, 4<<10)
	dir := filepath.Join(disk, "db")

	_, err := restoreFile(dir, big, false)
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a 16 MiB backup into 64 MiB: %v, want ErrDiskFull", err)
	}
	for _, w := range []string{dir, "MiB free", "3 times the backup's", "Nothing was changed", "--db"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal lacks %q: %v", w, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused restore made %s (%v)", dir, err)
	}

	rep, err := restoreFile(dir, small, false)
	if err != nil || rep.Loaded != 8 {
		t.Fatalf("a small backup: %+v %v", rep, err)
	}
	// Over those records, --force must also find room for their backup beside the folder.
	if _, err := restoreFile(dir, big, true); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "the records it replaces") {
		t.Fatalf("restore --force of a 16 MiB backup into 64 MiB: %v", err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	if err := s.scan("x/", false, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil || n != 8 {
		t.Errorf("after the refused --force restore the database holds %d records (%v), want the 8 it held", n, err)
	}
}
