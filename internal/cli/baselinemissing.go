package cli

import (
	"fmt"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// A baseline over a whole import is long (KernelBench's 250 tasks take the better part of an hour
// on a GPU) and is often cut short: a lent machine taken back, a session's time spent, a Ctrl-C.
// Every pair timed so far is stored; --missing picks up where the run stopped by timing only the
// task and mode pairs that have no stored baseline of the same task source, size and contract
// version on the same platform. A stored baseline with no verdict (the platform or the harness
// failed: an out-of-memory error, a crash of the worker) is timed again.

// missingBaselines keeps the items that --missing still has to time. A platform the target does
// not describe (no torch version, no model for the device) matches nothing: every item is kept,
// and the reason is returned for the progress line.
func missingBaselines(st *store.Store, items []baselineItem, device string, hw *sdk.Hardware) ([]baselineItem, string, error) {
	want, why := platformOf(hw, device)
	if why != "" {
		return items, why, nil
	}
	stored := map[string][]store.Baseline{}
	var keep []baselineItem
	for _, it := range items {
		bs, ok := stored[it.task.ID]
		if !ok {
			var err error
			if bs, err = st.Baselines(it.task.ID); err != nil {
				return nil, "", err
			}
			stored[it.task.ID] = bs
		}
		if !timedBefore(bs, it, want) {
			keep = append(keep, it)
		}
	}
	return keep, "", nil
}

// platformID is what --missing compares between the target's description and a stored
// baseline's fingerprint: the device's model and driver and the torch version. (The platform key
// of a record hashes the worker's own fingerprint, which exists only once a worker has run.)
type platformID struct {
	model, driver, torch string
}

func platformOf(hw *sdk.Hardware, device string) (platformID, string) {
	if hw == nil {
		return platformID{}, "the target did not describe its hardware"
	}
	var p platformID
	p.torch, _ = hw.Fingerprint["torch"].(string)
	for _, d := range hw.Devices {
		if d.Name == device {
			p.model, p.driver = d.Model, d.Driver
		}
	}
	switch {
	case p.torch == "":
		return p, "the target does not say which torch it runs"
	case p.model == "":
		return p, fmt.Sprintf("the target does not name the model of %s", device)
	}
	return p, ""
}

// timedBefore reports whether one of the stored baselines has a verdict for the item, under the
// current contract, on the platform.
func timedBefore(stored []store.Baseline, it baselineItem, p platformID) bool {
	for _, b := range stored {
		if b.Size != it.size || b.Mode != it.mode || b.TaskHash != it.ct.Hash || b.Contract != contract.Version {
			continue
		}
		if b.Verdict != sdk.Pass && b.Verdict != sdk.Fail {
			continue
		}
		if sameString(b.Fingerprint, "torch", p.torch) && sameModel(b.Fingerprint, p.model) && sameDriver(b.Fingerprint, p.driver) {
			return true
		}
	}
	return false
}

func sameString(fp sdk.Fingerprint, key, want string) bool {
	got, _ := fp[key].(string)
	return got == want
}

// sameModel compares the device's model: a GPU's name as torch gives it, the CPU's as
// /proc/cpuinfo does (a CPU worker's device_name is only the architecture).
func sameModel(fp sdk.Fingerprint, model string) bool {
	if dev, _ := fp["device"].(string); dev == "cpu" {
		return sameString(fp, "cpu_model", model)
	}
	return sameString(fp, "device_name", model)
}

// sameDriver compares the GPU driver where both sides know it.
func sameDriver(fp sdk.Fingerprint, driver string) bool {
	got, _ := fp["driver"].(string)
	return got == "" || driver == "" || got == driver
}
