package contract

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procError is a failure of the worker process itself (not a reply): it died, hung, or broke
// the protocol. Class is one of the contract's error classes.
type procError struct {
	Class   string
	Message string
}

func (e *procError) Error() string { return e.Class + ": " + e.Message }

// workerError is a structured error reply from the worker.
type workerError struct {
	Class     string `json:"class"`
	Phase     string `json:"phase"`
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

func (e *workerError) Error() string { return e.Class + ": " + e.Message }

// message is one line from the worker.
type message struct {
	raw map[string]json.RawMessage
}

// proc is one worker process: its own process group, a command pipe, a reply pipe, a clock
// socket, and a bounded log of everything it printed.
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
	mu      sync.Mutex
}

type spawnSpec struct {
	Python string
	Script string
	Role   string
	Dir    string
	Env    []string
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
	c := exec.Command(spec.Python, "-B", spec.Script, spec.Role)
	c.Dir = spec.Dir
	c.Env = append(os.Environ(), spec.Env...)
	c.Env = append(c.Env, "KBP_CMD_FD=3", "KBP_RES_FD=4", "KBP_CLOCK_FD=5", "PYTHONUNBUFFERED=1")
	c.ExtraFiles = []*os.File{cmdR, resW, clockChild}
	logCap := spec.LogCap
	if logCap <= 0 {
		logCap = 64 << 10
	}
	lg := newBoundedLog(logCap)
	c.Stdout = lg
	c.Stderr = lg
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
	p := &proc{role: spec.Role, cmd: c, cmdW: cmdW, msgs: make(chan message, 64), clock: clock, log: lg, done: make(chan struct{})}
	go p.read(resR)
	go func() {
		p.waitErr = c.Wait()
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
			p.msgs <- message{raw: m}
		}
		if err != nil {
			return
		}
	}
}

// kill ends the whole process group (the worker and anything it started: compilers, ninja).
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		return
	}
	p.killed = true
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	p.cmdW.Close()
}

// signalGroup sends sig to the worker's whole process group, unless it was killed.
func (p *proc) signalGroup(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.killed && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// pause stops the worker and everything in its group (SIGSTOP); resume lets them run again.
func (p *proc) pause()  { p.signalGroup(syscall.SIGSTOP) }
func (p *proc) resume() { p.signalGroup(syscall.SIGCONT) }

// close asks the worker to exit and waits briefly; then kills what is left of its group.
func (p *proc) close() {
	p.resume()
	if !p.exited() {
		_ = p.send(map[string]any{"op": "exit"})
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

func (p *proc) send(cmd map[string]any) error {
	p.seq++
	cmd["seq"] = p.seq
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	_, err = p.cmdW.Write(append(b, '\n'))
	return err
}

// exitDescription says how the process ended, for crash messages.
func (p *proc) exitDescription() string {
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %s", ws.Signal())
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	if p.waitErr == nil {
		return "exited with status 0"
	}
	return p.waitErr.Error()
}

// call sends one command and waits for its reply (timed regions are bracketed on the clock socket,
// not here). A dead, hung or misbehaving worker yields a *procError.
func (p *proc) call(ctx context.Context, timeout time.Duration, cmd map[string]any) (map[string]json.RawMessage, error) {
	if p.exited() {
		return nil, p.deathError("before the command was sent")
	}
	if err := p.send(cmd); err != nil {
		<-p.done
		return nil, p.deathError("while receiving a command")
	}
	want := p.seq
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			p.kill()
			return nil, ctx.Err()
		case <-timer.C:
			p.kill()
			return nil, &procError{Class: "timeout", Message: fmt.Sprintf("no answer to %q within %s; the process group was killed", cmd["op"], timeout)}
		case m, ok := <-p.msgs:
			if !ok {
				if p.readErr != nil {
					p.kill()
					return nil, &procError{Class: "tampering", Message: p.readErr.Error()}
				}
				select {
				case <-p.done:
				case <-time.After(10 * time.Second):
					p.kill()
				}
				return nil, p.deathError(fmt.Sprintf("during %q", cmd["op"]))
			}
			var seq int
			if err := json.Unmarshal(m.raw["seq"], &seq); err != nil || seq != want {
				p.kill()
				return nil, &procError{Class: "tampering", Message: fmt.Sprintf("unexpected message on the reply channel (seq %s, expected %d): something other than the harness wrote to it", m.raw["seq"], want)}
			}
			if ev, ok := m.raw["event"]; ok {
				var name string
				_ = json.Unmarshal(ev, &name)
				p.kill()
				return nil, &procError{Class: "tampering", Message: fmt.Sprintf("unexpected event %q on the reply channel", name)}
			}
			var ok2 bool
			if err := json.Unmarshal(m.raw["ok"], &ok2); err != nil {
				p.kill()
				return nil, &procError{Class: "tampering", Message: "reply without status on the reply channel"}
			}
			if !ok2 {
				var we workerError
				if err := json.Unmarshal(m.raw["error"], &we); err != nil {
					return m.raw, &workerError{Class: "harness_error", Message: "unreadable error reply"}
				}
				return m.raw, &we
			}
			return m.raw, nil
		}
	}
}

func (p *proc) deathError(when string) error {
	desc := p.exitDescription()
	log := p.log.String()
	class := "crash"
	if hasMemoryFault(log) {
		class = "illegal_memory_access"
	}
	return &procError{Class: class, Message: fmt.Sprintf("the %s process %s %s", p.role, desc, when)}
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
