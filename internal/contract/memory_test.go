package contract

import "testing"

func TestMemoryUseKeepsTheHarnessApart(t *testing.T) {
	const gib = 1 << 30
	flush := int64(gib / 4)
	ref := workerMemory{PeakReserved: 2*gib + flush, PeakAllocated: 2 * gib, Harness: flush}
	cand := workerMemory{PeakReserved: 3*gib + flush, Harness: 7 * gib} // its own word is not taken
	m := memoryUse(gib, 80*gib, ref, cand)
	if m.Peak != 5*gib+2*flush || m.Harness != 2*flush {
		t.Fatalf("peak %d harness %d, want %d and %d", m.Peak, m.Harness, 5*gib+2*flush, 2*flush)
	}
	if got := m.Ratio(); got != 5.5 {
		t.Errorf("ratio %g, want 5.5", got)
	}
	if got := m.TaskRatio(); got != 5 {
		t.Errorf("ratio without the harness %g, want 5", got)
	}
	// A candidate that was not asked (it crashed, say) held no flush buffer in the record.
	m = memoryUse(gib, 80*gib, ref, workerMemory{})
	if m.Harness != flush || m.Peak != ref.PeakReserved {
		t.Errorf("peak %d harness %d with no candidate report", m.Peak, m.Harness)
	}
	// The harness is never more than the peak it is part of.
	m = memoryUse(gib, 80*gib, workerMemory{Harness: flush}, workerMemory{})
	if m.Harness != 0 || m.TaskRatio() != 0 {
		t.Errorf("harness %d, task ratio %g, with no peak", m.Harness, m.TaskRatio())
	}
}
