package store

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/contract"
)

// A second opener of a held database reads and writes through the holder's socket, and takes the
// database over when the holder closes it.
func TestSecondOpenGoesThroughTheHolder(t *testing.T) {
	dir := t.TempDir()
	holder, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var notice string
	other, err := OpenWith(dir, Options{Notice: func(m string) { notice = m }})
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	defer other.Close()
	if !strings.Contains(notice, "going through it") {
		t.Errorf("notice: %q", notice)
	}
	if _, ok := other.kv.(*remoteKV); !ok {
		t.Fatalf("second store uses %T, want the holder's socket", other.kv)
	}
	tests := []struct {
		name          string
		writer, reade *Store
		task          string
	}{
		{"holder writes, other reads", holder, other, "kbp/l1/a"},
		{"other writes, holder reads", other, holder, "kbp/l1/b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := &Evaluation{Target: "local/cpu", Result: result(tc.task, "k"+tc.task, contract.Pass)}
			if err := tc.writer.PutEvaluation(ev); err != nil {
				t.Fatal(err)
			}
			got, err := tc.reade.Evaluation(ev.ID[:12])
			if err != nil || got.Result.Task.ID != tc.task {
				t.Fatalf("got %+v, %v", got, err)
			}
			list, err := tc.reade.Evaluations(EvalFilter{Task: tc.task})
			if err != nil || len(list) != 1 {
				t.Fatalf("list: %d, %v", len(list), err)
			}
		})
	}
	if _, err := other.Evaluation("ffff"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing id through the socket: %v", err)
	}
	// The holder finishes: the other store takes the database over and still sees everything.
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	list, err := other.Evaluations(EvalFilter{})
	if err != nil || len(list) != 2 {
		t.Fatalf("after the holder closed: %d, %v", len(list), err)
	}
	if _, ok := other.kv.(*badgerKV); !ok {
		t.Errorf("after the holder closed the store uses %T, want Badger", other.kv)
	}
}

// A socket file left by a killed holder does not stop the next one; a holder that does not answer
// makes Open fail after its wait with a message that says what to do.
func TestStaleSocketAndSilentHolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path, err := socketPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close() // the file stays, nobody listens: what kill -9 leaves
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("open over a stale socket: %v", err)
	}
	// Hold the lock without serving: a silent holder.
	s.srv.close()
	start := time.Now()
	_, err = OpenWith(dir, Options{Wait: 300 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "another --db") {
		t.Fatalf("silent holder: %v", err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("gave up before its wait")
	}
	s.srv = nil
	s.Close()
}
