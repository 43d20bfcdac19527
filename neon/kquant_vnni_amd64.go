//go:build amd64 && !purego

package neon

// vnniKQuants installs the avx512vnni set's k-quant kernels.
func vnniKQuants(k *Kernels) {}
