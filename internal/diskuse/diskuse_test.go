package diskuse

import (
	"os"
	"path/filepath"
	"testing"
)

// A sparse file counts for the blocks it holds, not its length; a written one for its bytes;
// links are not followed; the bound stops the walk.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	written := make([]byte, 1<<20)
	for i := range written {
		written[i] = 1
	}
	if err := os.WriteFile(filepath.Join(dir, "written"), written, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "big"), written, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	n := Of(dir, 0)
	if n < 1<<20 || n > 2<<20 {
		t.Errorf("Of = %d bytes, want about 1 MiB (the written file; the sparse gigabyte holds nothing, the link is not followed)", n)
	}
	if got := Of(dir, 1); got != 0 {
		t.Errorf("Of with a bound of one entry (the folder itself) = %d, want 0", got)
	}
}
