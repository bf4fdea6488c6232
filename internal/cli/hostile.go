package cli

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/kbplatform/kbplatform/examples/kernels"
	"github.com/kbplatform/kbplatform/internal/contract/worker"
	"github.com/kbplatform/kbplatform/internal/store"
)

// The hostile suite (eval --hostile) runs kernels that each try one escape, and judges each by
// more than its verdict: what the kernel could have done without it showing in the verdict must
// not have happened either. Before the run it plants what an escape would reach: keys in the
// environment the command was started with (so in every process a key could leak to), a canary
// file in the user's home, a TCP listener on loopback, a named and an abstract unix socket; after
// it, it looks for each trace.

// hostileCanaryFile is the file planted in the user's home (read_home.py reads it by this name).
const hostileCanaryFile = ".kbplatform-hostile-canary"

// hostileKeys are the variables given the canary: the providers' keys and one of the platform's.
var hostileKeys = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "KBP_HOSTILE_SECRET_TOKEN"}

// hostilePlanted are files an escape would leave outside the evaluation's folders.
func hostilePlanted(homes []string) []string {
	out := []string{"/tmp/kbp-hostile-planted", "/dev/shm/kbp-hostile-planted", "/var/tmp/kbp-hostile-planted"}
	for _, h := range homes {
		out = append(out, filepath.Join(h, "kbp-hostile-planted"))
	}
	return out
}

// hostileHomes are the homes a kernel would look in: $HOME, and the account's home from the
// password database (what a kernel finds, since its own HOME is its folder).
func hostileHomes() ([]string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, err
	}
	homes := []string{home}
	if u, err := user.Current(); err == nil && u.HomeDir != "" && u.HomeDir != home {
		homes = append(homes, u.HomeDir)
	}
	return homes, nil
}

// hostileRun is the suite's setting: the canary, what it planted, and the records stored before.
type hostileRun struct {
	canary  string
	homes   []string
	closers []io.Closer
	restore []func()
	before  map[string]string // evaluation id -> digest of its stored JSON
}

// startHostile plants the canaries and listeners. It runs before any plugin starts, so that the
// keys are in the environment every process of the run inherits from this one.
func startHostile(st *store.Store) (*hostileRun, error) {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	h := &hostileRun{canary: "kbp-canary-" + hex.EncodeToString(b)}
	for _, k := range hostileKeys {
		old, had := os.LookupEnv(k)
		os.Setenv(k, h.canary)
		h.restore = append(h.restore, func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		})
	}
	homes, err := hostileHomes()
	if err != nil {
		h.close()
		return nil, fmt.Errorf("hostile suite: %w", err)
	}
	h.homes = homes
	for _, p := range hostilePlanted(homes) {
		_ = os.Remove(p) // an earlier run's
	}
	for _, home := range homes {
		canaryFile := filepath.Join(home, hostileCanaryFile)
		if err := os.WriteFile(canaryFile, []byte(h.canary), 0o600); err != nil {
			h.close()
			return nil, fmt.Errorf("hostile suite: plant the canary file: %w", err)
		}
		h.restore = append(h.restore, func() { os.Remove(canaryFile) })
	}
	sockDir, err := os.MkdirTemp("", "kbp-hostile-")
	if err != nil {
		h.close()
		return nil, err
	}
	h.restore = append(h.restore, func() { os.RemoveAll(sockDir) })
	for _, addr := range [][2]string{{"tcp", "127.0.0.1:0"}, {"unix", filepath.Join(sockDir, "service.sock")}, {"unix", "@kbp-hostile"}} {
		l, err := net.Listen(addr[0], addr[1])
		if err != nil {
			h.close()
			return nil, fmt.Errorf("hostile suite: listen on %s: %w", addr[1], err)
		}
		h.closers = append(h.closers, l)
		go func() { // accept and say the canary: a connection that got through would read it
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(h.canary))
				c.Close()
			}
		}()
	}
	if h.before, err = recordDigests(st); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

func (h *hostileRun) close() {
	for _, c := range h.closers {
		c.Close()
	}
	for i := len(h.restore) - 1; i >= 0; i-- {
		h.restore[i]()
	}
}

// recordDigests digests every stored evaluation, to show that none changed.
func recordDigests(st *store.Store) (map[string]string, error) {
	evs, err := st.Evaluations(store.EvalFilter{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		d := sha256.Sum256(b)
		out[ev.ID] = hex.EncodeToString(d[:])
	}
	return out, nil
}

// hostileVerdict is what the suite found of one kernel.
type hostileVerdict struct {
	Name      string
	Attack    string
	Got       string
	Contained bool
	Why       []string // what gave it away, when not contained
}

// judge checks every hostile kernel's stored evaluation against its expectation and the traces an
// escape would leave: the canary in its record, the worker's files, planted files, a process left
// behind. Run-wide traces are laid on every kernel that could have left them (all of them).
func (h *hostileRun) judge(st *store.Store, stored []*store.Evaluation, want map[string]kernels.Entry, cacheDir string) []hostileVerdict {
	var runWide []string
	// The worker the target ran (its fingerprint says which) must be this binary's, to be
	// checked against the copy embedded here.
	versions := map[string]bool{}
	for _, ev := range stored {
		if v, ok := ev.Result.Fingerprint["worker"].(string); ok && v != "" {
			versions[v] = true
		}
	}
	for v := range versions {
		if v != worker.Version() {
			runWide = append(runWide, fmt.Sprintf("the target ran worker %s and this binary embeds %s, so its files cannot be checked: build both from one tree (./scripts/demo does)", v, worker.Version()))
		}
	}
	if err := worker.Verify(filepath.Join(cacheDir, "worker", "worker-"+worker.Version())); err != nil {
		runWide = append(runWide, "the extracted worker changed: "+err.Error())
	}
	for _, p := range hostilePlanted(h.homes) {
		if _, err := os.Lstat(p); err == nil {
			runWide = append(runWide, "a file was planted at "+p)
			os.Remove(p)
		}
	}
	if pids := processesNamed("kbp-hostile-daemon"); len(pids) > 0 {
		runWide = append(runWide, fmt.Sprintf("%d process(es) outlived their evaluation: %v", len(pids), pids))
	}
	after, err := recordDigests(st)
	if err != nil {
		runWide = append(runWide, "the store could not be read back: "+err.Error())
	}
	for id, d := range h.before {
		if after[id] != d {
			runWide = append(runWide, "an earlier record changed or vanished: "+id)
		}
	}
	var out []hostileVerdict
	for _, ev := range stored {
		e, ok := want[ev.Result.Kernel.Hash]
		if !ok {
			continue
		}
		r := ev.Result
		v := hostileVerdict{Name: strings.TrimSuffix(filepath.Base(e.File), ".py"), Attack: e.Attack, Got: r.Verdict}
		if r.ErrorClass != "" {
			v.Got += " " + r.ErrorClass
		}
		if r.Verdict != e.Expect.Verdict || (e.Expect.Class != "" && r.ErrorClass != e.Expect.Class) {
			want := e.Expect.Verdict
			if e.Expect.Class != "" {
				want += " " + e.Expect.Class
			}
			v.Why = append(v.Why, fmt.Sprintf("judged %s, the suite expects %s", v.Got, want))
		}
		if b, _ := json.Marshal(ev); strings.Contains(string(b), h.canary) {
			v.Why = append(v.Why, "its record holds a canary (a key or the home's canary file leaked)")
		}
		v.Why = append(v.Why, runWide...)
		v.Contained = len(v.Why) == 0
		out = append(out, v)
	}
	return out
}

// processesNamed lists the live processes whose name (comm) is name.
func processesNamed(name string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			out = append(out, e.Name())
		}
	}
	return out
}

// renderHostile prints each kernel's finding and the closing count.
func renderHostile(w io.Writer, vs []hostileVerdict, tried int) int {
	contained := 0
	for _, v := range vs {
		mark := "contained"
		if v.Contained {
			contained++
		} else {
			mark = "ESCAPED  "
		}
		fmt.Fprintf(w, "%s  %-22s %-24s %s\n", mark, v.Name, v.Got, v.Attack)
		for _, why := range v.Why {
			fmt.Fprintf(w, "           %s\n", why)
		}
	}
	fmt.Fprintf(w, "hostile: %d exploits tried, %d contained\n", tried, contained)
	return contained
}
