// Command plugin is twinccl's NCCL tuner plugin: `make tuner` builds it
// with -buildmode=c-shared into bin/libnccl-tuner-twinccl.so, which NCCL
// loads through NCCL_TUNER_PLUGIN. shim.c defines the plugin structs NCCL
// looks up (ncclTunerPlugin_v5, and _v4 for NCCL before 2.28) over the Go
// entry points below; package tuner computes the answers. See
// docs/guide/library.md.
package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"log/slog"
	"os"
	"sync"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/tuner"
	"github.com/twinccl/twinccl/model"
)

func main() {}

// NCCL's result codes the plugin returns.
const (
	ncclSuccess         = 0
	ncclInternalError   = 3
	ncclInvalidArgument = 4
)

// Contexts: NCCL keeps the void* init gives; it is an index into tables,
// so that no Go pointer goes to C.
var (
	ctxMu  sync.Mutex
	tables = map[uintptr]*tuner.Table{}
	nextID uintptr
)

var log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("lib", "twinccl-tuner")

//export twTunerInit
func twTunerInit(nRanks, nNodes C.size_t, ctx *C.uintptr_t) C.int {
	if ctx == nil {
		return ncclInvalidArgument
	}
	mode, err := tuner.ModeFromEnv()
	if err != nil {
		log.Warn("tuner init", "err", err)
		return ncclInvalidArgument
	}
	t, err := tuner.Load(int(nRanks), int(nNodes), mode, log)
	if err != nil {
		// NCCL then runs without the plugin's advice.
		log.Warn("tuner init: no table; NCCL keeps its own choices", "ranks", int(nRanks), "nodes", int(nNodes), "err", err)
		return ncclInternalError
	}
	ctxMu.Lock()
	nextID++
	id := nextID
	tables[id] = t
	ctxMu.Unlock()
	*ctx = C.uintptr_t(id)
	return ncclSuccess
}

//export twTunerGetCollInfo
func twTunerGetCollInfo(ctx C.uintptr_t, coll C.int, nBytes C.size_t, table *C.float, numAlgo, numProto C.int, nChannels *C.int) C.int {
	ctxMu.Lock()
	t := tables[uintptr(ctx)]
	ctxMu.Unlock()
	if t == nil || table == nil || numAlgo <= 0 || numProto <= 0 {
		return ncclInvalidArgument
	}
	cost := unsafe.Slice((*float32)(unsafe.Pointer(table)), int(numAlgo)*int(numProto))
	allowed := func(a model.Algorithm, p model.Protocol) bool {
		return int(a) < int(numAlgo) && int(p) < int(numProto) && cost[int(a)*int(numProto)+int(p)] >= 0
	}
	ans, ok := t.Choose(model.Collective(coll), uint64(nBytes), allowed)
	if !ok {
		return ncclSuccess // no advice: NCCL keeps its choice
	}
	// The chosen pair costs nothing, so NCCL's minimum is it.
	cost[int(ans.Algo)*int(numProto)+int(ans.Proto)] = 0
	if nChannels != nil && ans.NChannels > 0 {
		*nChannels = C.int(ans.NChannels)
	}
	return ncclSuccess
}

//export twTunerFinalize
func twTunerFinalize(ctx C.uintptr_t) C.int {
	ctxMu.Lock()
	delete(tables, uintptr(ctx))
	ctxMu.Unlock()
	return ncclSuccess
}
