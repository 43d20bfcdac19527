package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// RepackAuto, RepackAll and RepackNone are the words ParseRepackBudget
// takes beside a size.
const (
	RepackAuto = "auto"
	RepackAll  = "all"
	RepackNone = "none"
)

// RepackBudget is the memory the repacked weights may take (see
// model.LoadOptions.RepackBudget) for the --repack-budget value spec:
// "auto" (or "") is MemAvailable less two reserves (one for the KV cache
// and the other buffers, one the OS keeps for the page cache of what is
// not repacked), each an eighth of it and at least 256 MiB, so that a
// file near the board's memory is repacked as far as it fits and the
// rest read from the mapped file; "all" repacks everything (-1), "none"
// nothing, and a size ("6GiB", "512M", "3.5G", bytes) bounds it.
// available is MemAvailable in bytes (0: not known, and auto repacks
// everything).
func RepackBudget(spec string, available int64) (int64, error) {
	switch s := strings.TrimSpace(strings.ToLower(spec)); s {
	case "", RepackAuto:
		if available <= 0 {
			return -1, nil
		}
		return max(available-2*max(available/8, minReserve), 0), nil
	case RepackAll:
		return -1, nil
	case RepackNone, "0":
		return 0, nil
	default:
		n, err := parseSize(s)
		if err != nil {
			return 0, fmt.Errorf("repack budget %q: want auto, all, none or a size such as 6GiB or 512MiB", spec)
		}
		return n, nil
	}
}

// parseSize reads "6GiB", "6G", "6GB" (all 2^30: memory sizes), "512MiB",
// "64KiB" or a number of bytes.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"gib", 1 << 30}, {"gb", 1 << 30}, {"g", 1 << 30}, {"mib", 1 << 20}, {"mb", 1 << 20}, {"m", 1 << 20}, {"kib", 1 << 10}, {"kb", 1 << 10}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("not a size")
	}
	return int64(v * float64(mult)), nil
}
