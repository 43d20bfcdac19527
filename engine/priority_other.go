//go:build !linux

package engine

// lowerPriority does nothing here: only Linux sets the priority of one
// thread (see priority_linux.go).
func lowerPriority() {}
