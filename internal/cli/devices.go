package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// pickDevices resolves --device for the commands that spread their evaluations over several
// devices (eval, baseline, study run): one device, a list (cuda:0,cuda:2) or all (every GPU of
// the target; its CPU when it has none). A device the target lacks is refused before anything
// runs, naming the ones it has.
func (a *app) pickDevices(hw *sdk.Hardware) ([]string, error) {
	d := a.cfg.Device
	if d != "all" && !strings.Contains(d, ",") {
		one, err := a.pickDevice(hw)
		if err != nil {
			return nil, err
		}
		return []string{one}, nil
	}
	devs, err := deviceList(d, hw)
	if err != nil {
		return nil, exitError{code: exitNoVerdict, msg: fmt.Sprintf("platform: target %s: %v; pick others with --device", a.v.GetString("target"), err)}
	}
	return devs, nil
}

// checkDeviceSetting refuses a --device that names no device at all (a usage error, exit 1) before
// any target starts; one that is well formed but absent from the target is the platform's to
// refuse (pickDevices, exit 4).
func checkDeviceSetting(spec string) error {
	if spec == "" || spec == "auto" || spec == "all" {
		return nil
	}
	for _, d := range strings.Split(spec, ",") {
		d = strings.TrimSpace(d)
		kind, rest, indexed := strings.Cut(d, ":")
		ok := (d == "cpu" || kind == "cuda") && (!indexed || (rest != "" && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789-_.") == ""))
		if !ok {
			return fmt.Errorf("--device %s: %q is not a device; want cpu, cuda, cuda:N (or a GPU kind such as cuda:h200 on a cluster), a comma-separated list of them, all or auto", spec, d)
		}
	}
	return nil
}

// deviceList parses "all" or a comma-separated list against the target's devices.
func deviceList(spec string, hw *sdk.Hardware) ([]string, error) {
	var names, gpus []string
	for _, d := range hw.Devices {
		names = append(names, d.Name)
		if d.Kind == "cuda" {
			gpus = append(gpus, d.Name)
		}
	}
	if spec == "all" {
		if len(gpus) == 0 {
			return []string{"cpu"}, nil
		}
		return gpus, nil
	}
	var out []string
	for _, d := range strings.Split(spec, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "":
			return nil, fmt.Errorf("empty device in %q", spec)
		case !slices.Contains(names, d):
			return nil, fmt.Errorf("no device %s (it has: %s)", d, strings.Join(names, ", "))
		case slices.Contains(out, d):
			return nil, fmt.Errorf("device %s given twice in %q: a device runs one evaluation at a time", d, spec)
		}
		out = append(out, d)
	}
	if slices.Contains(out, "cpu") && len(out) > 1 {
		// A CPU timing next to GPU work (or another CPU timing) is disturbed, and task sizes are
		// picked per kind of device.
		return nil, fmt.Errorf("cpu cannot be combined with other devices in %q", spec)
	}
	return out, nil
}

// deviceModels names each device's model, so that a build is shared only between devices of one
// model and results of a mixed host are told apart.
func deviceModels(hw *sdk.Hardware) map[string]string {
	m := map[string]string{}
	for _, d := range hw.Devices {
		m[d.Name] = d.Model + "/" + d.ComputeCapability
	}
	return m
}
