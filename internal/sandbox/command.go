package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// helperArg, as the first argument of this binary, makes it the sandbox helper (helper_linux.go):
// it reads the policy from policyVar, confines itself and executes the program.
const (
	helperArg = "__kbp-sandbox-exec"
	policyVar = "KBP_SANDBOX_POLICY"
)

// ExitHelper is the exit status of a helper that could not confine the program (the program never
// ran); its reason is the line it printed on standard error, which starts with HelperPrefix.
const (
	ExitHelper   = 125
	HelperPrefix = "kbplatform sandbox: "
)

// Command returns a command that runs name with args confined by p: this binary re-executed as the
// helper, which applies p and then executes name. The caller sets what exec.Cmd leaves to it
// (folder, standard streams, extra files, process attributes); the command's environment is the
// helper's and must not be changed (the program's is p.Env).
func Command(p Policy, name string, args ...string) (*exec.Cmd, error) {
	return command(p, name, args...)
}

func helperCommand(p Policy, name string, args ...string) (*exec.Cmd, error) {
	b, err := json.Marshal(helperRequest{Policy: p, Path: name, Args: append([]string{name}, args...)})
	if err != nil {
		return nil, err
	}
	self, err := executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: find this binary to re-execute: %w", err)
	}
	cmd := exec.Command(self, helperArg)
	cmd.Args[0] = "kbplatform-sandbox"
	cmd.Env = []string{policyVar + "=" + string(b)}
	return cmd, nil
}

// helperRequest is what Command hands the helper.
type helperRequest struct {
	Policy Policy   `json:"policy"`
	Path   string   `json:"path"`
	Args   []string `json:"args"`
}

// executable is the binary to re-execute: this one, through /proc/self/exe where there is one (it
// names the running binary even when its file has since been replaced).
func executable() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}
