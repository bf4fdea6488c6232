package store

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// peerUID is the user id of the process at the other end of a unix socket connection
// (SO_PEERCRED: the kernel's word, not the peer's).
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// checkPeer refuses a connection whose other end is another user's process. A database path too
// long for a socket address puts the holder's socket in the shared temporary folder, where another
// user could bind it first and be trusted with every record a command reads or writes.
func checkPeer(c net.Conn, what string) error {
	uid, err := peerUID(c)
	if err != nil {
		return fmt.Errorf("%s: cannot tell who is at the other end: %w", what, err)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("%s is served by another user (uid %d, you are %d): refusing to trust it; remove it, or use a --db path short enough for the socket to live in the database folder", what, uid, os.Getuid())
	}
	return nil
}
