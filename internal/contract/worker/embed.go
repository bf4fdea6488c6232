// Package worker holds the Python contract worker, embedded so that any target can ship it.
package worker

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

//go:embed run.py kbpworker/*.py
var files embed.FS

// FS returns the worker's files.
func FS() fs.FS { return files }

var versionOnce = sync.OnceValue(func() string {
	h := sha256.New()
	var names []string
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, n := range names {
		b, _ := files.ReadFile(n)
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})

// Version is a content hash of the embedded worker.
func Version() string { return versionOnce() }

// Extract writes the worker under dir/worker-<version> and returns the path of run.py. A folder
// already there is used only when its files are exactly the embedded ones (Verify): one whose
// files were changed, or that holds files of its own (a module that would shadow torch), is moved
// aside and written afresh, and the error says so (ErrReplaced) beside the path.
//
// The files are read-only (0444): the sandbox is what keeps a kernel from writing them, and the
// modes keep a careless hand of the user's from doing it. The folders stay writable by their owner,
// so that removing the cache (rm -rf) works as for any other.
func Extract(dir string) (string, error) {
	root := filepath.Join(dir, "worker-"+Version())
	script := filepath.Join(root, "run.py")
	verr := Verify(root)
	if verr == nil {
		return script, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".worker-*")
	if err != nil {
		return "", err
	}
	defer removeTree(tmp)
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, p)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o444)
	})
	if err != nil {
		return "", err
	}
	replaced := false
	if _, err := os.Lstat(root); err == nil {
		// A folder that failed Verify: moved aside (a rename needs no rights inside it), then removed.
		aside, err := os.MkdirTemp(dir, ".replaced-*")
		if err != nil {
			return "", err
		}
		if err := os.Rename(root, filepath.Join(aside, "worker")); err != nil {
			return "", err
		}
		defer removeTree(aside)
		replaced = true
	}
	if err := os.Rename(tmp, root); err != nil {
		// Another process extracted the same version first.
		if Verify(root) == nil {
			return script, nil
		}
		return "", err
	}
	if replaced {
		return script, fmt.Errorf("%w: %v", ErrReplaced, verr)
	}
	return script, nil
}

// ErrReplaced is returned beside the path when Extract found the worker's files changed and wrote
// them again.
var ErrReplaced = errors.New("the extracted worker's files had been changed and were written again")

// Verify checks that root holds exactly the embedded worker: every file with the embedded
// content, and nothing else.
func Verify(root string) error {
	want := map[string]bool{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			want[p] = d.IsDir()
		}
		return err
	})
	if err != nil {
		return err
	}
	seen := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		isDir, ok := want[rel]
		if !ok {
			return fmt.Errorf("%s is not part of the worker", p)
		}
		if isDir != d.IsDir() || !(d.IsDir() || d.Type().IsRegular()) {
			return fmt.Errorf("%s is not what the worker has there", p)
		}
		seen++
		if d.IsDir() {
			return nil
		}
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if b, _ := files.ReadFile(rel); !bytes.Equal(got, b) {
			return fmt.Errorf("%s differs from the worker's", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if seen != len(want) {
		return fmt.Errorf("%s lacks %d of the worker's files", root, len(want)-seen)
	}
	return nil
}

// removeTree removes a tree whose folders may be read-only (as extractions before this one left
// them).
func removeTree(root string) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(root)
}
