package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runQueueWait is how long this process's threads have been ready to run
// but waiting for a processor (the second field of Linux's
// /proc/self/task/*/schedstat, summed over the threads alive now; 0 where
// that is not available). On a shared machine it tells how much of a
// measurement's wall time went to other processes rather than to the
// threads waiting for each other.
func runQueueWait() time.Duration {
	dirs, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var ns int64
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			ns += v
		}
	}
	return time.Duration(ns)
}
