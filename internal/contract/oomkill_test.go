package contract

import (
	"os"
	"testing"
	"time"
)

// The OOM killer's lines, as kernels 4.19 to 6.x print them (read with dmesg -r), name the
// process a death by SIGKILL is blamed on; an older kill of a reused pid does not.
func TestOOMKillLine(t *testing.T) {
	kmsg := `<6>[ 7908.383336] cgroup: fork rejected by pids controller in /kbplatform-sandbox/31062
<4>[ 9100.000100] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
<6>[ 9100.000900] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kbp,task_memcg=/kbp,task=python3,pid=4242,uid=0
<3>[ 9100.001000] Memory cgroup out of memory: Killed process 4242 (python3) total-vm:9012345kB, anon-rss:8123456kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:16000kB oom_score_adj:0
<6>[ 9100.200000] oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB
<3>[  120.500000] Out of memory: Killed process 777 (python3) total-vm:1000kB, anon-rss:900kB
<6>[ 9200.000000] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=cc1plus,pid=5151,uid=1000
`
	tests := []struct {
		name  string
		pids  []int
		since time.Duration
		want  string
	}{
		{"the killed worker", []int{4241, 4242}, 9000 * time.Second,
			"Memory cgroup out of memory: Killed process 4242 (python3) total-vm:9012345kB, anon-rss:8123456kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:16000kB oom_score_adj:0"},
		{"another process", []int{4243}, 0, ""},
		{"a pid killed before the process started", []int{777}, 9000 * time.Second, ""},
		{"the same pid killed after it started", []int{777}, 100 * time.Second, "Out of memory: Killed process 777 (python3) total-vm:1000kB, anon-rss:900kB"},
		{"only the oom-kill line", []int{5151}, 9000 * time.Second,
			"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=cc1plus,pid=5151,uid=1000"},
		{"no pid known", []int{0}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := oomKillLine([]byte(kmsg), tc.pids, tc.since); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The counter the fallback compares is read from this host's /proc/vmstat.
func TestVMStatOOMKills(t *testing.T) {
	if got := parseVMStatOOMKills([]byte("nr_free_pages 12\noom_kill 3\nnuma_hit 9\n")); got != 3 {
		t.Errorf("got %d, want 3", got)
	}
	if got := parseVMStatOOMKills([]byte("nr_free_pages 12\n")); got != -1 {
		t.Errorf("a kernel without the counter: got %d, want -1", got)
	}
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		t.Skipf("no /proc/vmstat: %v", err)
	}
	if n := parseVMStatOOMKills(b); n < 0 {
		t.Errorf("this host's /proc/vmstat has no oom_kill line:\n%.300s", b)
	}
}
