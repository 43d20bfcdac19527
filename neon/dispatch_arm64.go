//go:build arm64 && !purego

package neon

import "golang.org/x/sys/cpu"

// Registration order is worst first: Available lists the last one first.
func init() {
	register(arm64Set(false), cpu.ARM64.HasASIMD)
	register(arm64Set(true), cpu.ARM64.HasASIMD && cpu.ARM64.HasASIMDDP)
}
