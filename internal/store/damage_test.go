package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
