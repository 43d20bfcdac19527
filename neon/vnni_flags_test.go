package neon

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// hasVNNIFlags reports from the CPU flags alone whether the avx512vnni set
// should run here.
func hasVNNIFlags() bool {
	return runtime.GOARCH == "amd64" && !purego && cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C &&
		cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI
}
