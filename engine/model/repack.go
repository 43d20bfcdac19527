package model

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// LoadOptions tunes LoadWith.
type LoadOptions struct {
	// RepackBudget bounds the memory the repacked weights take, in bytes
	// (negative: no bound, every matrix with a packed layout is
	// repacked). The matrices are taken in a fixed order, the layers'
	// attention and dense blocks and the output head first, then the
	// experts layer by layer (an expert's three matrices together), and
	// repacking stops at the first that does not fit: the rest stay in
	// ggml layout in the mapped file, multiplied from there by the same
	// kernel set's ggml-layout kernels, and the OS pages them in and out
	// as llama.cpp's mmap does (a model larger than the memory still
	// runs).
	RepackBudget int64
	// Plan computes Repack without repacking anything (geist inspect).
	Plan bool
	// Progress, if set, is told after each repacked matrix that done of
	// total bytes of the file's weights to repack are repacked (called
	// from the packing goroutines, one call at a time).
	Progress func(done, total int64)
}

// RepackStats is what a load repacked into anonymous memory and what it
// left in ggml layout in the mapped file.
type RepackStats struct {
	Budget        int64 // the budget (negative: none)
	Packed        int64 // bytes of memory the repacked matrices take
	PackedFile    int64 // their bytes in the file
	InFile        int64 // bytes of the matrices with a packed layout left in the file
	Matrices      int   // matrices repacked
	MatricesLeft  int   // matrices with a packed layout left in the file
	Experts       int   // experts of all layers
	ExpertsInFile int   // experts left in the file
}

// String says it in one line: "16.12 GiB of 16.12 GiB repacked" or
// "4.00 GiB of 16.12 GiB repacked (budget 4.00 GiB); 12.12 GiB read from
// the file, 4608 of 6144 experts".
func (r RepackStats) String() string {
	if r.PackedFile+r.InFile == 0 {
		// neon without the dot-product instructions (Cortex-A72) has no
		// packed layout for Q4_0 and the k-quants: every matrix is
		// multiplied from the file whatever the budget.
		return "nothing to repack: this CPU's kernels read the file's types as they are"
	}
	s := fmt.Sprintf("%s of %s repacked", gib(r.PackedFile), gib(r.PackedFile+r.InFile))
	if r.Budget >= 0 {
		s += fmt.Sprintf(" (budget %s)", gib(r.Budget))
	}
	if r.InFile > 0 {
		s += fmt.Sprintf("; %s read from the file", gib(r.InFile))
		if r.ExpertsInFile > 0 {
			s += fmt.Sprintf(", %d of %d experts", r.ExpertsInFile, r.Experts)
		}
	}
	return s
}

func gib(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// HugePagesEnv names the environment variable that, set to "off", keeps
// the repacked weights in small pages (to compare; the default asks for
// transparent huge pages).
const HugePagesEnv = "GEIST_HUGEPAGES"

const packAlign = 64

// packUnits lists the matrices to repack in budget order, grouped in what
// is repacked together: one matrix, or an expert's gate, up and down (so
// that an expert's gate and up always share one activation format). A
// tied output matrix is listed once; matrices without a packed layout
// are not listed.
func (m *Model) packUnits() (units [][]*quant.Matrix, experts []bool) {
	ms := m.matrices()
	seen := map[*quant.Matrix]bool{}
	expert := map[*quant.Matrix]bool{}
	for i := range m.Layers {
		for _, w := range m.Layers[i].ExpGate {
			expert[w] = true
		}
	}
	for i := 0; i < len(ms); i++ {
		w := ms[i]
		if seen[w] {
			continue
		}
		seen[w] = true
		u := []*quant.Matrix{w}
		if expert[w] { // matrices() lists an expert's gate, up and down in a row
			u = ms[i : i+3]
			i += 2
		}
		u = slices.DeleteFunc(slices.Clone(u), func(w *quant.Matrix) bool { return w.PackedSize() == 0 })
		if len(u) > 0 {
			units, experts = append(units, u), append(experts, expert[w])
		}
	}
	return units, experts
}

func unitSize(u []*quant.Matrix) (mem, file int64) {
	for _, w := range u {
		mem += int64((w.PackedSize() + packAlign - 1) / packAlign * packAlign)
		file += int64(len(w.Data))
	}
	return mem, file
}

// pack repacks the matrices the active kernel set has a layout for, as
// far as o's budget goes, into one block of anonymous memory owned by f,
// and releases the file pages the repacked matrices were read from
// (their Data stays valid: it is read again only if a test switches to
// another kernel set). Resident memory thus holds each weight once.
func (m *Model) pack(f *gguf.File, o LoadOptions) error {
	units, experts := m.packUnits()
	r := RepackStats{Budget: o.RepackBudget}
	for i := range m.Layers {
		r.Experts += len(m.Layers[i].ExpGate)
	}
	var todo []*quant.Matrix
	full := false
	for i, u := range units {
		mem, file := unitSize(u)
		if !full && (o.RepackBudget < 0 || r.Packed+mem <= o.RepackBudget) {
			r.Packed, r.PackedFile, r.Matrices = r.Packed+mem, r.PackedFile+file, r.Matrices+len(u)
			todo = append(todo, u...)
			continue
		}
		full = true // a prefix: the rest stays in the file
		r.InFile, r.MatricesLeft = r.InFile+file, r.MatricesLeft+len(u)
		if experts[i] {
			r.ExpertsInFile++
		}
	}
	m.Repack = r
	if o.Plan {
		return nil
	}
	if r.Packed == 0 {
		m.adviseExperts()
		return nil
	}
	buf, err := f.Anon(int(r.Packed), os.Getenv(HugePagesEnv) != "off")
	if err != nil {
		return fmt.Errorf("model: memory for the repacked weights: %w", err)
	}
	// The matrices are packed by as many goroutines as there are CPUs,
	// each into its own part of buf.
	type job struct {
		w   *quant.Matrix
		dst []byte
	}
	jobs := make(chan job, len(todo))
	for _, w := range todo {
		size := w.PackedSize()
		jobs <- job{w, buf[:size]}
		buf = buf[(size+packAlign-1)/packAlign*packAlign:]
	}
	close(jobs)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	var progress sync.Mutex
	var done int64
	for range runtime.NumCPU() {
		wg.Go(func() {
			for j := range jobs {
				if err := j.w.PackReleasing(j.dst, f.Release); err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				f.Release(j.w.Data)
				if o.Progress != nil {
					progress.Lock()
					done += int64(len(j.w.Data))
					o.Progress(done, r.PackedFile)
					progress.Unlock()
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("model: %w", err)
	default:
	}
	m.adviseExperts()
	return nil
}
