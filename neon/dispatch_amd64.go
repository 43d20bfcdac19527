//go:build amd64 && !purego

package neon

import "golang.org/x/sys/cpu"

// hasAVX2 is the feature check of the "avx2" set: AVX2 for the integer
// work, FMA for the float accumulation and F16C for the F16 conversions
// (every AVX2 CPU has the latter two, but the check costs nothing).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// hasVNNI is the feature check of the "avx512vnni" set: the avx2 set plus
// VPDPBUSD and friends on 256-bit registers (AVX-512 VNNI with the VL and
// BW extensions; Zen 4, Ice Lake and later). The x/sys/cpu flags include
// the operating system's support for the AVX-512 state.
var hasVNNI = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI

func init() {
	avx := &Kernels{
		Name:         "avx2",
		DotQ4_0Q8_0:  dotQ4_0Q8_0avx2,
		DotQ5_0Q8_0:  dotQ5_0Q8_0avx2,
		DotQ8_0Q8_0:  dotQ8_0Q8_0avx2,
		DotQ4_KQ8_K:  dotQ4_KQ8_Kavx2,
		DotQ6_KQ8_K:  dotQ6_KQ8_Kavx2,
		RowsQ4_0Q8_0: rowsQ4_0Q8_0avx2,
		RowsQ5_0Q8_0: rowsQ5_0Q8_0avx2,
		RowsQ8_0Q8_0: rowsQ8_0Q8_0avx2,
		DotF32:       dotF32avx2,
		DotF16:       dotF16avx2,
		QuantizeQ8_0: quantizeQ8_0avx2,
		QuantizeQ8_K: quantizeQ8_Kavx2,
		RMSNormScale: rmsNormScaleavx2,
		DotF32F16:    dotF32F16avx2,
		AxpyF16:      axpyF16avx2,
		AttnScores:   attnScoresavx2,
		AttnSum:      attnSumavx2,
		SiLUMul:      siluMulavx2,
		DeltaRow:     deltaRowavx2,
		DeltaRows:    deltaRowsavx2,
		SSMStep:      ssmStepavx2,
		Softmax:      softmaxavx2,
		ExpSub:       expSubavx2,
		Add:          addavx2,
		ScaleMul:     scaleMulavx2,
		ToF16:        toF16avx2,
		AttnTile:     &avx2AttnTile,
		DequantQ8_0:  dequantQ8_0avx2,
		ScoresQ8_0:   scoresQ8_0avx2,
		TransposeV8:  transposeV8avx2,
		SumV8:        sumV8avx2,
		// PreferV8 false: the float value sums (FMA on 256 and 512 bits)
		// are faster here than the 256-bit integer ones
		// (BenchmarkAttnValuesQ8, tiles of 32 rows).
	}
	avx2Packings(avx)
	avx2KPackings(avx)
	register(avx, hasAVX2)

	// avx512vnni: the avx2 kernels with the integer dot products replaced
	// where VPDPBUSD pays (registered after avx2, so preferred).
	vnni := *avx
	vnni.Name = "avx512vnni"
	vnni.AttnTile = &vnniAttnTile
	vnni.ScoresQ8_0 = scoresQ8_0vnni
	vnni.SumV8 = sumV8vnni
	fill(&vnni, generic)
	vnniRows(&vnni)
	vnniTiles(&vnni)
	vnniKQuants(&vnni)
	vnniPackings(&vnni)
	vnniKPackings(&vnni)
	register(&vnni, hasVNNI)
}
