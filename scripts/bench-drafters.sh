#!/usr/bin/env bash
# A model-native drafter (a Gemma 4 assistant, an EAGLE-3 head) in geist and
# in llama.cpp on the same files, at one thread, in interleaved rounds
# (every round runs both programs, alternating which goes first, and prints
# the 1-minute load average beside each line).
#
#   scripts/bench-drafters.sh [-r ROUNDS] [-n N] [-k K] [-a 0.5,0.7,0.9] [-t THREADS]
#       --spec assistant|eagle3 TARGET.gguf DRAFTER.gguf [LLAMA_DRAFTER.gguf]
#
# Random weights give no real acceptance, so acceptance is forced:
#   geist     `geist bench --spec S --oracle A,B,C --draft-max K`: every
#             speculative step runs the drafter's own K steps, then
#             verifies the oracle's tokens in their place (acceptance A per
#             token); plain decoding runs before and after every arm. It
#             prints the measured speed-up, the drafter's cost per drafted
#             token d and the verification pass c(K+1), both as a share of a
#             decode step (the assistant with its sparse and its dense head).
#   llama.cpp its per-step costs on the same files, from
#             llama-speculative-simple --spec-type draft-mtp|draft-eagle3
#             --spec-draft-n-max K (its verification passes are its "prompt
#             eval" less the prompt; the rest of the decode time is the
#             drafter's) and llama-bench -n N (a decode step), giving d and
#             c(K+1) the same way; its speed-up at acceptance a is then
#             modelled as E(a) / (c(K+1) + K·d), E(a) = 1 + a + ... + a^K,
#             the tokens a chain of K accepted token by token with chance a
#             yields per step. The same model is printed for geist's costs
#             beside its measured speed-up.
# LLAMA_DRAFTER is the file llama.cpp gets (default DRAFTER): llama.cpp
# 0.7.0 cannot load an assistant that carries the sparse head's tensors,
# so give it the same assistant without them (geist synth
# --shape gemma4-e2b-assistant-dense).
#
# Needs root (chroot, bind mounts), jq and awk; llama.cpp from
# ../shared/peer/setup.sh (PEER_ROOT, default /opt/llamacpp-root).
# GEIST names the geist binary (default: built from this tree).
set -euo pipefail

ROUNDS=2 N=32 K=3 ALPHAS=0.5,0.7,0.9 THREADS=1 SPEC=
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-r) ROUNDS=$2; shift 2 ;;
	-n) N=$2; shift 2 ;;
	-k) K=$2; shift 2 ;;
	-a) ALPHAS=$2; shift 2 ;;
	-t) THREADS=$2; shift 2 ;;
	--spec) SPEC=$2; shift 2 ;;
	-h | --help) usage ;;
	-*) echo "bench-drafters: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] && [ -n "$SPEC" ] || usage
TARGET=$1 DRAFTER=$2 LDRAFTER=${3:-$2}
case $SPEC in
assistant) LTYPE=draft-mtp ;;
eagle3) LTYPE=draft-eagle3 ;;
*) echo "bench-drafters: --spec assistant or eagle3" >&2; exit 2 ;;
esac
ROOT=${PEER_ROOT:-/opt/llamacpp-root}
[ -x "$ROOT/usr/bin/llama-speculative-simple" ] || { echo "bench-drafters: no llama.cpp in $ROOT: run ../shared/peer/setup.sh" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench-drafters: needs jq" >&2; exit 2; }
for f in "$TARGET" "$DRAFTER" "$LDRAFTER"; do [ -f "$f" ] || { echo "bench-drafters: no file $f" >&2; exit 2; }; done

cd "$(dirname "$0")/.."
if [ -z "${GEIST:-}" ]; then
	CGO_ENABLED=0 go build -trimpath -o bin/geist ./cmd/geist
	GEIST=$PWD/bin/geist
fi

# The files' directories, bound inside the chroot at mount points of this
# run's own (concurrent runs do not unmount each other's).
MNT=/geist-drafters-$$
declare -A inside
i=0
for m in "$TARGET" "$LDRAFTER"; do
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

PROMPT="The quick brown fox jumps over the lazy dog. Once upon a time, in a small house at the edge of the forest, there lived an old clockmaker who repaired every clock in the village."
OUT=$(mktemp -d)
echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# geist $("$GEIST" version 2>/dev/null | head -1), llama.cpp $(llama dpkg-query -W -f '${Version}' llama.cpp-tools 2>/dev/null)"
echo "# $(basename "$TARGET") + $(basename "$DRAFTER") (llama.cpp: $(basename "$LDRAFTER"), --spec-type $LTYPE), K=$K, $N tokens, -t $THREADS, rounds $ROUNDS"

# model E(a)/(c + K d) for every acceptance: args c d
model() {
	awk -v c="$1" -v d="$2" -v k="$K" -v as="$ALPHAS" 'BEGIN{n=split(as,a,","); s="";
		for(i=1;i<=n;i++){e=0; p=1; for(j=0;j<=k;j++){e+=p; p*=a[i]}; s=s sprintf(" a=%s %.3fx", a[i], e/(c+k*d))}; print s}'
}

run_geist() {
	"$GEIST" bench --json -m "$TARGET" --draft-model "$DRAFTER" --spec "$SPEC" --oracle "$ALPHAS" \
		--draft-max "$K" -n "$N" -r 1 -t "$THREADS" --prompt-file <(printf '%s' "$PROMPT") >"$1"
	while read -r j; do
		c=$(jq -r .verify_cost <<<"$j")
		d=$(jq -r .draft_cost <<<"$j")
		printf 'geist      %-7s a=%s  speedup %.3fx (measured)  step %.1f ms  d %.3f ms = %.4f  c(%d) %.3f  accepted %s/%s  modelled%s  load %s\n' \
			"$(jq -r '.head // "-"' <<<"$j")" "$(jq -r .oracle <<<"$j")" "$(jq -r .speedup <<<"$j")" "$(jq -r .step_ms <<<"$j")" \
			"$(jq -r .draft_ms <<<"$j")" "$d" $((K + 1)) "$c" "$(jq -r .accepted <<<"$j")" "$(jq -r .drafted <<<"$j")" \
			"$(model "$c" "$d" | sed 's/ a=[0-9.]*//g')" "$(jq -r .load1 <<<"$j")"
	done <"$1"
}

run_llama() {
	llama llama-bench -m "${inside[$TARGET]}" -t "$THREADS" -p 0 -n "$N" -r 2 -lm none -o json 2>/dev/null >"$1.bench"
	llama llama-speculative-simple -m "${inside[$TARGET]}" -md "${inside[$LDRAFTER]}" --spec-type "$LTYPE" \
		--spec-draft-n-max "$K" --spec-draft-n-min 0 --spec-draft-p-min 0 -p "$PROMPT" -n "$N" --temp 0 \
		-t "$THREADS" -td "$THREADS" -c 1024 >"$1.spec" 2>&1
	tg=$(jq -r '.[0].avg_ts' "$1.bench")
	# decoded N tokens in Y seconds; encoded P tokens in Z seconds; prompt
	# eval time = V ms (the prompt and every verification pass); n_drafted.
	read -r dec enc pev samp drafted acc < <(awk '
		/decoded .* tokens in/ {for(i=1;i<=NF;i++) if($i=="in") dec=$(i+1)}
		/encoded .* tokens in/ {for(i=1;i<=NF;i++) if($i=="in") enc=$(i+1)}
		/prompt eval time =/ {for(i=1;i<=NF;i++) if($i=="=") pev=$(i+1)}
		/ sampling time =/ {for(i=1;i<=NF;i++) if($i=="=") samp=$(i+1)}
		/n_drafted =/ {drafted=$NF} /n_accept  =/ {acc=$NF}
		END{print dec, enc, pev, samp, drafted, acc}' "$1.spec")
	passes=$(awk -v d="$drafted" -v k="$K" 'BEGIN{print int((d+k-1)/k)}')
	step=$(awk -v tg="$tg" 'BEGIN{print 1000/tg}')
	v=$(awk -v p="$pev" -v e="$enc" -v n="$passes" 'BEGIN{print (p-1000*e)/n}')
	dms=$(awk -v dec="$dec" -v p="$pev" -v e="$enc" -v s="$samp" -v n="$drafted" 'BEGIN{print (1000*dec-(p-1000*e)-s)/n}')
	c=$(awk -v v="$v" -v s="$step" 'BEGIN{print v/s}')
	d=$(awk -v x="$dms" -v s="$step" 'BEGIN{print x/s}')
	printf 'llama.cpp  %-7s         step %.1f ms (tg %.2f tok/s)  d %.3f ms = %.4f  c(%d) %.3f (%d passes, %s drafted, %s accepted)  modelled%s  load %s\n' \
		"dense" "$step" "$tg" "$dms" "$d" $((K + 1)) "$c" "$passes" "$drafted" "$acc" "$(model "$c" "$d")" "$(cut -d' ' -f1 /proc/loadavg)"
}

for r in $(seq 1 "$ROUNDS"); do
	echo "## round $r  $(uptime | sed 's/.*load/load/')"
	f=$OUT/$r
	if [ $((r % 2)) = 1 ]; then
		run_geist "$f.geist"
		run_llama "$f.llama"
	else
		run_llama "$f.llama"
		run_geist "$f.geist"
	fi
done
echo "# outputs in $OUT"
