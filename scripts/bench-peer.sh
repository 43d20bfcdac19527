#!/usr/bin/env bash
# geist and llama.cpp side by side on the same GGUF files, in interleaved
# rounds (the machine is shared and its load drifts: every round runs both
# programs on every file and thread count, alternating which goes first),
# printing each round's speeds and ratios (with the 1-minute load average
# when the pair finished) and, at the end, the range of every ratio over
# the rounds.
#
#   scripts/bench-peer.sh [-r ROUNDS] [-t 1,2] [-p 128[,4096]] [-n 32] [-d 0[,4096]] [-b 4,8] [--rss] [--spec FILE] MODEL.gguf...
#
# Per file and thread count:
#   pp    prefill of P tokens (tok/s), geist bench -p P / llama-bench -p P
#         (each of a comma-separated list)
#   tg    decode of N tokens (tok/s), geist bench -n N / llama-bench -n N, at
#         each depth of -d (positions already in the cache: geist bench
#         --depth D / llama-bench -d D; shown as tg@D when not 0)
#   c(K)  a K-token pass over one token's pass: geist's own definition (all
#         K positions' logits computed, as verification needs), and for
#         llama.cpp K·tg/ppK from llama-bench -p K (last position's logits)
# --rss also runs each file once through `geist run` and llama.cpp's
# llama-completion (decoding 64 tokens at a 2048-token context, geist with
# no prompt cache or speculation, llama.cpp
# loaded with -lm none) and prints their peak resident memory.
# --spec FILE also compares speculation on the prompt in FILE (a repetitive
# one), once per file and thread count, decoding 4·N tokens greedily:
# geist bench --spec lookup and --spec auto (each against geist's own
# plain decoding, interleaved) and llama.cpp's n-gram drafting,
# llama-speculative-simple --spec-type ngram-simple / ngram-map-k /
# ngram-mod, against llama-completion's plain decoding of the same
# prompt: every speedup is over the program's own plain decoding.
#
# llama.cpp comes from ../shared/peer/setup.sh (Debian's build in a chroot,
# PEER_ROOT, default /opt/llamacpp-root; the best CPU backend for this
# processor); llama-bench loads with -lm none (on some VMs its mmap loading
# is several times slower). Needs root (chroot, bind mounts), jq and awk.
# GEIST names the geist binary to measure (default: built from this tree).
set -euo pipefail

ROUNDS=2 THREADS=1,2 P=128 N=32 DEPTH=0 BATCH=4,8 RSS=0 SPEC= REPS=${REPS:-2}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-r) ROUNDS=$2; shift 2 ;;
	-t) THREADS=$2; shift 2 ;;
	-p) P=$2; shift 2 ;;
	-n) N=$2; shift 2 ;;
	-d) DEPTH=$2; shift 2 ;;
	--spec) SPEC=$2; shift 2 ;;
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
[ -z "$SPEC" ] || [ -f "$SPEC" ] || { echo "bench-peer: no prompt file $SPEC" >&2; exit 2; }
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
echo "# rounds $ROUNDS, threads $THREADS, pp$P, tg$N at depth $DEPTH, c($BATCH), best of $REPS repetitions per measurement"

run_geist() { # model threads -> JSON line
	"$GEIST" bench --json -m "$1" -t "$2" -p "$P" -n "$N" --depth "$DEPTH" --batch "$BATCH" -r "$REPS"
}
run_llama() { # model threads -> JSON array
	{
		llama llama-bench -m "${inside[$1]}" -t "$2" -p "$P,$BATCH" -n "$N" -r "$REPS" -lm none -o json 2>/dev/null
		# decode at depth: llama-bench -d applies to every test, so alone
		if [ "$DEPTH" != 0 ]; then
			llama llama-bench -m "${inside[$1]}" -t "$2" -p 0 -n "$N" -d "$DEPTH" -r "$REPS" -lm none -o json 2>/dev/null
		fi
	} | jq -s 'add | map(.n_depth //= 0)'
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
			line=$(printf '%-22s t=%s round %s' "$(basename "$m")" "$t" "$r")
			for p in ${P//,/ }; do
				# geist bench lists .prefill only for several sizes; one is .pp_tok_s
				gpp=$(jq -r --argjson p "$p" --argjson p0 "${P%%,*}" '. as $o | [$o.prefill[]? | select(.tokens == $p) | .tok_s] | first // (if $p == $p0 then $o.pp_tok_s else 0 end) // 0' "$f.geist")
				lpp=$(jq -r --argjson p "$p" '[.[] | select(.n_prompt == $p and .n_gen == 0 and .n_depth == 0) | .avg_ts] | first // 0' "$f.llama")
				name=pp; [ "$P" = "$p" ] || name=pp$p
				line+=$(printf '  %s %7.1f / %7.1f = %5.2fx' "$name" "$gpp" "$lpp" "$(awk -v a="$gpp" -v b="$lpp" 'BEGIN{print b ? a/b : 0}')")
				echo "$(basename "$m") $t $name $(awk -v a="$gpp" -v b="$lpp" 'BEGIN{print b ? a/b : 0}')" >>"$OUT/ratios"
			done
			for d in ${DEPTH//,/ }; do
				gtg=$(jq -r --argjson d "$d" --argjson d0 "${DEPTH%%,*}" '. as $o | [$o.decode[]? | select(.tokens == $d) | .tok_s] | first // (if $d == $d0 then $o.tg_tok_s else 0 end) // 0' "$f.geist")
				ltg=$(jq -r --argjson n "$N" --argjson d "$d" '[.[] | select(.n_gen == $n and .n_prompt == 0 and .n_depth == $d) | .avg_ts] | first // 0' "$f.llama")
				name=tg; [ "$d" = 0 ] || name=tg@$d
				line+=$(printf '  %s %6.2f / %6.2f = %5.2fx' "$name" "$gtg" "$ltg" "$(awk -v a="$gtg" -v b="$ltg" 'BEGIN{print b ? a/b : 0}')")
				echo "$(basename "$m") $t $name $(awk -v a="$gtg" -v b="$ltg" 'BEGIN{print b ? a/b : 0}')" >>"$OUT/ratios"
			done
			ltg=$(jq -r --argjson n "$N" '[.[] | select(.n_gen == $n and .n_prompt == 0 and .n_depth == 0) | .avg_ts] | first // 0' "$f.llama")
			for k in ${BATCH//,/ }; do
				gc=$(jq -r --arg k "$k" '.verify_cost[$k]' "$f.geist")
				lk=$(jq -r --argjson k "$k" '.[] | select(.n_prompt == $k and .n_gen == 0) | .avg_ts' "$f.llama")
				lc=$(awk -v k="$k" -v tg="$ltg" -v pk="$lk" 'BEGIN{print k*tg/pk}')
				line+=$(printf '  c(%s) %.2f / %.2f' "$k" "$gc" "$lc")
				echo "$(basename "$m") $t c$k $gc $lc" >>"$OUT/c"
			done
			echo "$line  load $(cut -d' ' -f1 /proc/loadavg)"
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

if [ -n "$SPEC" ]; then
	NS=$((4 * N))
	mkdir -p "$ROOT$MNT/spec"
	mount --bind "$(cd "$(dirname "$SPEC")" && pwd)" "$ROOT$MNT/spec"
	ps=$MNT/spec/$(basename "$SPEC")
	echo
	echo "# speculation on $(basename "$SPEC") ($(wc -c <"$SPEC") bytes), $NS tokens greedy: speedup over the program's own plain decoding"
	for m in "$@"; do
		for t in ${THREADS//,/ }; do
			line=$(printf '%-22s t=%s' "$(basename "$m")" "$t")
			for mode in lookup auto; do
				"$GEIST" bench --json -m "$m" -t "$t" -n "$NS" -r "$REPS" --spec "$mode" --prompt-file "$SPEC" >"$OUT/spec" 2>/dev/null || echo '{}' >"$OUT/spec"
				line+=$(jq -r --arg mode "$mode" '"  geist \($mode) \(.plain_tok_s // 0 | .*100|round/100) -> \(.spec_tok_s // 0 | .*100|round/100) = \(.speedup // 0 | .*100|round/100)x (acc \(.acceptance // 0 | .*100|round)%)"' "$OUT/spec")
			done
			plain=$(llama llama-completion -m "${inside[$m]}" -f "$ps" -n "$NS" --temp 0 -t "$t" -no-cnv -lm none 2>&1 </dev/null |
				sed -n 's/.* eval time =.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1)
			line+=$(printf '  llama.cpp plain %s' "${plain:-?}")
			for st in ngram-simple ngram-map-k ngram-mod; do
				llama llama-speculative-simple -m "${inside[$m]}" --spec-type "$st" -f "$ps" -n "$NS" --temp 0 -t "$t" >"$OUT/lspec" 2>&1 </dev/null || true
				sp=$(sed -n 's/.*decoded.* speed: *\([0-9.]*\) t\/s.*/\1/p' "$OUT/lspec" | tail -1)
				acc=$(sed -n 's/.*accept *= *\([0-9.]*\)%.*/\1/p' "$OUT/lspec" | tail -1)
				line+=$(printf '  %s %s = %sx (acc %s%%)' "$st" "${sp:-?}" "$(awk -v a="${sp:-0}" -v b="${plain:-0}" 'BEGIN{printf "%.2f", b ? a/b : 0}')" "${acc:-?}")
			done
			echo "$line  load $(cut -d' ' -f1 /proc/loadavg)"
		done
	done
	umount "$ROOT$MNT/spec" 2>/dev/null || true
	rmdir "$ROOT$MNT/spec" 2>/dev/null || true
fi
rm -rf "$OUT"
