package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check reads every block of every table: a byte changed inside a data block, which an open does
// not notice (it reads only the index), is found and the table named; the file is not changed.
func TestCheckFindsADamagedBlock(t *testing.T) {
	dir := t.TempDir()
	filled(t, dir, 50)
	h, err := Check(dir)
	if err != nil || !h.OK() || h.Records["k/"] != 50 {
		t.Fatalf("healthy database: %+v, %v", h, err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0xff // inside the first data block
	if err := os.WriteFile(tables[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	h, err = Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h.OK() || !strings.Contains(strings.Join(h.Damaged, "\n"), filepath.Base(tables[0])) {
		t.Errorf("damaged: %q, want %s named", h.Damaged, filepath.Base(tables[0]))
	}
	if got, _ := os.ReadFile(tables[0]); string(got) != string(b) {
		t.Error("check changed the table")
	}
}
