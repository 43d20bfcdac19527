#!/usr/bin/env bash
# geist and llama.cpp side by side on the same GGUF files, in interleaved
# rounds (the machine is shared and its load drifts: every round runs both
# programs on every file and thread count, alternating which goes first),
# printing each round's speeds and ratios (with the 1-minute load average
# when the pair finished) and, at the end, the range of every ratio over
# the rounds.
#
#   scripts/bench-peer.sh [-r ROUNDS] [-t 1,2] [-p 128] [-n 32] [-b 4,8] [--rss] MODEL.gguf...
#
# Per file and thread count:
#   pp    prefill of P tokens (tok/s), geist bench -p P / llama-bench -p P
#   tg    decode of N tokens (tok/s), geist bench -n N / llama-bench -n N
#   c(K)  a K-token pass over one token's pass: geist's own definition (all
#         K positions' logits computed, as verification needs), and for
#         llama.cpp K·tg/ppK from llama-bench -p K (last position's logits)
# --rss also runs each file once through `geist run` and llama.cpp's
# llama-completion (decoding 64 tokens at a 2048-token context, geist with
# no prompt cache or speculation, llama.cpp
# loaded with -lm none) and prints their peak resident memory.
#
# llama.cpp comes from ../shared/peer/setup.sh (Debian's build in a chroot,
# PEER_ROOT, default /opt/llamacpp-root; the best CPU backend for this
# processor); llama-bench loads with -lm none (on some VMs its mmap loading
# is several times slower). Needs root (chroot, bind mounts), jq and awk.
# GEIST names the geist binary to measure (default: built from this tree).
set -euo pipefail

ROUNDS=2 THREADS=1,2 P=128 N=32 BATCH=4,8 RSS=0 REPS=${REPS:-2}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-r) ROUNDS=$2; shift 2 ;;
	-t) THREADS=$2; shift 2 ;;
	-p) P=$2; shift 2 ;;
	-n) N=$2; shift 2 ;;
	-b) BATCH=$2; shift 2 ;;
	--rss) RSS=1; shift ;;
	-h | --help) usage ;;
	-*) echo "bench-peer: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage
ROOT=${PEER_ROOT:-/opt/llamacpp-root}
[ -x "$ROOT/usr/bin/llama-bench" ] || { echo "bench-peer: no llama.cpp in $ROOT: run ../shared/peer/setup.sh" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench-peer: needs jq" >&2; exit 2; }

cd "$(dirname "$0")/.."
if [ -z "${GEIST:-}" ]; then
	CGO_ENABLED=0 go build -trimpath -o bin/geist ./cmd/geist
	GEIST=$PWD/bin/geist
fi

# Each file's directory is bound inside the chroot at a mount point of this
# run's own (so that concurrent runs do not unmount each other's).
MNT=/geist-peer-$$
mkdir -p "$ROOT$MNT"
declare -A inside
i=0
for m in "$@"; do
	[ -f "$m" ] || { echo "bench-peer: no file $m" >&2; exit 2; }
	d=$(cd "$(dirname "$m")" && pwd)
	mkdir -p "$ROOT$MNT/$i"
	mount --bind "$d" "$ROOT$MNT/$i"
	inside[$m]=$MNT/$i/$(basename "$m")
	i=$((i + 1))
done
cleanup() {
	for d in "$ROOT$MNT"/*; do umount "$d" 2>/dev/null || true; rmdir "$d" 2>/dev/null || true; done
	rmdir "$ROOT$MNT" 2>/dev/null || true
}
trap cleanup EXIT
llama() { chroot "$ROOT" "$@"; }

OUT=$(mktemp -d)
touch "$OUT/ratios" "$OUT/c"
echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# geist $("$GEIST" version 2>/dev/null | head -1), llama.cpp $(llama dpkg-query -W -f '${Version}' llama.cpp-tools 2>/dev/null)"
echo "# rounds $ROUNDS, threads $THREADS, pp$P, tg$N, c($BATCH), best of $REPS repetitions per measurement"

run_geist() { # model threads -> JSON line
	"$GEIST" bench --json -m "$1" -t "$2" -p "$P" -n "$N" --batch "$BATCH" -r "$REPS"
}
run_llama() { # model threads -> JSON array
	llama llama-bench -m "${inside[$1]}" -t "$2" -p "$P,$BATCH" -n "$N" -r "$REPS" -lm none -o json 2>/dev/null
}

for r in $(seq 1 "$ROUNDS"); do
	for m in "$@"; do
		for t in ${THREADS//,/ }; do
			f=$OUT/$r-$(basename "$m")-$t
			if [ $((r % 2)) = 1 ]; then
				run_geist "$m" "$t" >"$f.geist"
				run_llama "$m" "$t" >"$f.llama"
			else
				run_llama "$m" "$t" >"$f.llama"
				run_geist "$m" "$t" >"$f.geist"
			fi
			gpp=$(jq -r '.pp_tok_s // 0' "$f.geist")
			gtg=$(jq -r '.tg_tok_s // 0' "$f.geist")
			lpp=$(jq -r --argjson p "$P" '.[] | select(.n_prompt == $p and .n_gen == 0) | .avg_ts' "$f.llama")
			ltg=$(jq -r --argjson n "$N" '.[] | select(.n_gen == $n and .n_prompt == 0) | .avg_ts' "$f.llama")
			line=$(printf '%-22s t=%s round %s  pp %7.1f / %7.1f = %5.2fx  tg %6.2f / %6.2f = %5.2fx' \
				"$(basename "$m")" "$t" "$r" "$gpp" "$lpp" "$(awk -v a="$gpp" -v b="$lpp" 'BEGIN{print a/b}')" \
				"$gtg" "$ltg" "$(awk -v a="$gtg" -v b="$ltg" 'BEGIN{print a/b}')")
			for k in ${BATCH//,/ }; do
				gc=$(jq -r --arg k "$k" '.verify_cost[$k]' "$f.geist")
				lk=$(jq -r --argjson k "$k" '.[] | select(.n_prompt == $k and .n_gen == 0) | .avg_ts' "$f.llama")
				lc=$(awk -v k="$k" -v tg="$ltg" -v pk="$lk" 'BEGIN{print k*tg/pk}')
				line+=$(printf '  c(%s) %.2f / %.2f' "$k" "$gc" "$lc")
				echo "$(basename "$m") $t c$k $gc $lc" >>"$OUT/c"
			done
			echo "$line  load $(cut -d' ' -f1 /proc/loadavg)"
			echo "$(basename "$m") $t pp $(awk -v a="$gpp" -v b="$lpp" 'BEGIN{print a/b}')" >>"$OUT/ratios"
			echo "$(basename "$m") $t tg $(awk -v a="$gtg" -v b="$ltg" 'BEGIN{print a/b}')" >>"$OUT/ratios"
		done
	done
done

echo
echo "# ranges over the rounds: geist / llama.cpp speed (pp, tg); c(K) geist and llama.cpp"
awk '{k=$1" t="$2" "$3; v=$4; if(!(k in lo)||v<lo[k])lo[k]=v; if(!(k in hi)||v>hi[k])hi[k]=v; if(!(k in seen)){seen[k]=1; order[n++]=k}}
	END{for(i=0;i<n;i++){k=order[i]; printf "%-40s %.2f-%.2fx\n", k, lo[k], hi[k]}}' "$OUT/ratios"
awk '{k=$1" t="$2" "$3; g=$4; l=$5; if(!(k in gl)||g<gl[k])gl[k]=g; if(!(k in gh)||g>gh[k])gh[k]=g; if(!(k in ll)||l<ll[k])ll[k]=l; if(!(k in lh)||l>lh[k])lh[k]=l; if(!(k in seen)){seen[k]=1; order[n++]=k}}
	END{for(i=0;i<n;i++){k=order[i]; sub(/ c/, " c(", k); printf "%-40s geist %.2f-%.2f  llama.cpp %.2f-%.2f\n", k")", gl[order[i]], gh[order[i]], ll[order[i]], lh[order[i]]}}' "$OUT/c"

if [ "$RSS" = 1 ]; then
	echo
	echo "# peak RSS decoding 64 tokens at a 2048-token context (MiB); file size for reference"
	for m in "$@"; do
		# time -o: the measured command's own output is thrown away, time's is kept.
		/usr/bin/time -o "$OUT/rss" -f '%M' "$GEIST" run -m "$m" --ctx 2048 -t 2 -n 64 --temp 0 --spec off --cache-size 0 "Once upon a time" >/dev/null 2>&1
		g=$(tail -1 "$OUT/rss")
		/usr/bin/time -o "$OUT/rss" -f '%M' chroot "$ROOT" llama-completion -m "${inside[$m]}" -c 2048 -t 2 -n 64 --temp 0 -lm none -no-cnv -p "Once upon a time" >/dev/null 2>&1
		l=$(tail -1 "$OUT/rss")
		printf '%-22s file %6.0f  geist %6.0f  llama.cpp %6.0f\n' "$(basename "$m")" \
			"$(awk -v b="$(stat -c %s "$m")" 'BEGIN{print b/1048576}')" "$(awk -v k="$g" 'BEGIN{print k/1024}')" "$(awk -v k="$l" 'BEGIN{print k/1024}')"
	done
fi
rm -rf "$OUT"
