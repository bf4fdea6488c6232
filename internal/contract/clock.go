package contract

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// clockSocket is the channel on which a worker marks the start and the end of each timed region.
//
// It is a SOCK_SEQPACKET socket pair with SO_TIMESTAMPNS on the driver's end, so the kernel stamps
// every mark at the moment the worker's send ran, not when the driver got round to reading it.
// On a loaded machine the driver's reader can be late by milliseconds in either direction; the
// kernel's stamps cannot, and a worker can only make its bracket longer (by sending late), never
// shorter. Nobody waits on the socket: the driver reads the marks only after the command's reply
// came (they were sent before it), so sending a mark wakes no process that could preempt the
// worker inside its timed region. Where the kernel gives no stamp the read time is used instead
// and the mark says so.
type clockSocket struct {
	f    *os.File
	rc   syscall.RawConn
	once sync.Once
}

// clockMark is one mark: kind 'A' (armed: the region starts) or 'D' (done: it has ended).
type clockMark struct {
	kind   byte
	seq    int
	at     time.Time
	kernel bool // at is the kernel's send stamp (false: the driver's read time)
}

// newClockSocket returns the driver's end and the file to hand to the worker.
func newClockSocket() (*clockSocket, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("clock socket: %w", err)
	}
	// Without kernel stamps the marks still work, stamped when read; that is only less exact.
	_ = syscall.SetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	f := os.NewFile(uintptr(fds[0]), "clock")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("clock socket: %w", err)
	}
	return &clockSocket{f: f, rc: rc}, os.NewFile(uintptr(fds[1]), "clock-child"), nil
}

// next reads one queued mark without waiting; ok is false when none is queued.
func (c *clockSocket) next() (m clockMark, ok bool, err error) {
	buf := make([]byte, 64)
	oob := make([]byte, syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))))
	var n, oobn int
	var rerr error
	if cerr := c.rc.Control(func(fd uintptr) {
		n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_DONTWAIT)
	}); cerr != nil {
		return m, false, errors.New("the clock channel is closed")
	}
	read := time.Now()
	if errors.Is(rerr, syscall.EAGAIN) {
		return m, false, nil
	}
	if rerr != nil {
		return m, false, fmt.Errorf("clock channel: %w", rerr)
	}
	if n == 0 {
		return m, false, nil // the worker's end is closed: nothing more will come
	}
	m, err = parseMark(buf[:n])
	if err != nil {
		return m, false, err
	}
	m.at = read
	if at, kok := kernelStamp(oob[:oobn]); kok {
		m.at, m.kernel = at, true
	}
	return m, true, nil
}

// parseMark reads "A<seq>" or "D<seq>".
func parseMark(b []byte) (clockMark, error) {
	if len(b) < 2 || (b[0] != 'A' && b[0] != 'D') {
		return clockMark{}, fmt.Errorf("malformed mark on the clock channel: %.40q", b)
	}
	seq, err := strconv.Atoi(string(b[1:]))
	if err != nil {
		return clockMark{}, fmt.Errorf("malformed mark on the clock channel: %.40q", b)
	}
	return clockMark{kind: b[0], seq: seq}, nil
}

func kernelStamp(oob []byte) (time.Time, bool) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS &&
			len(m.Data) >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), true
		}
	}
	return time.Time{}, false
}

func (c *clockSocket) close() { c.once.Do(func() { c.f.Close() }) }

// bracket returns the two marks of timed command seq, read after its reply came. The harness sent
// both before the reply, so both are queued; any other mark (a second one for the same call, one
// for another command) was not sent by the harness.
func (c *clockSocket) bracket(seq int) (armed, done clockMark, err error) {
	for _, want := range []byte{'A', 'D'} {
		m, ok, err := c.next()
		if err != nil {
			return armed, done, err
		}
		if !ok {
			return armed, done, fmt.Errorf("the timed call's %c mark is missing on the clock channel", want)
		}
		if m.seq != seq || m.kind != want {
			return armed, done, fmt.Errorf("unexpected mark %c%d on the clock channel (expected %c%d): something other than the harness wrote to it", m.kind, m.seq, want, seq)
		}
		if want == 'A' {
			armed = m
		} else {
			done = m
		}
	}
	return armed, done, nil
}

// quiet reports a mark that nobody asked for (checked after each timed series).
func (c *clockSocket) quiet() error {
	m, ok, err := c.next()
	if err != nil || !ok {
		return err
	}
	return fmt.Errorf("unexpected mark %c%d on the clock channel: something other than the harness wrote to it", m.kind, m.seq)
}
