package engine

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lowerPriority runs the calling goroutine on a thread of its own at the
// lowest CPU priority (nice 19) for the rest of its life: the thread ends
// with the goroutine (it is never unlocked), so no other goroutine runs
// at that priority. A background snapshot write takes it, so that a
// request's threads get the processors first.
func lowerPriority() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
