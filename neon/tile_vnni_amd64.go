//go:build amd64 && !purego

package neon

import "math"

// The AVX-512 VNNI tile kernels (tile_vnni_amd64.s). The wrappers check
// every length, so the assembly never reads or writes outside the slices.

//go:noescape
func tileQ4_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)

//go:noescape
func tileQ5_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)

//go:noescape
func tileQ8_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)

//go:noescape
func packQ8_0VNNI(dst *byte, a *byte, aStride, nb, n, o int)

type asmTile func(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)

// tileMul checks the arguments of a Tile's Mul and runs the kernel k: out
// must hold n groups of RowGroup floats ldo apart (ldo >= RowGroup when
// n > 1), w RowGroup rows of nb blocks of wSize bytes wStride apart, pack
// TilePackSize*nb*n bytes. It panics with errShort otherwise (a caller
// bug, like an index out of range).
func tileMul(k asmTile, out []float32, ldo int, w []byte, wStride int, pack []byte, nb, n, wSize int) {
	if n < 1 || nb < 0 || nb > math.MaxInt/TilePackSize/n || (n > 1 && ldo < RowGroup) ||
		!spans(len(out), n, ldo, RowGroup) || !spans(len(w), RowGroup, wStride, nb*wSize) ||
		len(pack) < TilePackSize*nb*n {
		panic(errShort)
	}
	if nb == 0 {
		for j := 0; j < n; j++ {
			clear(out[j*ldo : j*ldo+RowGroup])
		}
		return
	}
	k(&out[0], ldo, &w[0], wStride, &pack[0], nb, n)
}

// tilePack checks the arguments of a Tile's Pack (a n columns of nb Q8_0
// blocks aStride apart, dst TilePackSize*nb*n bytes) and packs with offset
// o.
func tilePack(dst, a []byte, aStride, nb, n, o int) {
	if n < 1 || nb < 0 || nb > math.MaxInt/TilePackSize/n || !spans(len(a), n, aStride, nb*sizeQ8_0) ||
		len(dst) < TilePackSize*nb*n {
		panic(errShort)
	}
	if nb == 0 {
		return
	}
	packQ8_0VNNI(&dst[0], &a[0], aStride, nb, n, o)
}

// vnniTile makes the Tile of a weight type with unsigned offset o.
func vnniTile(k asmTile, wSize, o int) *Tile {
	return &Tile{
		Pack: func(dst, a []byte, aStride, nb, n int) { tilePack(dst, a, aStride, nb, n, o) },
		Mul: func(out []float32, ldo int, w []byte, wStride int, pack []byte, nb, n int) {
			tileMul(k, out, ldo, w, wStride, pack, nb, n, wSize)
		},
	}
}

// vnniTiles installs the avx512vnni set's tile kernels.
func vnniTiles(k *Kernels) {
	k.TileQ4_0Q8_0 = vnniTile(tileQ4_0Q8_0VNNI, sizeQ4_0, 8)
	k.TileQ5_0Q8_0 = vnniTile(tileQ5_0Q8_0VNNI, sizeQ5_0, 16)
	k.TileQ8_0Q8_0 = vnniTile(tileQ8_0Q8_0VNNI, sizeQ8_0, 128)
}
