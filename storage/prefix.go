package storage

// prefixHashes returns h where h[n] identifies tokens[:n] (h[0] is the
// empty prefix). Each step mixes one token into the previous hash, so the
// hashes of every prefix cost one pass over the tokens. A matching hash is
// only a candidate: the cache compares the stored tokens before a hit.
func prefixHashes(tokens []int32) []uint64 {
	h := make([]uint64, len(tokens)+1)
	x := uint64(0x6765697374206b76) // "geist kv"
	h[0] = x
	for i, t := range tokens {
		x = mix64(x ^ (uint64(uint32(t)) + 0x9e3779b97f4a7c15))
		h[i+1] = x
	}
	return h
}

// mix64 is the SplitMix64 finaliser: a bijection with full avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
