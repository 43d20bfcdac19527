//go:build amd64 && !purego

package neon

// vnniRows installs the avx512vnni set's row-group kernels.
func vnniRows(k *Kernels) {}
