package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The holder's socket lives in a folder only this user can enter: $XDG_RUNTIME_DIR/kbplatform,
// else kbplatform-<uid> in the temporary folder. It used to sit in the database folder, or, for a
// path too long for a socket address, straight in /tmp, where another user could bind it first
// (and where a read-only database folder could not hold it at all). A folder this process makes
// 0700 keeps everyone else from binding or reaching the socket; one it finds is trusted only when
// it is a real folder (not a link), owned by this user and closed to others, since another user
// could have made /tmp/kbplatform-<uid> first. Both ends still check the peer (checkPeer).

// socketPath is where the holder of the database in dir serves it: one name per database,
// derived from its resolved path, so that every spelling of the path finds the same socket.
func socketPath(dir string) (string, error) {
	d, err := socketDir()
	if err != nil {
		return "", err
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	h := sha256.Sum256([]byte(dir))
	return filepath.Join(d, hex.EncodeToString(h[:8])+".sock"), nil
}

// socketDir returns this user's private folder for sockets, made if needed: the first of
// $XDG_RUNTIME_DIR/kbplatform, $TMPDIR/kbplatform-<uid> and /tmp/kbplatform-<uid> whose socket
// paths fit an address and that can be made or found. One found that is not private is refused,
// not passed over: it is what another user who got there first would leave.
func socketDir() (string, error) {
	var dirs []string
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Join(x, "kbplatform"))
	}
	user := fmt.Sprintf("kbplatform-%d", os.Getuid())
	dirs = append(dirs, filepath.Join(os.TempDir(), user), filepath.Join("/tmp", user))
	var tried []error
	for _, d := range dirs {
		if len(d)+22 > maxSockLen { // 16 hex digits and ".sock" follow
			continue
		}
		err := privateDir(d)
		if err == nil || errors.Is(err, errNotPrivate) {
			return d, err
		}
		tried = append(tried, err)
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("no folder for the database's socket: %s are too long for a socket address", strings.Join(dirs, ", "))
	}
	return "", errors.Join(tried...)
}

var errNotPrivate = errors.New("refusing to put the database's socket there")

// privateDir makes d (0700) or accepts the one there when it is a folder of this user's that no
// one else may enter.
func privateDir(d string) error {
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("socket folder %s: %w", d, err)
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("socket folder %s: %w", d, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("socket folder %s is not a folder (%s): %w; remove it", d, fi.Mode().Type(), errNotPrivate)
	case !ok:
		return fmt.Errorf("socket folder %s: cannot tell its owner: %w", d, errNotPrivate)
	case int(st.Uid) != os.Getuid():
		return fmt.Errorf("socket folder %s belongs to another user (uid %d): %w; remove it, or set XDG_RUNTIME_DIR to a folder of your own", d, st.Uid, errNotPrivate)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("socket folder %s is open to other users (mode %v): %w; chmod 700 it", d, fi.Mode().Perm(), errNotPrivate)
	}
	return nil
}
