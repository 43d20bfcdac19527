//go:build unix

package model

import (
	"syscall"
	"testing"
)

// reportCPU reports the process's CPU time per iteration since c0 (a
// cpuNow reading) as cpu-ns/op: on a shared, loaded machine the wall time
// of ns/op includes the waits for a core, the CPU time does not.
func reportCPU(b *testing.B, c0 int64) {
	if c0 > 0 && b.N > 0 {
		b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
	}
}

// cpuNow is the CPU time (user + system) the process has used, in
// nanoseconds (0 where unknown).
func cpuNow() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
