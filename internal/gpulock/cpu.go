package gpulock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CPUs lists the CPUs this process may run on (sched_getaffinity), in ascending order: the CPUs
// its evaluations' workers inherit, and so the ones their timed calls run on. The numbers are
// the host's, also inside a cgroup's cpuset or a Slurm job, so two processes that can meet on a
// CPU name it alike.
func CPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("reading this process's CPUs (sched_getaffinity): %w", err)
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// CPUList writes cpus as Linux does (/sys/.../cpulist, taskset -c): "0-3,8".
func CPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// LockCPUs takes kind's lock of every CPU in cpus (ascending), waiting while another process
// holds any of them; waiting, when not nil, is told once who holds the first one it waits for.
// It fails only when ctx ends first or a lock file cannot be opened; what it took is then given
// back.
//
// One lock per CPU rather than one per set of CPUs: two processes confined to different but
// overlapping sets (taskset -c 0-3 and 2-5) share CPUs 2 and 3, and must take turns as surely as
// two on the same set; two on disjoint sets (two Slurm jobs' cpusets) need not. Every holder
// takes its CPUs in ascending order, so two never wait for each other. Each CPU's lock queues
// its waiters as a GPU's does (Lock), so a batch that times one evaluation after another lets a
// waiting command have its turn.
func LockCPUs(ctx context.Context, kind string, cpus []int, waiting func(*Busy)) (*Held, error) {
	device := "cpu " + CPUList(cpus)
	held := &Held{}
	told := false
	for _, c := range cpus {
		n := strconv.Itoa(c)
		h, err := lock(ctx, kind, unit{file: "cpu-" + n, what: "CPU " + n, device: device}, func(b *Busy) {
			if !told && waiting != nil {
				waiting(b)
			}
			told = true
		})
		if err != nil {
			held.Release()
			return nil, err
		}
		held.fs = append(held.fs, h.fs...)
	}
	return held, nil
}
