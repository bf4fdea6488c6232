package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// holdRead opens dir read-only in another process (this test binary, as a read command would)
// and returns its pid and a func that has it close the database and exit.
func holdRead(t *testing.T, dir string) (int, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriterWaitsForReaders$")
	cmd.Env = append(os.Environ(), "KBP_STORE_HELPER=hold-read", "KBP_STORE_DIR="+dir)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("the reader said %q", line)
	}
	var once bool
	release := func() {
		if !once {
			once = true
			in.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(release)
	return cmd.Process.Pid, release
}

// A command that writes, while only read-only commands hold the database, waits for them longer
// than for a holder that is starting, says whom it waits for, goes on once they finish, and if
// they outlast its wait says that a read-only command holds the database (not that a holder
// does not answer on its socket).
func TestWriterWaitsForReaders(t *testing.T) {
	if os.Getenv("KBP_STORE_HELPER") == "hold-read" {
		s, err := OpenWith(os.Getenv("KBP_STORE_DIR"), Options{ReadOnly: true, Wait: 100 * time.Millisecond})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		s.Close()
		os.Exit(0)
	}
	dir := t.TempDir()
	filled(t, dir, 5)

	t.Run("readers outlast the wait", func(t *testing.T) {
		pid, release := holdRead(t, dir)
		defer release()
		var notices []string
		start := time.Now()
		_, err := OpenWith(dir, Options{Wait: 100 * time.Millisecond, ReaderWait: 700 * time.Millisecond, Notice: func(m string) { notices = append(notices, m) }})
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("got %v, want ErrLocked", err)
		}
		t.Logf("%v", err)
		if waited := time.Since(start); waited < 700*time.Millisecond {
			t.Errorf("gave up after %s, before the readers' wait", waited)
		}
		who := fmt.Sprintf("a read-only kbplatform command (pid %d (", pid)
		for _, w := range []string{who, "only reads and will finish", "run this command again"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("the error lacks %q: %v", w, err)
			}
		}
		if strings.Contains(err.Error(), "does not answer") {
			t.Errorf("the error blames a holder's socket: %v", err)
		}
		if len(notices) != 1 || !strings.Contains(notices[0], who) || !strings.Contains(notices[0], "waiting for it to finish") {
			t.Errorf("notices %q, want one that says whom it waits for", notices)
		}
	})

	t.Run("readers finish", func(t *testing.T) {
		_, release := holdRead(t, dir)
		go func() { time.Sleep(600 * time.Millisecond); release() }()
		start := time.Now()
		s, err := OpenWith(dir, Options{Wait: 100 * time.Millisecond, ReaderWait: 30 * time.Second})
		if err != nil {
			t.Fatalf("after the reader finished: %v", err)
		}
		defer s.Close()
		if waited := time.Since(start); waited < 500*time.Millisecond {
			t.Errorf("opened after %s, while the reader still held the database", waited)
		}
		if err := s.PutKernel(KernelRecord{Hash: "after", Source: "x"}); err != nil {
			t.Errorf("write after the reader finished: %v", err)
		}
	})
}
