package contract

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kbplatform/kbplatform/internal/sandbox"
)

// procError is a failure of the worker process itself (not a reply): it died, hung, or broke
// the protocol. Class is one of the contract's error classes.
type procError struct {
	Class   string
	Message string
	// malformed: a reply whose fields do not fit its op's reply type (call).
	malformed bool
}

func (e *procError) Error() string { return e.Class + ": " + e.Message }

// workerError is a structured error reply from the worker.
type workerError struct {
	Class     string `json:"class"`
	Phase     string `json:"phase"`
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
	// Errno names the full disk behind the failure (ENOSPC, EDQUOT), when there was one: a claim
	// the driver checks before it believes it (workroom.go).
	Errno string `json:"errno,omitempty"`
}

func (e *workerError) Error() string { return e.Class + ": " + e.Message }

// message is one line from the worker: the line, and its top-level fields (the envelope that
// call checks before decoding the line as a reply).
type message struct {
	line []byte
	raw  map[string]json.RawMessage
}

// proc is one worker process: its own process group, a command pipe, a reply pipe, a clock
// socket, and a bounded log of everything it printed. The process started is the worker's
// shepherd (run.py), the subreaper of everything below it: the worker and any helper it starts,
// in its group or not, stay in the shepherd's process tree.
type proc struct {
	role    string
	cmd     *exec.Cmd
	cmdW    *os.File
	msgs    chan message
	readErr error
	clock   *clockSocket
	log     *boundedLog
	seq     int
	done    chan struct{}
	waitErr error
	killed  bool
	stopped []int // processes outside the group that pause stopped, for resume
	mu      sync.Mutex
	// oom and workerPID tell a death by SIGKILL from the OOM killer's (oomkill.go); workerPID
	// is the worker's own pid from its hello (the shepherd's child), 0 before it.
	oom       oomWatch
	workerPID int
}

type spawnSpec struct {
	Python string
	Script string
	Role   string
	Dir    string
	// Policy confines the process (its Env is the variables the worker needs; spawn adds the
	// channels').
	Policy sandbox.Policy
	LogCap int
}

func spawn(spec spawnSpec) (*proc, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, err
	}
	clock, clockChild, err := newClockSocket()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		resR.Close()
		resW.Close()
		return nil, err
	}
	policy := spec.Policy
	policy.Env = append(append([]string(nil), policy.Env...), "KBP_CMD_FD=3", "KBP_RES_FD=4", "KBP_CLOCK_FD=5", "PYTHONUNBUFFERED=1")
	c, err := sandbox.Command(policy, spec.Python, "-B", spec.Script, spec.Role)
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		resR.Close()
		resW.Close()
		clockChild.Close()
		clock.close()
		return nil, err
	}
	c.Dir = spec.Dir
	c.ExtraFiles = []*os.File{cmdR, resW, clockChild}
	logCap := spec.LogCap
	if logCap <= 0 {
		logCap = 64 << 10
	}
	lg := newBoundedLog(logCap)
	watch := watchOOM()
	c.Stdout = lg
	c.Stderr = lg
	// SIGTERM when the driver dies: the shepherd ends its whole tree, then itself (run.py).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// A process that keeps the log pipe open after the worker's end must not hold Wait (and the
	// evaluation) forever; kill ends the whole tree, this bounds what it cannot reach.
	c.WaitDelay = 5 * time.Second
	if err := c.Start(); err != nil {
		cmdR.Close()
		cmdW.Close()
		resR.Close()
		resW.Close()
		clockChild.Close()
		clock.close()
		return nil, fmt.Errorf("start %s worker: %w", spec.Role, err)
	}
	cmdR.Close()
	resW.Close()
	clockChild.Close()
	p := &proc{role: spec.Role, cmd: c, cmdW: cmdW, msgs: make(chan message, 64), clock: clock, log: lg, done: make(chan struct{}), oom: watch}
	go p.read(resR)
	go func() {
		p.waitErr = c.Wait()
		if errors.Is(p.waitErr, exec.ErrWaitDelay) {
			p.waitErr = nil // the worker itself exited cleanly
		}
		clock.close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) read(r *os.File) {
	defer close(p.msgs)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m map[string]json.RawMessage
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				p.readErr = fmt.Errorf("malformed message on the reply channel: %.200q", line)
				return
			}
			p.msgs <- message{line: line, raw: m}
		}
		if err != nil {
			return
		}
	}
}

// killWait bounds how long kill waits for the worker's tree to end.
const killWait = 30 * time.Second

// kill ends the worker's whole process tree: its group (the worker and anything it started:
// compilers, ninja), and what left the group. Members are killed before the shepherd, so what
// their deaths orphan is reparented to the shepherd, still in the tree, and found by the next
// pass; and kill waits until every member has ended (a GPU context is torn down before a killed
// process's exit completes), so the next evaluation does not start next to a dying one.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		return
	}
	p.killed = true
	if pid := p.pid(); pid > 0 && !p.exited() {
		_ = syscall.Kill(-pid, syscall.SIGSTOP) // nothing in the group forks from here on
		deadline := time.Now().Add(killWait)
		for {
			live := descendants(pid)
			if len(live) == 0 || time.Now().After(deadline) {
				break
			}
			for _, q := range live {
				_ = syscall.Kill(q.pid, syscall.SIGKILL)
			}
			time.Sleep(2 * time.Millisecond)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL) // the shepherd leads its group
	}
	p.stopped = nil
	p.cmdW.Close()
}

func (p *proc) pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// pause stops the worker's whole tree (SIGSTOP): its process group at once, then whatever
// below the shepherd is outside the group. resume lets them all run again.
func (p *proc) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pid := p.pid(); !p.killed && pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGSTOP)
		p.stopped = stopStrays(pid)
	}
}

func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pid := p.pid(); !p.killed && pid > 0 {
		for _, q := range p.stopped {
			_ = syscall.Kill(q, syscall.SIGCONT)
		}
		_ = syscall.Kill(-pid, syscall.SIGCONT)
	}
	p.stopped = nil
}

// stopStrays stops every live process below the shepherd root that is outside its group (the
// group is stopped already), then looks again for processes started in the meantime, until a
// look finds none. It returns the processes it stopped.
func stopStrays(root int) []int {
	var stopped []int
	seen := map[int]bool{}
	for range 100 {
		found := false
		for _, q := range descendants(root) {
			if seen[q.pid] {
				continue
			}
			seen[q.pid] = true
			found = true
			if q.pgid != root {
				_ = syscall.Kill(q.pid, syscall.SIGSTOP)
				stopped = append(stopped, q.pid)
			}
		}
		if !found {
			break
		}
	}
	return stopped
}

// descendants lists the live processes below root (zombies excluded), from /proc. It follows
// the tree's own children lists, which cost a read per process of the tree; where the kernel has
// none (no CONFIG_PROC_CHILDREN) it reads every process of the host. The first is what a timed
// call pays for (every pause walks the tree at least twice): on the development VM the full walk
// of 118 processes took 1.3 ms.
func descendants(root int) []procStat {
	if out, ok := treeDescendants(root); ok {
		return out
	}
	return scanDescendants(root)
}

// treeDescendants walks root's tree through /proc/PID/task/TID/children. The kernel's lists are
// exact for stopped processes and may miss a child forked during the read by a running one, as a
// full scan may: callers that need every process (stopStrays) look again until a look finds
// nothing new. ok is false when root has no children list to read.
func treeDescendants(root int) (out []procStat, ok bool) {
	buf := make([]byte, 512)
	todo := []int{root}
	for first := true; len(todo) > 0; first = false {
		q := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(q) + "/task")
		if err != nil {
			if first {
				return nil, false
			}
			continue // ended since its parent listed it
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(q) + "/task/" + t.Name() + "/children")
			if err != nil {
				if first && errors.Is(err, os.ErrNotExist) {
					return nil, false
				}
				continue
			}
			for _, f := range bytes.Fields(b) {
				c, err := strconv.Atoi(string(f))
				if err != nil {
					continue
				}
				st, ok := readStatBuf(c, buf)
				if !ok || st.ppid != q {
					continue // ended, or its pid already reused
				}
				if st.state != 'Z' && st.state != 'X' {
					out = append(out, st)
				}
				todo = append(todo, c)
			}
		}
	}
	return out, true
}

// scanDescendants reads every process of the host and keeps those below root.
func scanDescendants(root int) []procStat {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	kids := map[int][]procStat{}
	buf := make([]byte, 512)
	for _, name := range names {
		q, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		st, ok := readStatBuf(q, buf)
		if !ok {
			continue
		}
		kids[st.ppid] = append(kids[st.ppid], st)
	}
	var out []procStat
	todo := []int{root}
	for len(todo) > 0 {
		q := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, c := range kids[q] {
			if c.state != 'Z' && c.state != 'X' {
				out = append(out, c)
			}
			todo = append(todo, c.pid)
		}
	}
	return out
}

type procStat struct {
	pid, ppid, pgid int
	state           byte
}

// readStatBuf reads a process's state, parent and process group from /proc/PID/stat into buf
// (a line longer than buf is cut, and the fields after the name are then unreadable).
func readStatBuf(pid int, buf []byte) (procStat, bool) {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return procStat{}, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, false
	}
	// After the name: " state ppid pgrp ..."
	st := procStat{pid: pid, state: b[i+2]}
	ppid, rest, _ := bytes.Cut(bytes.TrimLeft(b[i+3:], " "), []byte(" "))
	pg, _, _ := bytes.Cut(rest, []byte(" "))
	var err1, err2 error
	st.ppid, err1 = strconv.Atoi(string(ppid))
	st.pgid, err2 = strconv.Atoi(string(pg))
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return st, true
}

// close asks the worker to exit and waits briefly; then kills what is left of its tree.
func (p *proc) close() {
	p.resume()
	if !p.exited() {
		_ = p.send(exitRequest{})
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	p.kill()
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// send writes one command, numbered with the next seq.
func (p *proc) send(cmd command) error {
	p.seq++
	line, err := frame(cmd, p.seq)
	if err != nil {
		return err
	}
	_, err = p.cmdW.Write(line)
	return err
}

// exitDescription says how the process ended, for crash messages: the signal by its name
// (SIGSEGV, SIGKILL), and for a SIGKILL that the driver did not send, whether the kernel's OOM
// killer sent it.
func (p *proc) exitDescription() string {
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			desc := "killed by " + signalName(ws.Signal())
			p.mu.Lock()
			byDriver := p.killed
			p.mu.Unlock()
			if ws.Signal() == syscall.SIGKILL && !byDriver {
				if why := p.oom.killedForMemory([]int{p.pid(), p.workerPID}); why != "" {
					desc += ", " + why
				}
			}
			return desc
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	if p.waitErr == nil {
		return "exited with status 0"
	}
	return p.waitErr.Error()
}

// call sends one request to p and waits for its reply, decoded into the request's reply type
// (timed regions are bracketed on the clock socket, not here). A dead, hung or misbehaving worker
// yields a *procError; an error reply yields the worker's *workerError, with the reply decoded
// (a candidate's error reply still says what its tamper guard found).
//
// Misbehaving: a line that is not this command's reply (another seq, an event, no status), or
// one whose fields do not fit the reply's type, is tampering (the process is killed): only
// something other than the harness writes those, and a field that cannot be read must not read
// as its zero value (no tampering found, no input changed, no late writes).
func call[R any](ctx context.Context, p *proc, timeout time.Duration, req request[R]) (R, error) {
	var zero R
	m, err := p.roundTrip(ctx, timeout, req)
	if err != nil {
		return zero, err
	}
	var rep R
	if err := json.Unmarshal(m.line, &rep); err != nil {
		p.kill()
		return zero, &procError{Class: ClassTampering, Message: fmt.Sprintf("malformed %q reply on the reply channel: %v", req.op(), err), malformed: true}
	}
	var ok bool
	_ = json.Unmarshal(m.raw["ok"], &ok) // roundTrip has checked it is a bool
	if !ok {
		var we workerError
		if err := json.Unmarshal(m.raw["error"], &we); err != nil {
			return rep, &workerError{Class: "harness_error", Message: "unreadable error reply"}
		}
		return rep, &we
	}
	return rep, nil
}

// roundTrip sends one command and waits for the line that answers it: the line carries the
// command's seq and a status, and is no event.
func (p *proc) roundTrip(ctx context.Context, timeout time.Duration, cmd command) (message, error) {
	op := cmd.op()
	if p.exited() {
		return message{}, p.deathError("before the command was sent")
	}
	if err := p.send(cmd); err != nil {
		<-p.done
		return message{}, p.deathError("while receiving a command")
	}
	want := p.seq
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			p.kill()
			return message{}, ctx.Err()
		case <-timer.C:
			p.kill()
			return message{}, &procError{Class: "timeout", Message: fmt.Sprintf("no answer to %q within %s; the process group was killed", op, timeout)}
		case m, ok := <-p.msgs:
			if !ok {
				if p.readErr != nil {
					p.kill()
					return message{}, &procError{Class: "tampering", Message: p.readErr.Error()}
				}
				select {
				case <-p.done:
				case <-time.After(10 * time.Second):
					p.kill()
				}
				return message{}, p.deathError(fmt.Sprintf("during %q", op))
			}
			var seq int
			if err := json.Unmarshal(m.raw["seq"], &seq); err != nil || seq != want {
				p.kill()
				return message{}, &procError{Class: "tampering", Message: fmt.Sprintf("unexpected message on the reply channel (seq %s, expected %d): something other than the harness wrote to it", m.raw["seq"], want)}
			}
			if ev, ok := m.raw["event"]; ok {
				var name string
				_ = json.Unmarshal(ev, &name)
				p.kill()
				return message{}, &procError{Class: "tampering", Message: fmt.Sprintf("unexpected event %q on the reply channel", name)}
			}
			var ok2 bool
			if err := json.Unmarshal(m.raw["ok"], &ok2); err != nil {
				p.kill()
				return message{}, &procError{Class: "tampering", Message: "reply without status on the reply channel"}
			}
			return m, nil
		}
	}
}

// signalName is a signal as a reader looks it up: SIGSEGV (segmentation fault).
func signalName(sig syscall.Signal) string {
	name := unix.SignalName(sig)
	switch {
	case name == "":
		return fmt.Sprintf("signal %d", int(sig))
	case sig == syscall.SIGKILL: // its description, "killed", says nothing more
		return name
	}
	return fmt.Sprintf("%s (%s)", name, sig)
}

func (p *proc) deathError(when string) error {
	desc := p.exitDescription()
	log := p.log.String()
	class := "crash"
	if hasMemoryFault(log) {
		class = "illegal_memory_access"
	}
	if line, ok := helperFailure(p.waitErr, log); ok {
		// The sandbox could not be applied: nothing of the worker ran.
		return &procError{Class: ClassHarness, Message: fmt.Sprintf("the %s process could not start: %s", p.role, line)}
	}
	return &procError{Class: class, Message: fmt.Sprintf("the %s process %s %s", p.role, desc, when)}
}

// helperFailure reports the line the sandbox helper printed when it exited without starting the
// worker.
func helperFailure(waitErr error, log string) (string, bool) {
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) || ee.ExitCode() != sandbox.ExitHelper {
		return "", false
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, sandbox.HelperPrefix) {
			return l, true
		}
	}
	return "", false
}

var memoryFaults = []string{"illegal memory access", "misaligned address", "unspecified launch failure", "illegal instruction", "device-side assert"}

func hasMemoryFault(log string) bool {
	l := strings.ToLower(log)
	for _, m := range memoryFaults {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

// boundedLog keeps the first and last part of what a process printed.
type boundedLog struct {
	mu      sync.Mutex
	cap     int
	head    []byte
	tail    []byte
	dropped int64
}

func newBoundedLog(cap int) *boundedLog { return &boundedLog{cap: cap} }

func (b *boundedLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	half := b.cap / 2
	if len(b.head) < half {
		k := min(half-len(b.head), len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		b.tail = append(b.tail, p...)
		if over := len(b.tail) - half; over > 0 {
			b.dropped += int64(over)
			b.tail = append(b.tail[:0], b.tail[over:]...)
		}
	}
	return n, nil
}

func (b *boundedLog) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return string(b.head) + string(b.tail)
	}
	return fmt.Sprintf("%s\n... (%d bytes dropped) ...\n%s", b.head, b.dropped, b.tail)
}
