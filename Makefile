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

.PHONY: all build build-arm64 test test-native test-arm64 test-a72 test-a76 test-race vet fuzz bench bench-peer clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/geist ./cmd/geist

build-arm64:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/geist-linux-arm64 ./cmd/geist

# The whole suite natively, then under qemu as Cortex-A72 (Pi 4, no dot
# product) and Cortex-A76 (Pi 5, with it). Emulated runs use -short: the
# conformance test checks the first prompt of every golden file and the batch
# invariance test a subset of batch sizes, so that CI stays under 30 minutes.
# The A76 run covers the packages whose code depends on the CPU's features
# (neon's dispatch, the quantized rows, the forward pass: conformance, batch
# and tree invariance with the dot-product kernels); everything above them
# is the same arm64 code the A72 run tests.
PKGS_A76  ?= ./neon/... ./quant/... ./engine/model/...
test: vet test-native test-arm64

test-native:
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m $(PKGS)

test-arm64: test-a72 test-a76

test-a72:
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 -short -timeout 30m -exec '$(QEMU) -cpu cortex-a72' $(PKGS)

test-a76:
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 -short -timeout 30m -exec '$(QEMU) -cpu cortex-a76' $(PKGS_A76)

# The race detector needs cgo (and a C compiler); the packages with
# concurrency: storage, the appliance core, the front ends, the daemon, the engine.
test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -short ./storage/... ./cmd/appliance/... ./mqtt/... ./firmware/... ./engine ./cmd/geist ./cmd/internal/httpapi

vet:
	$(GO) vet $(PKGS)
	GOARCH=arm64 $(GO) vet $(PKGS)

# Runs every fuzz target for FUZZTIME each.
FUZZ_TARGETS = ./engine/gguf:FuzzParse ./engine/tokenizer:FuzzEncode ./engine/chat:FuzzRender \
	./engine/sample:FuzzDistribution ./engine/sample:FuzzStopMatcher ./quant:FuzzRows \
	./neon:FuzzDotExact ./neon:FuzzDotAVX2 ./neon:FuzzPackings ./cmd/appliance/sentence:FuzzSplitter \
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
