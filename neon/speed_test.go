package neon

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/geisten/geist/neon/ggml"
)

// TestSpeedRatios (run with GEIST_NEON_SPEED=1) times every kernel of every
// available set in thread CPU time, which a loaded machine distorts far
// less than wall time, and prints each set's speed relative to generic:
// the median of several interleaved rounds.
func TestSpeedRatios(t *testing.T) {
	if os.Getenv("GEIST_NEON_SPEED") == "" {
		t.Skip("set GEIST_NEON_SPEED=1 to measure kernel speed ratios")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := rand.New(rand.NewPCG(21, 22))
	type job struct {
		name string
		run  func(k *Kernels)
	}
	var jobs []job
	for _, dt := range dotTypes {
		nb := 4096 / dt.bs
		for _, n := range []int{1, 4, 8} {
			w := randWeights(r, dt, nb, 0)
			a := randActs(r, dt, nb, n, nb*dt.asize, 0)
			out := make([]float32, n)
			jobs = append(jobs, job{fmt.Sprintf("Dot%s 4096x%d", dt.name, n), func(k *Kernels) {
				dt.pick(k)(out, w, a, nb*dt.asize, nb, n)
			}})
		}
	}
	x := randFloats(r, 4096)
	q := make([]byte, 4096/256*sizeQ8_K)
	h := make([]uint16, 4096)
	for i := range h {
		h[i] = ggml.FP32ToFP16(x[i])
	}
	fb := make([]byte, 4*4096)
	put(fb, x, 4)
	o := make([]float32, 4096)
	var one [1]float32
	jobs = append(jobs,
		job{"QuantizeQ8_0 4096", func(k *Kernels) { k.QuantizeQ8_0(q, x) }},
		job{"QuantizeQ8_K 4096", func(k *Kernels) { k.QuantizeQ8_K(q, x) }},
		job{"DotF32F16 128", func(k *Kernels) { k.DotF32F16(x[:128], h[:128]) }},
		job{"AxpyF16 128", func(k *Kernels) { k.AxpyF16(o[:128], 0.5, h[:128]) }},
		job{"RMSNormScale 4096", func(k *Kernels) { k.RMSNormScale(x) }},
		job{"DotF32 4096", func(k *Kernels) { k.DotF32(one[:], fb, fb, 0, 4096, 1) }},
		job{"DotF16 4096", func(k *Kernels) { k.DotF16(one[:], fb, fb, 0, 4096, 1) }},
	)
	const rounds = 5
	for _, j := range jobs {
		times := map[string][]float64{}
		for round := 0; round < rounds; round++ {
			for _, k := range Available() {
				times[k.Name] = append(times[k.Name], cpuPerCall(func() { j.run(k) }))
			}
		}
		line := fmt.Sprintf("%-20s", j.name)
		g := median(times["generic"])
		for _, k := range Available() {
			m := median(times[k.Name])
			line += fmt.Sprintf("  %s %8.0fns (%.1fx)", k.Name, m, g/m)
		}
		t.Log(line)
	}
}

// cpuPerCall returns the thread CPU time per call of f, in ns, over at least
// 20ms of CPU time.
func cpuPerCall(f func()) float64 {
	f()
	calls := 1
	for {
		t0 := threadCPU()
		for i := 0; i < calls; i++ {
			f()
		}
		d := threadCPU() - t0
		if d >= 20*time.Millisecond {
			return float64(d.Nanoseconds()) / float64(calls)
		}
		calls *= 2
	}
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestSpeedRows (run with GEIST_NEON_SPEED=1) times every available
// row-group kernel on 8 rows of 4096 values and 1, 4, 8 columns against
// the same set's one-row kernel called for the 8 rows and against the
// generic row-group reference, in thread CPU time (median of interleaved
// rounds).
func TestSpeedRows(t *testing.T) {
	needRows(t)
	if os.Getenv("GEIST_NEON_SPEED") == "" {
		t.Skip("set GEIST_NEON_SPEED=1 to measure kernel speed ratios")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := rand.New(rand.NewPCG(25, 26))
	for _, rt := range rowsTypes {
		dt := rt.dt
		nb := 4096 / dt.bs
		ws := nb * dt.wsize
		w := make([]byte, 0, RowGroup*ws)
		for row := 0; row < RowGroup; row++ {
			w = append(w, randWeights(r, dt, nb, 0)[:ws]...)
		}
		gen := GenericRows(dt.name)
		for _, n := range []int{1, 4, 8} {
			a := randActs(r, dt, nb, n, nb*dt.asize, 0)
			out := make([]float32, n*RowGroup)
			for _, k := range Available() {
				rows := rt.pick(k)
				if rows == nil {
					continue
				}
				dot := dt.pick(k)
				var tr, td, tg []float64
				for round := 0; round < 5; round++ {
					tr = append(tr, cpuPerCall(func() { rows(out, RowGroup, w, ws, a, nb*dt.asize, nb, n) }))
					td = append(td, cpuPerCall(func() {
						for row := 0; row < RowGroup; row++ {
							dot(out[row*n:row*n+n], w[row*ws:], a, nb*dt.asize, nb, n)
						}
					}))
					tg = append(tg, cpuPerCall(func() { gen(out, RowGroup, w, ws, a, nb*dt.asize, nb, n) }))
				}
				mr, md, mg := median(tr), median(td), median(tg)
				t.Logf("Rows%s 8x4096x%d %-13s %9.0fns  vs 8x%s.Dot %9.0fns (%.2fx)  vs generic rows %9.0fns (%.1fx)",
					dt.name, n, k.Name, mr, k.Name, md, md/mr, mg, mg/mr)
			}
		}
	}
}
