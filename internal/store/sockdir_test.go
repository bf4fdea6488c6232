package store

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The socket sits in a private folder whatever the database's path: under $XDG_RUNTIME_DIR, else
// the temporary folder's kbplatform-<uid>, made 0700; a path of any length fits an address.
func TestSocketLivesInAPrivateFolder(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 200))
	tests := []struct {
		name, xdg string
		parent    func(tmp string) string
	}{
		{"XDG_RUNTIME_DIR", "run", func(tmp string) string { return filepath.Join(tmp, "run", "kbplatform") }},
		{"temporary folder", "", func(tmp string) string { return filepath.Join(tmp, "tmp", "kbplatform-"+strconv.Itoa(os.Getuid())) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := shortTempDir(t)
			_ = os.Mkdir(filepath.Join(tmp, "run"), 0o700)
			_ = os.Mkdir(filepath.Join(tmp, "tmp"), 0o700)
			t.Setenv("TMPDIR", filepath.Join(tmp, "tmp"))
			if tc.xdg != "" {
				t.Setenv("XDG_RUNTIME_DIR", filepath.Join(tmp, tc.xdg))
			} else {
				t.Setenv("XDG_RUNTIME_DIR", "")
			}
			for _, dir := range []string{t.TempDir(), long} {
				p, err := socketPath(dir)
				if err != nil {
					t.Fatal(err)
				}
				if filepath.Dir(p) != tc.parent(tmp) || len(p) > maxSockLen {
					t.Errorf("socket %q, want one in %s of at most %d bytes", p, tc.parent(tmp), maxSockLen)
				}
				fi, err := os.Lstat(filepath.Dir(p))
				if err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("socket folder: %v, %v; want mode 0700", fi.Mode(), err)
				}
			}
			// A holder serves there, and a second opener finds it.
			dir := t.TempDir()
			holder, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			if holder.srv == nil || filepath.Dir(holder.srv.path) != tc.parent(tmp) {
				t.Fatalf("the holder does not serve in %s: %+v", tc.parent(tmp), holder.srv)
			}
			other, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, ok := other.kv.(*remoteKV); !ok {
				t.Errorf("second opener uses %T, want the holder's socket", other.kv)
			}
		})
	}
}

// A socket folder found open to others, or a link in its place (another user may have made
// /tmp/kbplatform-<uid> first), is refused: the socket is put nowhere, and the error says why.
func TestSocketFolderOfDoubtIsRefused(t *testing.T) {
	tests := []struct {
		name string
		make func(d string) error
		want string
	}{
		{"open to others", func(d string) error {
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
			return os.Chmod(d, 0o777)
		}, "open to other users"},
		{"a link", func(d string) error { return os.Symlink(os.TempDir(), d) }, "not a folder"},
		{"another user's", func(d string) error {
			if os.Getuid() != 0 {
				t.Skip("making a folder another user's needs root")
			}
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
			return os.Chown(d, 65534, 65534)
		}, "another user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := shortTempDir(t)
			t.Setenv("TMPDIR", tmp)
			t.Setenv("XDG_RUNTIME_DIR", "")
			d := filepath.Join(tmp, "kbplatform-"+strconv.Itoa(os.Getuid()))
			if err := tc.make(d); err != nil {
				t.Fatal(err)
			}
			_, err := socketPath(t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal that says %q", err, tc.want)
			}
		})
	}
}

// shortTempDir is a temporary folder with a short path (t.TempDir's carry the test's name), so
// that sockets under it fit an address.
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "kbps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
