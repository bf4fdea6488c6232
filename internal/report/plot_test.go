package report

import (
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/report/reporttest"
)

// Every plot is written as a PNG that decodes and an SVG that parses, for a study with results
// and for one without a single correct kernel.
func TestWritePlots(t *testing.T) {
	st := reporttest.Open(t)
	reporttest.Put(t, st, "studyaaaaaaaaaaaaaaa", "cpu run", reporttest.CPUA, false, reporttest.StudyA())
	reporttest.Put(t, st, "studyfailsaaaaaaaaaa", "", reporttest.CPUA, true, []reporttest.Outcome{
		{Task: "kbp/l1/relu", Level: 1, Kernel: reporttest.ReluWrong, Verdict: "fail", Class: "output_mismatch"}})
	for _, id := range []string{"studyaaa", "studyfai"} {
		t.Run(id, func(t *testing.T) {
			s, err := Load(st, id, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(os.Getenv("KBP_PLOT_DIR"), id) // set it to keep the files and look at them
			if os.Getenv("KBP_PLOT_DIR") == "" {
				dir = t.TempDir()
			}
			files, err := Build(s, Options{Metrics: metrics.Options{}}).WritePlots(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 2*len(Plots) {
				t.Fatalf("files: %v", files)
			}
			for _, f := range files {
				checkImage(t, f)
			}
		})
	}
}

func checkImage(t *testing.T, f string) {
	t.Helper()
	fh, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if strings.HasSuffix(f, ".png") {
		img, err := png.Decode(fh)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
			t.Errorf("%s: %v is too small", f, b)
		}
		return
	}
	dec := xml.NewDecoder(fh)
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not XML: %v", f, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", f, root)
	}
}
