package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kbplatform/kbplatform/internal/metrics"
)

// Plots are the figures `study report --plots DIR` writes, each as PNG and SVG.
var Plots = []string{"fastp", "fastp_turns", "speedup_levels"}

// WritePlots writes the report's figures into dir (created if needed) and returns the files:
// fast_p over p per arm, fast_p@N over turns per arm, and the distribution of the best speedup
// of every correct task per level.
func (r *Report) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	mo := metrics.Options{Baseline: r.Baseline, ExcludeFlags: r.ExcludeFlags}
	builders := map[string]func(metrics.Options) (*plot.Plot, error){
		"fastp": r.fastPPlot, "fastp_turns": r.turnsPlot, "speedup_levels": r.levelsPlot,
	}
	var files []string
	for _, name := range Plots {
		p, err := builders[name](mo)
		if err != nil {
			return files, fmt.Errorf("plot %s: %w", name, err)
		}
		for _, ext := range []string{".png", ".svg"} {
			f := filepath.Join(dir, name+ext)
			if err := p.Save(7*vg.Inch, 4.5*vg.Inch, f); err != nil {
				return files, fmt.Errorf("plot %s: %w", f, err)
			}
			files = append(files, f)
		}
	}
	return files, nil
}

// byArm groups the report's units by arm, in the tables' order.
func (r *Report) byArm() ([]string, map[string][]*metrics.Unit) {
	return metrics.Group(r.units, func(u *metrics.Unit) string { return u.Arm.String() })
}

func (r *Report) title(what string) string {
	t := what + " — study " + r.Study[:min(12, len(r.Study))]
	if r.Name != "" {
		t += " (" + r.Name + ")"
	}
	return t
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	// Inside the frame: gonum places a right-hand legend flush with the canvas edge.
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), -vg.Points(4)
	p.Add(plotter.NewGrid())
	return p
}

// fastPPlot draws fast_p as a step-free curve over p from 0 to past the largest speedup.
func (r *Report) fastPPlot(mo metrics.Options) (*plot.Plot, error) {
	p := newPlot(r.title("fast_p"), "p (speedup over "+r.Baseline+")", "fast_p (fraction of tasks)")
	arms, by := r.byArm()
	top := 4.0
	for _, u := range r.units {
		if b, ok, _ := u.Best(mo, -1); ok {
			top = math.Max(top, math.Min(b*1.1, 50))
		}
	}
	const steps = 200
	for i, arm := range arms {
		pts := make(plotter.XYs, steps+1)
		for s := range pts {
			x := top * float64(s) / steps
			pts[s] = plotter.XY{X: x, Y: metrics.FastP(by[arm], x, mo).Value}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(arm, l)
	}
	one, err := vline(1)
	if err != nil {
		return nil, err
	}
	p.Add(one)
	p.Y.Min, p.Y.Max = 0, 1.05
	p.X.Min = 0
	return p, nil
}

// turnsPlot draws fast_0@N and fast_1@N over turns.
func (r *Report) turnsPlot(mo metrics.Options) (*plot.Plot, error) {
	p := newPlot(r.title("fast_p@N by turn"), "turn N (attempts of turns 0..N)", "fast_p@N")
	arms, by := r.byArm()
	last := metrics.MaxTurn(r.units)
	for i, arm := range arms {
		for j, pv := range []float64{0, 1} {
			pts := make(plotter.XYs, last+1)
			for n := range pts {
				pts[n] = plotter.XY{X: float64(n), Y: metrics.FastPAtTurn(by[arm], pv, n, mo).Value}
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width, l.Dashes = plotutil.Color(i), vg.Points(1.5), plotutil.Dashes(j)
			s.Color, s.Shape = plotutil.Color(i), plotutil.Shape(j)
			p.Add(l, s)
			p.Legend.Add(arm+" "+pLabel(pv), l, s)
		}
	}
	p.Y.Min, p.Y.Max = 0, 1.05
	p.X.Min, p.X.Max = -0.2, float64(last)+0.2
	p.X.Tick.Marker = integerTicks{}
	return p, nil
}

// levelsPlot draws, per level, the best speedup of each task with a correct kernel (all arms),
// as a box over the points, on a log axis with the baseline at 1x.
func (r *Report) levelsPlot(mo metrics.Options) (*plot.Plot, error) {
	p := newPlot(r.title("speedup of correct tasks per level"), "level", "best speedup over "+r.Baseline)
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	by := map[int]plotter.Values{}
	for _, u := range r.units {
		if !u.Judged() {
			continue
		}
		if b, ok, _ := u.Best(mo, -1); ok && b > 0 {
			by[u.Level] = append(by[u.Level], b)
		}
	}
	var levels []int
	for l := range by {
		levels = append(levels, l)
	}
	sort.Ints(levels)
	if len(levels) == 0 {
		p.Title.Text += ": no correct kernel"
		p.Y.Min, p.Y.Max = 0, 2
		p.X.Min, p.X.Max = 0, 1
		p.X.Tick.Marker = plot.ConstantTicks{}
		return p, nil
	}
	lo, hi := 1.0, 1.0
	var names []string
	for i, l := range levels {
		vals := by[l]
		box, err := plotter.NewBoxPlot(vg.Points(30), float64(i), vals)
		if err != nil {
			return nil, err
		}
		box.FillColor = color.RGBA{R: 0x9e, G: 0xc5, B: 0xe8, A: 0xff}
		p.Add(box)
		pts := make(plotter.XYs, len(vals))
		for j, v := range vals {
			pts[j] = plotter.XY{X: float64(i), Y: v}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.Shape, sc.Radius = draw.CircleGlyph{}, vg.Points(2.5)
		p.Add(sc)
		name := "level " + strconv.Itoa(l)
		if l == 0 {
			name = "level ?"
		}
		names = append(names, fmt.Sprintf("%s (%d)", name, len(vals)))
	}
	p.NominalX(names...)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = speedupTicks{}
	p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	p.X.Min, p.X.Max = -0.6, float64(len(levels))-0.4
	one := hline(1)
	p.Add(one)
	p.Legend.Add("1x ("+r.Baseline+")", one)
	return p, nil
}

// hline marks the baseline (speedup 1) on a speedup axis.
func hline(at float64) *plotter.Function {
	f := plotter.NewFunction(func(float64) float64 { return at })
	f.Color = color.Gray{Y: 0x80}
	f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	return f
}

// vline marks the baseline (p = 1) on a fast_p curve.
func vline(at float64) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: 1.05}})
	if err != nil {
		return nil, err
	}
	l.Color = color.Gray{Y: 0x80}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	return l, nil
}

// integerTicks labels whole numbers only (turns).
type integerTicks struct{}

func (integerTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for v := math.Ceil(min); v <= max; v++ {
		out = append(out, plot.Tick{Value: v, Label: strconv.Itoa(int(v))})
	}
	return out
}

// speedupTicks labels a log speedup axis at 1-2-5 steps (plot.LogTicks labels powers of ten
// only, which leaves most speedup ranges with one label).
type speedupTicks struct{}

func (speedupTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= min && v <= max {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64) + "x"})
			}
		}
	}
	return out
}
