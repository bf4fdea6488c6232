package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/study"
)

// studyBar shows a study's progress: on a terminal one line that updates in place under the
// progress lines; elsewhere (a log, a pipe) a plain line whenever a unit finishes.
type studyBar struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	quiet bool
	study string
	shown string // the bar as last drawn (terminal only)
	last  [2]int // done and failed at the last plain line
}

func newStudyBar(w io.Writer, quiet bool, id string) *studyBar {
	b := &studyBar{w: w, quiet: quiet, study: id, last: [2]int{-1, -1}}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

// line prints one progress line (above the bar on a terminal).
func (b *studyBar) line(msg string) {
	if b.quiet {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.shown != "" {
		fmt.Fprintf(b.w, "\r\033[K%s\n%s", msg, b.shown)
		return
	}
	fmt.Fprintln(b.w, msg)
}

// barText is the bar's text: units done of all, running, failed, ETA.
func barText(id string, s study.Status) string {
	t := fmt.Sprintf("study %s: %d/%d units done", id[:min(12, len(id))], s.Done, s.Total)
	if s.Skipped > 0 {
		t += fmt.Sprintf(" (%d earlier)", s.Skipped)
	}
	t += fmt.Sprintf(", %d running, %d failed", len(s.RunningUnits), s.Failed)
	if s.ETA > 0 {
		t += ", ETA " + s.ETA.Round(time.Second).String()
	} else if s.Done+s.Failed < s.Total {
		t += ", ETA after the first unit"
	}
	return t
}

func (b *studyBar) status(s study.Status) {
	if b.quiet {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	text := barText(b.study, s)
	if b.tty {
		b.shown = text
		fmt.Fprintf(b.w, "\r\033[K%s", text)
		return
	}
	if b.last != [2]int{s.Done, s.Failed} {
		b.last = [2]int{s.Done, s.Failed}
		fmt.Fprintln(b.w, "· "+text)
	}
}

// finish ends the bar's line on a terminal.
func (b *studyBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.shown != "" && !b.quiet {
		fmt.Fprintln(b.w)
	}
	b.shown = ""
}
