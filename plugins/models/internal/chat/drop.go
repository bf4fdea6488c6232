package chat

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/kbplatform/kbplatform/sdk"
)

// Dropper remembers the parameters a server rejected. Without drop_unsupported a rejection is an
// error that names the parameter; with it the request is sent again without the parameter, and
// later requests leave it out from the start.
type Dropper struct {
	Enabled bool
	// Sent lists the optional parameters a request may carry (as the server names them).
	Sent func() []string
	// Log is told once per dropped parameter.
	Log func(string)

	mu      sync.Mutex
	dropped map[string]bool
}

// Dropped returns a copy of the parameters left out.
func (d *Dropper) Dropped() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(d.dropped))
	for k := range d.dropped {
		out[k] = true
	}
	return out
}

// Do runs call, dropping rejected parameters one at a time when enabled.
func (d *Dropper) Do(ctx context.Context, call func(drop map[string]bool) (*sdk.GenerateResponse, error)) (*sdk.GenerateResponse, error) {
	for {
		drop := d.Dropped()
		resp, err := call(drop)
		if err == nil || !errors.Is(err, sdk.ErrRejectedParameter) {
			return resp, err
		}
		var sent []string
		if d.Sent != nil {
			for _, p := range d.Sent() {
				if !drop[p] {
					sent = append(sent, p)
				}
			}
		}
		name := Rejected(err.Error(), sent)
		if name == "" {
			return nil, err
		}
		if !d.Enabled {
			return nil, fmt.Errorf("%w: the server rejected the parameter %q (set drop_unsupported: true to send requests without it): %v",
				sdk.ErrRejectedParameter, name, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d.mu.Lock()
		if d.dropped == nil {
			d.dropped = map[string]bool{}
		}
		d.dropped[name] = true
		d.mu.Unlock()
		if d.Log != nil {
			d.Log(fmt.Sprintf("the server rejected the parameter %q; requests leave it out from now on", name))
		}
	}
}

// Rejected finds which of the parameters sent a server's error message names (as a whole word;
// the longest name first, so that max_completion_tokens is not taken for n).
func Rejected(message string, sent []string) string {
	names := append([]string(nil), sent...)
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	low := strings.ToLower(message)
	for _, n := range names {
		if regexp.MustCompile(`(^|[^a-z0-9_.])` + regexp.QuoteMeta(strings.ToLower(n)) + `($|[^a-z0-9_])`).MatchString(low) {
			return n
		}
	}
	return ""
}
