package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A database whose MANIFEST was deleted or truncated is refused, and its tables stay: Badger
// would have deleted every table its manifest does not list, and a read command then printed
// "0 evaluations". With the MANIFEST back, every record is there.
func TestDamagedManifestIsRefusedAndNothingIsLost(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.PutKernel(KernelRecord{Hash: fmt.Sprintf("k%03d", i), Source: strings.Repeat("x", 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // closing flushes the memtable into a table
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table was written: the test would prove nothing")
	}
	manifest := filepath.Join(dir, "MANIFEST")
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for name, damage := range map[string]func() error{
		"truncated to its header": func() error { return os.WriteFile(manifest, good[:8], 0o600) },
		"deleted":                 func() error { return os.Remove(manifest) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := damage(); err != nil {
				t.Fatal(err)
			}
			_, err := OpenWith(dir, Options{Wait: 100 * 1e6})
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("got %v, want ErrDamaged", err)
			}
			if !strings.Contains(err.Error(), "Nothing was changed") {
				t.Errorf("the error does not say what to do: %v", err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*.sst")); len(left) != len(tables) {
				t.Fatalf("%d of %d tables left", len(left), len(tables))
			}
			if err := os.WriteFile(manifest, good, 0o600); err != nil {
				t.Fatal(err)
			}
		})
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, h := range []string{"k000", "k049"} {
		if _, err := s.Kernel(h); err != nil {
			t.Errorf("record %s after the MANIFEST came back: %v", h, err)
		}
	}
}

// A table cut short used to crash the command with a panic in one of Badger's goroutines; one
// overwritten with zeros was left out, so that its records read as "not found". Both are now
// refused, by a reader and a writer alike, with the file named, and the file stays as it was.
func TestDamagedTableIsRefusedAndKept(t *testing.T) {
	tests := []struct {
		name   string
		damage func(good []byte) []byte
	}{
		{"truncated", func(good []byte) []byte { return good[:len(good)/2] }},
		{"zeroed", func(good []byte) []byte { return make([]byte, len(good)) }},
		{"cut to nothing", func([]byte) []byte { return nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			filled(t, dir, 50)
			tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			if len(tables) == 0 {
				t.Fatal("no table was written: the test would prove nothing")
			}
			good, err := os.ReadFile(tables[0])
			if err != nil {
				t.Fatal(err)
			}
			bad := tc.damage(good)
			if err := os.WriteFile(tables[0], bad, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{true, false} {
				_, err := OpenWith(dir, Options{ReadOnly: ro, Wait: 100 * time.Millisecond})
				if !errors.Is(err, ErrDamaged) {
					t.Fatalf("read-only %v: got %v, want ErrDamaged", ro, err)
				}
				if !strings.Contains(err.Error(), filepath.Base(tables[0])) || !strings.Contains(err.Error(), "db restore") {
					t.Errorf("read-only %v: the error does not name the table or say what to do: %v", ro, err)
				}
			}
			if got, _ := os.ReadFile(tables[0]); !bytes.Equal(got, bad) {
				t.Errorf("the damaged table was changed (%d bytes, was %d)", len(got), len(bad))
			}
			if err := os.WriteFile(tables[0], good, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := OpenWith(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("with the table back: %v", err)
			}
			defer s.Close()
			if n, err := countKernels(s); err != nil || n != 50 {
				t.Errorf("with the table back: %d kernels, %v; want 50", n, err)
			}
		})
	}
}
