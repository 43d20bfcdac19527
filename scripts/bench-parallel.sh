#!/usr/bin/env bash
# Several requests at once: `geist serve --parallel 4` against
# `llama-server -np 4` (continuous batching in both) on the same GGUF
# files, over the same HTTP API (/v1/completions, greedy, the same short
# prompts, one client), in interleaved rounds (the machine is shared and
# its load drifts: every round runs both servers on every file and thread
# count, alternating which goes first), printing per round, file, thread
# count and number of concurrent streams (1, 2, 4):
#   agg   aggregate tokens/s: all streams' generated tokens over the wall
#         time from the first request sent to the last answer
#   req   per-request tokens/s: a request's tokens over its own wall time
#         (its short prompt included), averaged over the streams
#   cpu   the server process's CPU time (user + system, /proc) per generated
#         token in ms: meaningful where wall time is not (a loaded machine)
# and the ratios geist/llama.cpp (agg, req; cpu as llama.cpp/geist, so
# that above 1 is geist ahead), each server's aggregate at 4 streams over
# its own at 1, and at the end the range of every ratio over the rounds.
#
#   scripts/bench-parallel.sh [-r ROUNDS] [-t 1,2] [-n 32] [-s 1,2,4] [--ctx 512] MODEL.gguf...
#
# Each server is started once per round, file and thread count with 4
# slots of --ctx positions each (llama-server -c 4·ctx), warmed by one
# request, then given the stream counts in turn. geist runs with its
# defaults (speculation auto: lookup and n-gram drafts, and a model
# drafter when one is given; no prompt cache, --cache-size 0);
# llama-server with -lm none (loaded into memory, as bench-peer.sh runs
# llama-bench) and ignore_eos off: both count the tokens they generated
# (usage.completion_tokens).
#
# llama.cpp comes from ../shared/peer/setup.sh (Debian's build in a chroot,
# PEER_ROOT, default /opt/llamacpp-root). Needs root (chroot, bind mounts),
# curl and python3 (the client: standard library only). GEIST names the
# geist binary to measure (default: built from this tree).
set -euo pipefail

ROUNDS=2 THREADS=1,2 N=32 STREAMS=1,2,4 CTX=512
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-r) ROUNDS=$2; shift 2 ;;
	-t) THREADS=$2; shift 2 ;;
	-n) N=$2; shift 2 ;;
	-s) STREAMS=$2; shift 2 ;;
	--ctx) CTX=$2; shift 2 ;;
	-h | --help) usage ;;
	-*) echo "bench-parallel: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage
ROOT=${PEER_ROOT:-/opt/llamacpp-root}
[ -x "$ROOT/usr/bin/llama-server" ] || { echo "bench-parallel: no llama-server in $ROOT: run ../shared/peer/setup.sh" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench-parallel: needs python3" >&2; exit 2; }
command -v curl >/dev/null || { echo "bench-parallel: needs curl" >&2; exit 2; }

cd "$(dirname "$0")/.."
if [ -z "${GEIST:-}" ]; then
	CGO_ENABLED=0 go build -trimpath -o bin/geist ./cmd/geist
	GEIST=$PWD/bin/geist
fi

MNT=/geist-par-$$
mkdir -p "$ROOT$MNT"
declare -A inside
i=0
for m in "$@"; do
	[ -f "$m" ] || { echo "bench-parallel: no file $m" >&2; exit 2; }
	d=$(cd "$(dirname "$m")" && pwd)
	mkdir -p "$ROOT$MNT/$i"
	mount --bind "$d" "$ROOT$MNT/$i"
	inside[$m]=$MNT/$i/$(basename "$m")
	i=$((i + 1))
done
OUT=$(mktemp -d)
SPID=
stop_server() {
	if [ -n "$SPID" ]; then
		kill "$SPID" 2>/dev/null || true
		wait "$SPID" 2>/dev/null || true
		SPID=
	fi
}
cleanup() {
	stop_server
	for d in "$ROOT$MNT"/*; do umount "$d" 2>/dev/null || true; rmdir "$d" 2>/dev/null || true; done
	rmdir "$ROOT$MNT" 2>/dev/null || true
	rm -rf "$OUT"
}
trap cleanup EXIT
touch "$OUT/ratios"

# A free port for this run's servers.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT

# The client: S concurrent non-streamed completions of N tokens, greedy;
# prints "tokens wall_s mean_request_tok_s".
cat >"$OUT/client.py" <<'EOF'
import json, sys, threading, time, urllib.request
url, streams, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
prompts = ["Once upon a time", "The weather today is", "In the kitchen there", "My favourite number is"]
res = [None] * streams
with urllib.request.urlopen(url + "/v1/models", timeout=60) as r:
    model = json.load(r)["data"][0]["id"]  # geist answers only to its model's name
def one(i):
    body = json.dumps({"model": model, "prompt": prompts[i % len(prompts)], "max_tokens": n, "temperature": 0, "stream": False}).encode()
    t0 = time.time()
    req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        d = json.load(r)
    res[i] = (d["usage"]["completion_tokens"], time.time() - t0)
ths = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
t0 = time.time()
for t in ths: t.start()
for t in ths: t.join()
wall = time.time() - t0
if any(r is None for r in res):
    sys.exit("a request failed")
print(sum(r[0] for r in res), wall, sum(r[0] / r[1] for r in res) / streams)
EOF

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

start_geist() { # model threads
	"$GEIST" serve -m "$1" -t "$2" --parallel 4 --ctx "$CTX" --http "127.0.0.1:$PORT" --broker "" \
		--data-dir "$OUT/data" --cache-size 0 --log-level warn >"$OUT/server.log" 2>&1 &
	SPID=$!
}
start_llama() { # model threads
	chroot "$ROOT" llama-server -m "${inside[$1]}" -t "$2" -np 4 -c $((4 * CTX)) -lm none \
		--host 127.0.0.1 --port "$PORT" >"$OUT/server.log" 2>&1 &
	SPID=$! # chroot execs the server: the same process
}
wait_ready() { # path
	for _ in $(seq 1 1200); do
		if curl -sf "$URL$1" >/dev/null 2>&1; then return 0; fi
		kill -0 "$SPID" 2>/dev/null || { echo "bench-parallel: the server exited:" >&2; tail -5 "$OUT/server.log" >&2; exit 1; }
		sleep 0.5
	done
	echo "bench-parallel: the server did not get ready" >&2
	exit 1
}

measure() { # prog model threads -> lines "prog streams agg req cpu_ms load"
	case $1 in
	geist) start_geist "$2" "$3"; wait_ready /readyz ;;
	llama) start_llama "$2" "$3"; wait_ready /health ;;
	esac
	python3 "$OUT/client.py" "$URL" 1 8 >/dev/null # warm-up
	for s in ${STREAMS//,/ }; do
		c0=$(cpu_ticks "$SPID")
		read -r tok wall req < <(python3 "$OUT/client.py" "$URL" "$s" "$N")
		c1=$(cpu_ticks "$SPID")
		awk -v p="$1" -v s="$s" -v tok="$tok" -v wall="$wall" -v req="$req" -v c="$((c1 - c0))" -v tck="$TCK" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
			'BEGIN{printf "%s %d %.3f %.3f %.3f %s\n", p, s, tok/wall, req, tok ? 1000*c/tck/tok : 0, load}'
	done
	stop_server
}

echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# geist $("$GEIST" version 2>/dev/null | head -1), llama.cpp $(chroot "$ROOT" dpkg-query -W -f '${Version}' llama.cpp-tools 2>/dev/null || true)"
echo "# rounds $ROUNDS, threads $THREADS, streams $STREAMS, $N tokens per request, 4 slots of $CTX positions"
printf '# %-20s %-3s %-4s %-28s %-28s %-26s %s\n' file t S "agg tok/s geist/llama.cpp" "req tok/s geist/llama.cpp" "cpu ms/tok geist/llama.cpp" load
for r in $(seq 1 "$ROUNDS"); do
	for m in "$@"; do
		for t in ${THREADS//,/ }; do
			f=$OUT/$r-$t-$(basename "$m")
			if [ $((r % 2)) = 1 ]; then
				measure geist "$m" "$t" >"$f.geist"
				measure llama "$m" "$t" >"$f.llama"
			else
				measure llama "$m" "$t" >"$f.llama"
				measure geist "$m" "$t" >"$f.geist"
			fi
			for s in ${STREAMS//,/ }; do
				read -r _ _ ga gr gc gl < <(awk -v s="$s" '$2 == s' "$f.geist")
				read -r _ _ la lr lc ll < <(awk -v s="$s" '$2 == s' "$f.llama")
				printf '  %-20s %-3s %-4s %7.2f / %7.2f = %5.2fx  %7.2f / %7.2f = %5.2fx  %6.1f / %6.1f = %5.2fx  %s/%s\n' \
					"$(basename "$m")" "$t" "$s" "$ga" "$la" "$(awk -v a="$ga" -v b="$la" 'BEGIN{print b ? a/b : 0}')" \
					"$gr" "$lr" "$(awk -v a="$gr" -v b="$lr" 'BEGIN{print b ? a/b : 0}')" \
					"$gc" "$lc" "$(awk -v a="$lc" -v b="$gc" 'BEGIN{print b ? a/b : 0}')" "$gl" "$ll"
				{
					echo "$(basename "$m") t=$t S=$s agg $(awk -v a="$ga" -v b="$la" 'BEGIN{print b ? a/b : 0}')"
					echo "$(basename "$m") t=$t S=$s req $(awk -v a="$gr" -v b="$lr" 'BEGIN{print b ? a/b : 0}')"
					echo "$(basename "$m") t=$t S=$s cpu $(awk -v a="$lc" -v b="$gc" 'BEGIN{print b ? a/b : 0}')"
				} >>"$OUT/ratios"
			done
			s1=${STREAMS%%,*} sN=${STREAMS##*,}
			g1=$(awk -v s="$s1" '$2 == s {print $3}' "$f.geist") gN=$(awk -v s="$sN" '$2 == s {print $3}' "$f.geist")
			l1=$(awk -v s="$s1" '$2 == s {print $3}' "$f.llama") lN=$(awk -v s="$sN" '$2 == s {print $3}' "$f.llama")
			gc1=$(awk -v s="$s1" '$2 == s {print $5}' "$f.geist") gcN=$(awk -v s="$sN" '$2 == s {print $5}' "$f.geist")
			lc1=$(awk -v s="$s1" '$2 == s {print $5}' "$f.llama") lcN=$(awk -v s="$sN" '$2 == s {print $5}' "$f.llama")
			printf '  %-20s %-3s scaling %s->%s streams: aggregate geist %.2fx, llama.cpp %.2fx; cpu per token geist %.2fx, llama.cpp %.2fx less\n' \
				"$(basename "$m")" "$t" "$s1" "$sN" "$(awk -v a="$gN" -v b="$g1" 'BEGIN{print b ? a/b : 0}')" "$(awk -v a="$lN" -v b="$l1" 'BEGIN{print b ? a/b : 0}')" \
				"$(awk -v a="$gc1" -v b="$gcN" 'BEGIN{print b ? a/b : 0}')" "$(awk -v a="$lc1" -v b="$lcN" 'BEGIN{print b ? a/b : 0}')"
			{
				echo "$(basename "$m") t=$t scale-geist $(awk -v a="$gN" -v b="$g1" 'BEGIN{print b ? a/b : 0}')"
				echo "$(basename "$m") t=$t scale-llama $(awk -v a="$lN" -v b="$l1" 'BEGIN{print b ? a/b : 0}')"
				echo "$(basename "$m") t=$t cpuscale-geist $(awk -v a="$gc1" -v b="$gcN" 'BEGIN{print b ? a/b : 0}')"
				echo "$(basename "$m") t=$t cpuscale-llama $(awk -v a="$lc1" -v b="$lcN" 'BEGIN{print b ? a/b : 0}')"
			} >>"$OUT/ratios"
		done
	done
done

echo
echo "# ranges over the rounds (agg, req: geist/llama.cpp; cpu: llama.cpp/geist per token; scale: 4 streams over 1)"
awk '{k=$1" "$2" "$3" "$4; if (NF == 4) k=$1" "$2" "$3; v=$NF; if(!(k in lo)||v<lo[k])lo[k]=v; if(!(k in hi)||v>hi[k])hi[k]=v; if(!(k in seen)){seen[k]=1; order[n++]=k}}
	END{for(i=0;i<n;i++){k=order[i]; printf "  %-48s %.2f-%.2fx\n", k, lo[k], hi[k]}}' "$OUT/ratios"
