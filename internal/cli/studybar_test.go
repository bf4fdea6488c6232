package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/study"
)

// Off a terminal the bar is a plain line each time a unit finishes; on one it is a single line
// redrawn in place, kept under the progress lines.
func TestStudyBar(t *testing.T) {
	var buf bytes.Buffer
	b := newStudyBar(&buf, false, "0123456789abcdef0123")
	b.status(study.Status{Total: 4, RunningUnits: []string{"a"}})
	b.status(study.Status{Total: 4, RunningUnits: []string{"a", "b"}})
	b.line("· a progress line")
	b.status(study.Status{Total: 4, Done: 2, Skipped: 1, Failed: 1, RunningUnits: []string{"b"}, ETA: 90 * time.Second})
	b.finish()
	want := "· study 0123456789ab: 0/4 units done, 1 running, 0 failed, ETA after the first unit\n" +
		"· a progress line\n" +
		"· study 0123456789ab: 2/4 units done (1 earlier), 1 running, 1 failed, ETA 1m30s\n"
	if buf.String() != want {
		t.Errorf("plain:\n%q\nwant\n%q", buf.String(), want)
	}

	buf.Reset()
	b = newStudyBar(&buf, false, "0123456789abcdef0123")
	b.tty = true
	b.status(study.Status{Total: 2, RunningUnits: []string{"a"}})
	b.line("· step")
	b.status(study.Status{Total: 2, Done: 2})
	b.finish()
	got := buf.String()
	if strings.Count(got, "\r\033[K") != 3 || !strings.Contains(got, "\r\033[K· step\nstudy 0123456789ab: 0/2") ||
		!strings.HasSuffix(got, "2/2 units done, 0 running, 0 failed\n") {
		t.Errorf("terminal: %q", got)
	}

	buf.Reset()
	b = newStudyBar(&buf, true, "0123456789abcdef0123")
	b.status(study.Status{Total: 1, Done: 1})
	b.line("x")
	if buf.Len() != 0 {
		t.Errorf("quiet bar printed %q", buf.String())
	}
}
