package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writerEnv makes the test binary a process that holds the database named, writes three
// records, says "ready", and once told (a line on stdin) writes one more and closes, printing
// what each returned: the holder of a database whose disk fills under it.
const writerEnv = "KBP_STORE_TEST_FULL_DISK_WRITER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(writerEnv); dir != "" {
		s, err := Open(dir)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		for _, id := range []string{"a", "b", "c"} {
			if err := s.PutStudy(Study{ID: id, Name: "before the disk filled"}); err != nil {
				fmt.Println("put:", err)
				os.Exit(1)
			}
		}
		fmt.Println("ready")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("put:", s.PutStudy(Study{ID: "d"}))
		fmt.Println("close:", s.Close())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// On a disk that fills while the database is open, a write is refused with ErrDiskFull and the
// close leaves its flush to the next open, instead of dying of SIGBUS in Badger's memory-mapped
// files; a command started on the full disk is refused before Badger maps anything; the records
// written before are all there once the disk has room again.
func TestFullDiskWriteAndClose(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs to fill")
	}
	disk := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", disk).Run() })
	dir, other := filepath.Join(disk, "db"), filepath.Join(disk, "other")
	s, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	writer := exec.Command(os.Args[0], "-test.run=^$")
	writer.Env = append(os.Environ(), writerEnv+"="+dir)
	in, _ := writer.StdinPipe()
	outPipe, _ := writer.StdoutPipe()
	var stderr strings.Builder
	writer.Stderr = &stderr
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer writer.Process.Kill()
	out := bufio.NewReader(outPipe)
	if line, _ := out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("the writer said %q", line)
	}

	filler := filepath.Join(disk, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1 << 20; n >= 512; {
		if _, err := f.Write(make([]byte, n)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			n /= 8
		}
	}
	f.Close()

	if _, err := Open(other); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), other) {
		t.Errorf("opening a database on the full disk: %v", err)
	}
	in.Write([]byte("go\n"))
	put, _ := out.ReadString('\n')
	closed, _ := out.ReadString('\n')
	werr := writer.Wait()
	if werr != nil || strings.Contains(stderr.String(), "SIGBUS") {
		t.Fatalf("the writer died on the full disk: %v\n%s", werr, stderr.String())
	}
	if !strings.HasPrefix(put, "put: the disk is full: the disk holding the database "+dir) || !strings.Contains(put, "run the command again") {
		t.Errorf("a write on the full disk: %s", put)
	}
	if !strings.Contains(closed, "left for the next command") || !strings.Contains(closed, "the disk is full") {
		t.Errorf("closing on the full disk: %s", closed)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Studies()
	if err != nil || len(got) != 3 {
		t.Fatalf("after the disk was freed: %d studies (%v), want the 3 stored before", len(got), err)
	}
}
