#!/usr/bin/env bash
# A model-native drafter (a Gemma 4 assistant, an EAGLE-3 head) in geist and
# in llama.cpp on the same files, at one thread, in interleaved rounds
# (every round runs both programs, alternating which goes first, and prints
# the 1-minute load average beside each line).
#
#   scripts/bench-drafters.sh [-r ROUNDS] [-n N] [-k K] [-a 0.5,0.7,0.9] [-t THREADS]
#       --spec assistant|eagle3 TARGET.gguf DRAFTER.gguf [LLAMA_DRAFTER.gguf]
#   scripts/bench-drafters.sh [...] [-V DRAFT_VOCAB] --spec mtp TARGET.gguf
#       (Qwen3.5's MTP block in the target file; -V 32768 limits geist's
#       MTP head to the first N token ids, llama.cpp always has its full head)
#
# Random weights give no real acceptance, so acceptance is forced:
#   geist     `geist bench --spec S --oracle A,B,C --draft-max K`: every
#             speculative step runs the drafter's own K steps, then
#             verifies the oracle's tokens in their place (acceptance A per
#             token); plain decoding runs before and after every arm. It
#             prints the measured speed-up, the drafter's cost per drafted
#             token d and the verification pass c(K+1), both as a share of a
#             decode step (the assistant with its sparse and its dense head).
#   llama.cpp its per-step costs on the same files, in CPU time (each
#             program run for 8 and for N tokens: the difference of its CPU
#             time over the difference of its steps; the speed-up needs only
#             their sum, c(K+1) + K d = a speculative step's CPU time over a
#             decode step's), from
#             llama-speculative-simple --spec-type draft-mtp|draft-eagle3
#             --spec-draft-n-max K (the step split into verification, its
#             "prompt eval" less the prompt, and drafting, the rest of the
#             decode, as its wall clock splits it) and llama-bench (a
#             decode step), giving d and c(K+1); its speed-up at acceptance a is then
#             modelled as E(a) / (c(K+1) + K·d), E(a) = 1 + a + ... + a^K,
#             the tokens a chain of K accepted token by token with chance a
#             yields per step. The same model is printed for geist's costs
#             beside its measured speed-up.
# LLAMA_DRAFTER is the file llama.cpp gets (default DRAFTER): llama.cpp
# 0.7.0 cannot load an assistant that carries the sparse head's tensors,
# so give it the same assistant without them (geist synth
# --shape gemma4-e2b-assistant-dense).
#
# Needs root (chroot, bind mounts), jq, awk and /usr/bin/time; llama.cpp from
# ../shared/peer/setup.sh (PEER_ROOT, default /opt/llamacpp-root).
# GEIST names the geist binary (default: built from this tree).
set -euo pipefail

ROUNDS=2 N=32 K=3 ALPHAS=0.5,0.7,0.9 THREADS=1 SPEC= DVOCAB=
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-r) ROUNDS=$2; shift 2 ;;
	-n) N=$2; shift 2 ;;
	-k) K=$2; shift 2 ;;
	-a) ALPHAS=$2; shift 2 ;;
	-t) THREADS=$2; shift 2 ;;
	-V) DVOCAB=$2; shift 2 ;;
	--spec) SPEC=$2; shift 2 ;;
	-h | --help) usage ;;
	-*) echo "bench-drafters: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ -n "$SPEC" ] || usage
if [ "$SPEC" = mtp ]; then [ $# -ge 1 ] || usage; set -- "$1" "$1"; fi
[ $# -ge 2 ] || usage
TARGET=$1 DRAFTER=$2 LDRAFTER=${3:-$2}
case $SPEC in
mtp) LTYPE=draft-mtp ;;
assistant) LTYPE=draft-mtp ;;
eagle3) LTYPE=draft-eagle3 ;;
*) echo "bench-drafters: --spec assistant, eagle3 or mtp" >&2; exit 2 ;;
esac
ROOT=${PEER_ROOT:-/opt/llamacpp-root}
[ -x "$ROOT/usr/bin/llama-speculative-simple" ] || { echo "bench-drafters: no llama.cpp in $ROOT: run ../shared/peer/setup.sh" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench-drafters: needs jq" >&2; exit 2; }
for f in "$TARGET" "$DRAFTER" "$LDRAFTER"; do [ -f "$f" ] || { echo "bench-drafters: no file $f" >&2; exit 2; }; done
TARGET=$(realpath "$TARGET") DRAFTER=$(realpath "$DRAFTER") LDRAFTER=$(realpath "$LDRAFTER")

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
echo "# $(basename "$TARGET") + $(basename "$DRAFTER") (llama.cpp: $(basename "$LDRAFTER"), --spec-type $LTYPE), K=$K, $N tokens, -t $THREADS, rounds $ROUNDS${DVOCAB:+, geist --draft-vocab $DVOCAB}"

# model E(a)/(c + K d) for every acceptance: args c d
model() {
	awk -v c="$1" -v d="$2" -v k="$K" -v as="$ALPHAS" 'BEGIN{n=split(as,a,","); s="";
		for(i=1;i<=n;i++){e=0; p=1; for(j=0;j<=k;j++){e+=p; p*=a[i]}; s=s sprintf(" a=%s %.3fx", a[i], e/(c+k*d))}; print s}'
}

run_geist() {
	local dm=(--draft-model "$DRAFTER")
	[ "$SPEC" = mtp ] && dm=(--draft-vocab "${DVOCAB:-0}")
	"$GEIST" bench --json -m "$TARGET" "${dm[@]}" --spec "$SPEC" --oracle "$ALPHAS" \
		--draft-max "$K" -n "$N" -r 1 -t "$THREADS" --prompt-file <(printf '%s' "$PROMPT") >"$1"
	while read -r j; do
		c=$(jq -r .verify_cost <<<"$j")
		d=$(jq -r .draft_cost <<<"$j")
		printf 'geist      %-7s a=%s  speedup %.3fx (measured, CPU time; wall %.3fx)  step %.1f ms CPU  d %.3f ms = %.4f  c(%d) %.3f  accepted %s/%s  modelled%s  load %s\n' \
			"$(jq -r '.head // "-"' <<<"$j")" "$(jq -r .oracle <<<"$j")" "$(jq -r '.speedup_cpu // .speedup' <<<"$j")" "$(jq -r .speedup <<<"$j")" "$(jq -r .step_ms <<<"$j")" \
			"$(jq -r .draft_ms <<<"$j")" "$d" $((K + 1)) "$c" "$(jq -r .accepted <<<"$j")" "$(jq -r .drafted <<<"$j")" \
			"$(model "$c" "$d" | sed 's/ a=[0-9.]*//g')" "$(jq -r .load1 <<<"$j")"
	done <"$1"
}

# cpu FILE: the user seconds that /usr/bin/time wrote (system time is
# mostly the mapped file's page faults, which the load of a shared machine
# moves from one run to the other)
cpu() { awk '{print $1}' "$1"; }

# llama.cpp's costs in CPU time, so that the load of a shared machine does
# not enter them: each program runs twice, and the difference of its CPU
# time (loading, prompt and warm-up cancel) over the difference of its
# decode steps is the CPU time of one step: llama-bench -n N with 1 and 5
# repetitions (a decode step), llama-speculative-simple for 8 and N tokens
# (a speculative step). The
# speculative step splits into drafting and verification as its own wall
# clock splits it (its verification passes are its "prompt eval" less the
# prompt; the rest of the decode time, less sampling, is the drafter's).
N1=8
run_llama() {
	local n lmd=(-md "${inside[$LDRAFTER]}")
	[ "$SPEC" = mtp ] && lmd=()
	for r in 1 5; do
		/usr/bin/time -o "$1.plain.$r.time" -f '%U %S' chroot "$ROOT" llama-bench -m "${inside[$TARGET]}" \
			-t "$THREADS" -p 0 -n "$N" -r "$r" -lm none >/dev/null 2>&1 </dev/null
	done
	for n in $N1 "$N"; do
		/usr/bin/time -o "$1.spec.$n.time" -f '%U %S' chroot "$ROOT" llama-speculative-simple -m "${inside[$TARGET]}" \
			"${lmd[@]}" --spec-type "$LTYPE" --spec-draft-n-max "$K" --spec-draft-n-min 0 --spec-draft-p-min 0 \
			-p "$PROMPT" -n "$n" --ignore-eos --temp 0 -t "$THREADS" -td "$THREADS" -c 1024 >"$1.spec.$n" 2>&1 </dev/null
	done
	# decoded tokens, decode seconds, prompt seconds, prompt eval ms,
	# sampling ms, drafted, accepted of a run's log
	stats() {
		awk '/decoded .* tokens in/ {for(i=1;i<=NF;i++) {if($i=="decoded") n=$(i+1); if($i=="in") dec=$(i+1)}}
			/encoded .* tokens in/ {for(i=1;i<=NF;i++) if($i=="in") enc=$(i+1)}
			/prompt eval time =/ {for(i=1;i<=NF;i++) if($i=="=") {pev=$(i+1); exit_=1; break}}
			/ sampling time =/ {for(i=1;i<=NF;i++) if($i=="=") samp=$(i+1)}
			/n_drafted =/ {drafted=$NF} /n_accept  =/ {acc=$NF}
			END{print n, dec, enc, pev, samp, drafted, acc}' "$1"
	}
	read -r n1 _ _ _ _ dr1 _ < <(stats "$1.spec.$N1")
	read -r n2 dec enc pev samp dr2 acc < <(stats "$1.spec.$N")
	plain=$(awk -v a="$(cpu "$1.plain.1.time")" -v b="$(cpu "$1.plain.5.time")" -v n="$N" 'BEGIN{print 1000*(b-a)/(4*n)}')
	stepcpu=$(awk -v a="$(cpu "$1.spec.$N1.time")" -v b="$(cpu "$1.spec.$N.time")" -v d1="$dr1" -v d2="$dr2" -v k="$K" \
		'BEGIN{print 1000*(b-a)/((d2-d1)/k)}')
	# the wall clock's split of a step: verification and drafting
	frac=$(awk -v dec="$dec" -v p="$pev" -v e="$enc" -v s="$samp" 'BEGIN{v=p-1000*e; d=1000*dec-v-s; print d/(d+v)}')
	dms=$(awk -v s="$stepcpu" -v f="$frac" -v k="$K" 'BEGIN{print s*f/k}')
	c=$(awk -v s="$stepcpu" -v f="$frac" -v p="$plain" 'BEGIN{print s*(1-f)/p}')
	d=$(awk -v x="$dms" -v p="$plain" 'BEGIN{print x/p}')
	printf 'llama.cpp  %-7s         step %.1f ms CPU  d %.3f ms = %.4f  c(%d) %.3f  (spec step %.1f ms CPU, %.0f%% drafting; %s drafted, %s accepted)  modelled%s  load %s\n' \
		"dense" "$plain" "$dms" "$d" $((K + 1)) "$c" "$stepcpu" "$(awk -v f="$frac" 'BEGIN{print 100*f}')" "$dr2" "$acc" \
		"$(model "$c" "$d")" "$(cut -d' ' -f1 /proc/loadavg)"
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
