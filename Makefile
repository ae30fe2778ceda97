# twinccl — build, test, benchmark, lint and fuzz.
GO        ?= go
BIN       ?= bin
FUZZTIME  ?= 10s
# go-nvml binds NVML symbols lazily; binaries that link it must allow that.
LAZY      := -ldflags=-extldflags=-Wl,-z,lazy
# nvml.h marks some declarations deprecated; keep the build log readable.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
PURE_PKGS := ./model/... ./search/... ./exec/sim/... ./traces/... ./cmd/replay/...

.PHONY: all build demo test unit lint bench fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/replay ./cmd/replay
	$(GO) build $(LAZY) -o $(BIN)/run ./cmd/run

# The main job on the embedded default topology (our 2x H200 machine).
demo:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/replay ./cmd/replay
	./$(BIN)/replay search

# Everything CI runs: lint, the unit tests, and a short fuzzing budget.
test: lint unit
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

unit:
	$(GO) test $(LAZY) -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build $(PURE_PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./model/... ./search/...

# Every fuzz target in turn, FUZZTIME each (go test fuzzes one target per run).
# A run that fails without writing a failing input to testdata/fuzz is Go's
# fuzz coordinator missing its own -fuzztime deadline (golang/go#75804,
# "context deadline exceeded", fixed in Go 1.27): that target runs once more,
# and any failure of the second run fails.
FUZZ_TARGETS := ./model:FuzzParseTopology ./model:FuzzDecodeProgram ./model:FuzzParseProgramText \
	./traces:FuzzParseNCCLLog ./traces:FuzzOpenEventTrace

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; corpus=$$pkg/testdata/fuzz/$$name; \
		before=$$(ls $$corpus 2>/dev/null | wc -l); \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		if ! $(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s; then \
			if [ "$$(ls $$corpus 2>/dev/null | wc -l)" != "$$before" ]; then exit 1; fi; \
			echo "fuzz $$name failed without a failing input (golang/go#75804): once more"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s; \
		fi; \
	done

clean:
	rm -rf $(BIN)
