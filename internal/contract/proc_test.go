package contract

import (
	"os"
	"testing"
)

// BenchmarkDescendants is the /proc walk that every pause of a worker makes (twice per timed call
// pair, as each side is stopped while the other is timed).
func BenchmarkDescendants(b *testing.B) {
	entries, _ := os.ReadDir("/proc")
	b.ReportMetric(float64(len(entries)), "proc-entries")
	for b.Loop() {
		descendants(1)
	}
}
