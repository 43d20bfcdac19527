# geist: build, test (natively and under qemu as a Pi 4 and a Pi 5), vet, fuzz, bench.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
PKGS      ?= ./...
QEMU      ?= qemu-aarch64-static
FUZZTIME  ?= 60s
# Minimizing each new input byte by byte can take the whole budget of a
# target whose coverage varies from run to run (sessions files: bbolt).
FUZZMINTIME ?= 5s
BENCH     ?= .

.PHONY: all build build-arm64 test test-native test-unit test-conformance test-e2e test-arm64 test-a72 test-a76 test-asm test-tiers timings test-race vet fuzz bench bench-peer clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/geist ./cmd/geist

build-arm64:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/geist-linux-arm64 ./cmd/geist

# The suite in three tiers (every package is in exactly one; make
# test-tiers checks it):
#   unit         pure packages: formats, tokenizer, templates, grammar,
#                sampling, storage, the appliance core with scripted engines
#   conformance  what computes: the kernels under every set (neon, quant),
#                the forward pass against the zoo's goldens, batch and tree
#                invariance, speculation's exactness, conversion
#   e2e          the daemon and the front ends with real clients and brokers
UNIT_PKGS ?= ./engine/gguf/... ./engine/tokenizer/... ./engine/chat/... ./engine/dialect/... ./engine/sample/... \
	./engine/grammar/... ./engine/constraint/... ./engine/zoo/... ./storage/... ./engine/appliance/... ./cmd/internal/models/... \
	./cmd/internal/arch/... ./cmd/internal/cli/... ./scripts/...
CONF_PKGS ?= ./neon/... ./quant/... ./engine ./engine/model/... ./engine/spec/... ./engine/embed/... ./cmd/internal/convert/...
E2E_PKGS  ?= ./cmd/geist/... ./cmd/internal/daemon/... ./cmd/internal/bench/... ./cmd/internal/httpapi/... ./cmd/internal/wyoming/... ./mqtt/... ./firmware/...

# make test: vet, the generator's own module (neon/_asm), the whole suite
# natively, then under qemu as Cortex-A72 (Pi 4, no dot product) and
# Cortex-A76 (Pi 5, with it). Emulated runs use -short: the conformance test
# checks the first prompt of every golden file and the batch invariance test
# a subset of batch sizes. The A76 run covers the packages whose code
# depends on the CPU's features (neon's dispatch, the quantized rows, the
# forward pass: conformance, batch and tree invariance with the dot-product
# kernels); everything above them is the same arm64 code the A72 run tests.
# Under emulation engine/model runs only the CPU's own kernel set (A72:
# neon, A76: neon-dotprod; generic natively), and engine leaves out the
# batching scheduler's and prompt cache's tests (engine/main_test.go): the
# same Go as natively, their CPU-dependent parts tested in engine/model.
# Each phase's go test -json is kept in TIMES and summarised into
# testdata/test-timings.tsv (committed: a slower package or test shows in
# the diff).
PKGS_A76  ?= ./neon/... ./quant/... ./engine/model/...
# quant's reference quantizers and dequantizers are Go without a kernel:
# the A72 run tests their arm64 code (fused multiply-adds and all), which
# the A76 runs identically; they took 50 s of its 464.
A76_SKIP  ?= ^(TestRequantizeZoo|TestDequantizeZoo)$$
TIMES     ?= bin/test-json
TESTTIMES  = bin/testtimes
SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -c
# go test -json, shown as plain go test output and saved for the timings.
GOTEST     = CGO_ENABLED=0 $(GO) test -json -count=1 -timeout 30m

# Two phases run side by side (native and A72, then A76 as soon as one
# ends; TESTJOBS=1: one after another, 3: all three): each leaves a core
# idle for long stretches (a package's serial tail, tests that wait on
# clients and brokers), which the other fills. Not three: some tests bound
# their work by the clock (storage's TestCrashSafety, engine/chat's
# FuzzTemplateCost seeds) and failed at a load of 45 here. Each output line
# is prefixed with its phase.
TESTJOBS  ?= 2
test: vet test-tiers test-asm $(TESTTIMES)
	$(MAKE) -j$(TESTJOBS) test-native test-a72 test-a76 PHASEPREFIX=1; rc=$$?; $(MAKE) timings; exit $$rc

$(TESTTIMES): scripts/testtimes.go
	$(GO) build -o $@ scripts/testtimes.go

test-native: $(TESTTIMES)
	$(GOTEST) $(PKGS) | $(TESTTIMES) $(if $(PHASEPREFIX),-prefix native) -save $(TIMES)/native.json

test-unit: $(TESTTIMES)
	$(GOTEST) $(UNIT_PKGS) | $(TESTTIMES) -save $(TIMES)/unit.json

test-conformance: $(TESTTIMES)
	$(GOTEST) $(CONF_PKGS) | $(TESTTIMES) -save $(TIMES)/conformance.json

test-e2e: $(TESTTIMES)
	$(GOTEST) $(E2E_PKGS) | $(TESTTIMES) -save $(TIMES)/e2e.json

test-arm64: test-a72 test-a76

test-a72: $(TESTTIMES)
	GOARCH=arm64 $(GOTEST) -short -exec '$(QEMU) -cpu cortex-a72' $(PKGS) | $(TESTTIMES) $(if $(PHASEPREFIX),-prefix a72) -save $(TIMES)/a72.json

test-a76: $(TESTTIMES)
	GOARCH=arm64 $(GOTEST) -short -exec '$(QEMU) -cpu cortex-a76' -skip '$(A76_SKIP)' $(PKGS_A76) | $(TESTTIMES) $(if $(PHASEPREFIX),-prefix a76) -save $(TIMES)/a76.json

# The kernels' generator (arm64 and amd64) is a module of its own (neon/_asm): its tests check
# that the committed assembly is what it writes and (with llvm-mc) that
# every emitted word encodes the instruction its comment names.
test-asm:
	cd neon/_asm && $(GO) vet ./... && $(GO) test -count=1 ./...

# Every package of the module in exactly one tier.
test-tiers:
	@diff <($(GO) list ./... | sort) <($(GO) list $(UNIT_PKGS) $(CONF_PKGS) $(E2E_PKGS) | sort) >/dev/null || \
		{ echo "Makefile: a package is in no test tier:"; \
		  comm -23 <($(GO) list ./... | sort) <($(GO) list $(UNIT_PKGS) $(CONF_PKGS) $(E2E_PKGS) | sort); exit 1; }
	@if [ -n "$$( { $(GO) list $(UNIT_PKGS); $(GO) list $(CONF_PKGS); $(GO) list $(E2E_PKGS); } | sort | uniq -d)" ]; then \
		echo "Makefile: a package is in two test tiers"; exit 1; fi

# testdata/test-timings.tsv from the phases' saved go test -json.
timings: $(TESTTIMES)
	$(TESTTIMES) -table -note "$$(date -u +%FT%RZ), $$(git describe --always --dirty), $$(nproc) cores, $$(uptime | sed 's/.*load/load/')" \
		$$(ls $(TIMES)/{native,a72,a76}.json) > testdata/test-timings.tsv

# The race detector needs cgo (and a C compiler); the packages with
# concurrency: storage, the appliance core, the front ends, the daemon, the engine.
test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -short ./storage/... ./engine/appliance/... ./mqtt/... ./firmware/... ./engine ./cmd/geist ./cmd/internal/httpapi

vet:
	$(GO) vet $(PKGS)
	GOARCH=arm64 $(GO) vet $(PKGS)

# Runs every fuzz target for FUZZTIME each.
FUZZ_TARGETS = ./engine/gguf:FuzzParse ./engine/tokenizer:FuzzEncode ./engine/chat:FuzzRender \
	./engine/sample:FuzzDistribution ./engine/sample:FuzzStopMatcher ./quant:FuzzRows \
	./neon:FuzzDotExact ./neon:FuzzDotAVX2 ./neon:FuzzPackings ./engine/appliance/sentence:FuzzSplitter \
	./storage:FuzzSalvage ./storage:FuzzDecodeTurn ./cmd/internal/wyoming:FuzzReadEvent \
	./mqtt/guard:FuzzWrap ./mqtt:FuzzParse ./mqtt:FuzzCancel ./mqtt/hermes:FuzzHandle \
	./engine/dialect:FuzzToolParser ./cmd/internal/httpapi:FuzzRequests \
	./neon:FuzzRowsExact ./neon:FuzzKQuants ./engine/dialect:FuzzPyCalls ./engine/dialect:FuzzGemma4Arguments \
	./engine/chat:FuzzTemplateCost \
	./engine/grammar:FuzzCompile ./engine/grammar:FuzzMatcher ./engine/tokenizer:FuzzWordPiece
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$pkg $$fn"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) || exit 1; \
	done

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)

# geist beside llama.cpp (../shared/peer/setup.sh) on the same files, in
# interleaved rounds, with ratios: make bench-peer MODELS="a.gguf b.gguf".
MODELS    ?=
PEERFLAGS ?= -r 3 --rss
bench-peer:
	scripts/bench-peer.sh $(PEERFLAGS) $(MODELS)

clean:
	rm -rf bin
