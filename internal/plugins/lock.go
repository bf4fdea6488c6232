package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// LockVersion is the lock file format version.
const LockVersion = 1

// Lock pins third-party plugin binaries: a binary runs only while its sha256 matches.
type Lock struct {
	Version int         `json:"version"`
	Plugins []LockEntry `json:"plugins"`
}

// LockEntry is one pinned binary with the identity it reported when locked.
type LockEntry struct {
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	Version  string    `json:"version"`
	Protocol int       `json:"protocol"`
	Path     string    `json:"path"`
	SHA256   string    `json:"sha256"`
	LockedAt time.Time `json:"locked_at"`
}

// ReadLock reads a lock file; a missing file is an empty lock.
func ReadLock(path string) (*Lock, error) {
	if path == "" {
		return &Lock{Version: LockVersion}, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Lock{Version: LockVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	var l Lock
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("plugin lock file %s: %w", path, err)
	}
	if l.Version > LockVersion {
		return nil, fmt.Errorf("plugin lock file %s has version %d; this kbplatform reads %d", path, l.Version, LockVersion)
	}
	return &l, nil
}

// WriteLock writes the lock file atomically.
func WriteLock(path string, l *Lock) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plugins-lock-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// LockAll starts every third-party binary on the plugin path, reads its identity and pins its
// current sha256. Binaries that fail to report an identity are returned as problems and not locked.
func (m *Manager) LockAll(ctx context.Context) (*Lock, map[string]string, error) {
	if m.opt.LockFile == "" {
		return nil, nil, errors.New("no lock file configured")
	}
	cands, err := m.scan(ctx, true)
	if err != nil {
		return nil, nil, err
	}
	lock := &Lock{Version: LockVersion}
	problems := map[string]string{}
	seen := map[string]string{}
	for _, c := range cands {
		if c.Source != SourceThirdParty {
			continue
		}
		if c.Info == nil {
			problems[c.Path] = c.Problem
			continue
		}
		ref := c.Info.Kind + "/" + c.Info.Name
		if other, ok := seen[ref]; ok {
			problems[c.Path] = fmt.Sprintf("%s is already provided by %s (earlier on the plugin path)", ref, other)
			continue
		}
		seen[ref] = c.Path
		lock.Plugins = append(lock.Plugins, LockEntry{Kind: c.Info.Kind, Name: c.Info.Name, Version: c.Info.Version,
			Protocol: c.Info.Protocol, Path: c.Path, SHA256: c.SHA256, LockedAt: time.Now().UTC()})
	}
	sort.Slice(lock.Plugins, func(i, j int) bool {
		return lock.Plugins[i].Kind+"/"+lock.Plugins[i].Name < lock.Plugins[j].Kind+"/"+lock.Plugins[j].Name
	})
	return lock, problems, WriteLock(m.opt.LockFile, lock)
}
