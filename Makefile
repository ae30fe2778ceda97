# twinccl — build, test, benchmark, lint and fuzz.
GO        ?= go
BIN       ?= bin
# Empty: each fuzz target runs its own number of inputs (FUZZ_TARGETS);
# a duration (make fuzz FUZZTIME=60s) runs every target that long instead.
FUZZTIME  ?=
# The commit bin/run is built from, which run gpu records
# (twinccl_revision; "+modified" where tracked files have changes).
REVISION  := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
ifneq ($(REVISION),)
REVISION  := $(REVISION)$(shell git diff --quiet HEAD -- 2>/dev/null || echo +modified)
endif
# go-nvml binds NVML symbols lazily; binaries that link it must allow that.
LAZY      := -ldflags='-extldflags=-Wl,-z,lazy -X main.revision=$(REVISION)'
# nvml.h marks some declarations deprecated; keep the build log readable.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
PURE_PKGS := ./model/... ./search/... ./exec/sim/... ./traces/... ./cmd/replay/...

.PHONY: all build plugins demo test unit lint bench fuzz clean accuracy

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags='-X main.revision=$(REVISION)' -o $(BIN)/replay ./cmd/replay
	$(GO) build $(LAZY) -o $(BIN)/run ./cmd/run

# NCCL plugins built from this repository: the profiler plugin, loaded by
# NCCL 2.23+ through NCCL_PROFILER_PLUGIN=$(BIN)/libnccl-profiler-twinccl.so
# (docs/guide/profiler.md). -z nodelete: NCCL dlcloses its profiler, and a
# Go runtime cannot be unloaded. go build also writes a C header beside the
# library, which nothing uses.
plugins:
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -ldflags='-s -w -extldflags=-Wl,-z,nodelete' \
		-o $(BIN)/libnccl-profiler-twinccl.so ./exec/hw/profiler/plugin
	rm -f $(BIN)/libnccl-profiler-twinccl.h

# The main job on the embedded default topology (our 2x H200 machine): the
# predicted AllReduce sweep and NCCL's choice (algorithm, protocol, channels)
# behind every row.
demo:
	@CGO_ENABLED=0 $(GO) build -ldflags='-X main.revision=$(REVISION)' -o $(BIN)/replay ./cmd/replay
	@echo '$$ bin/replay sim --op allreduce -b 8 -e 1G -f 32'
	@./$(BIN)/replay sim --op allreduce -b 8 -e 1G -f 32

# Everything CI runs: lint, the unit tests, and a short fuzzing budget.
test: lint unit
	$(MAKE) fuzz

unit:
	$(GO) test $(LAZY) -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build $(PURE_PKGS)

# docs/accuracy.md and its plots from testdata/manifest.tsv: the simulator's
# errors on the eval recordings only (TestAccuracyReportIsCurrent fails when
# the committed report is stale).
accuracy:
	CGO_ENABLED=0 $(GO) build -ldflags='-X main.revision=$(REVISION)' -o $(BIN)/replay ./cmd/replay
	./$(BIN)/replay accuracy

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./model/... ./search/...

# Every fuzz target in turn (go test fuzzes one target per run). CI bounds each
# by a number of inputs, about 10 s on two cores, not by a duration: Go 1.26's
# fuzz coordinator can miss its own -fuzztime deadline and fail with "context
# deadline exceeded" and no failing input (golang/go#75804, fixed in Go 1.27),
# which a count never arms. A duration given as FUZZTIME still runs, and a
# failure that wrote no input to testdata/fuzz runs once more before it fails.
# New inputs are minimized for at most 200 runs each, so a count stays a budget,
# and a count that runs past 5 minutes (a pathological input) fails.
FUZZ_TARGETS := ./model:FuzzParseTopology:40000 ./model:FuzzDecodeProgram:60000 \
	./model:FuzzParseProgramText:50000 ./traces:FuzzParseNCCLLog:50000 \
	./traces:FuzzOpenEventTrace:10000 ./traces:FuzzImportChakra:20000 \
	./traces:FuzzImportKineto:10000 ./traces:FuzzImportNCCLLog:6000 ./model:FuzzParseRanks:20000
# Issue 51: every wire protocol (bootstrap, proxy, socket headers, IB control
# and FIFO frames, software verbs) and every input file (call traces,
# calibrations, run gpu --json), a few seconds each.
FUZZ_TARGETS += ./exec/hw/bootstrap:FuzzParseHello:20000 ./exec/hw/bootstrap:FuzzDecodeFrame:20000 \
	./exec/hw/bootstrap:FuzzReadHello:10000 ./exec/hw/transport:FuzzProxyRequest:20000 \
	./exec/hw/transport:FuzzSocketHeader:20000 ./exec/hw/ib:FuzzIBControl:20000 \
	./exec/hw/ib:FuzzIBFifoEntry:20000 ./exec/hw/ib/soft:FuzzSoftRequest:20000 \
	./traces:FuzzOpenCallTrace:3000 ./exec/sim:FuzzParseCalib:5000 ./exec/sim/hwcmp:FuzzReadJSON:10000

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$(FUZZTIME); \
		to=0; [ -n "$$budget" ] || { budget=$${rest##*:}x; to=5m; }; \
		corpus=$$pkg/testdata/fuzz/$$name; before=$$(ls $$corpus 2>/dev/null | wc -l); \
		echo "fuzz $$pkg $$name ($$budget)"; \
		if ! $(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget -fuzzminimizetime 200x -timeout $$to; then \
			if [ "$$(ls $$corpus 2>/dev/null | wc -l)" != "$$before" ]; then exit 1; fi; \
			echo "fuzz $$name failed without a failing input (golang/go#75804): once more"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget -fuzzminimizetime 200x -timeout $$to; \
		fi; \
	done

clean:
	rm -rf $(BIN)

# NCCL's C API as a drop-in library over twinccl's executor
# (docs/guide/library.md): bin/libnccl.so.2 and bin/libtwinccl.so (the same
# code) export NCCL 2.28's functions, declared in include/nccl.h. Lazy
# binding: go-nvml resolves NVML at run time (programs that link against
# the library need -Wl,--allow-shlib-undefined).
LIB_LDFLAGS := -ldflags='-extldflags=-Wl,-z,lazy,-soname,libnccl.so.2'
.PHONY: lib
lib:
	$(GO) build -buildmode=c-shared $(LIB_LDFLAGS) -o $(BIN)/libnccl.so.2 ./exec/hw/ncclapi/libnccl
	cp $(BIN)/libnccl.so.2 $(BIN)/libtwinccl.so
	ln -sf libnccl.so.2 $(BIN)/libnccl.so
	rm -f $(BIN)/libnccl.so.h

# The NCCL tuner plugin (docs/guide/library.md): NCCL_TUNER_PLUGIN=
# bin/libnccl-tuner-twinccl.so makes NCCL take the algorithm, protocol and
# channels twinccl's simulator predicts fastest for each call.
.PHONY: tuner
tuner:
	$(GO) build -buildmode=c-shared -ldflags='-extldflags=-Wl,-z,lazy' -o $(BIN)/libnccl-tuner-twinccl.so ./exec/hw/tuner/plugin
	rm -f $(BIN)/libnccl-tuner-twinccl.h
