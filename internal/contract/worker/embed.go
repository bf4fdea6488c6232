// Package worker holds the Python contract worker, embedded so that any target can ship it.
package worker

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
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

// Extract writes the worker under dir/<version> (once) and returns the path of run.py.
func Extract(dir string) (string, error) {
	root := filepath.Join(dir, "worker-"+Version())
	script := filepath.Join(root, "run.py")
	if _, err := os.Stat(filepath.Join(root, ".complete")); err == nil {
		return script, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".worker-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
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
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, root); err != nil {
		// Another process extracted the same version first.
		if _, statErr := os.Stat(filepath.Join(root, ".complete")); statErr == nil {
			return script, nil
		}
		return "", err
	}
	return script, nil
}
