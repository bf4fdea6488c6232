//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// Probe says what a sandbox holds on this host: nothing outside Linux.
func Probe() Status {
	return Status{Network: "open", Env: "allowlist", Missing: []string{"sandbox: Landlock and seccomp exist only on Linux"}}
}

// command runs the program with the policy's environment alone: the only part that holds here.
func command(p Policy, name string, args ...string) (*exec.Cmd, error) {
	if p.Mode == ModeRequire {
		return nil, errors.New("sandbox: required, but Landlock and seccomp exist only on Linux")
	}
	cmd := exec.Command(name, args...)
	cmd.Env = p.Env
	return cmd, nil
}
