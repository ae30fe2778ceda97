//go:build cgo

// Command plugin is twinccl's NCCL profiler plugin, built as a shared
// library that NCCL loads through NCCL_PROFILER_PLUGIN:
//
//	go build -buildmode=c-shared -o bin/libnccl-profiler-twinccl.so ./exec/hw/profiler/plugin
//
// (make plugins). shim.c exports the ncclProfiler_v5 ... ncclProfiler_v1
// tables; their functions call the exported Go functions below, which
// hand the events to a [profiler.Recorder]. See package profiler for what
// is recorded and how the Go runtime is kept out of NCCL's way.
package main

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -ldl -lpthread
#include <stdint.h>
#include <stdlib.h>
#include "event.h"
void twpLogMsg(int level, char* msg);
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/profiler"
)

// ncclInvalidUsage is what init returns when the plugin disables itself:
// NCCL then logs it and runs the communicator without a profiler.
const ncclInvalidUsage = 5

var (
	setup    sync.Once
	recorder atomic.Pointer[profiler.Recorder] // nil until set up, and when disabled
	setupErr error
)

func init() {
	// The host process's threads are the application's: the runtime keeps
	// to two unless GOMAXPROCS says otherwise.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
}

func logMsg(level int, msg string) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.twpLogMsg(C.int(level), cs)
}

//export twpGoInit
func twpGoInit(version C.int, comm C.uint64_t, name *C.char, nNodes, nRanks, rank C.int, ctx *C.uint64_t, mask *C.int) C.int {
	*ctx, *mask = 0, 0
	first := false
	setup.Do(func() {
		first = true
		host, err := os.Hostname()
		if err != nil {
			host = "unknown-host"
		}
		cfg, err := profiler.LoadConfig(os.Environ(), host, os.Getpid())
		if err != nil {
			setupErr = err
			return
		}
		recorder.Store(profiler.New(cfg, logMsg))
	})
	if setupErr != nil {
		level := profiler.LogInfo
		if first {
			level = profiler.LogWarn
		}
		logMsg(level, fmt.Sprintf("twinccl profiler: disabled: %v", setupErr))
		return ncclInvalidUsage
	}
	rec := recorder.Load()
	c := rec.Init(int(version), uint64(comm), C.GoString(name), int32(nNodes), int32(nRanks), int32(rank))
	cfg := rec.Config()
	*ctx, *mask = C.uint64_t(c), C.int(cfg.Mask())
	return 0
}

// cView is the C string s as a Go string without copying it: valid only
// while NCCL's call lasts (the recorder copies the few distinct names it
// keeps), so that an event costs no allocation.
func cView(s *C.char) string {
	if s == nil {
		return ""
	}
	p := unsafe.Pointer(s)
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return unsafe.String((*byte)(p), n)
}

//export twpGoStart
func twpGoStart(ctx C.uint64_t, e *C.twp_event) C.uint64_t {
	rec := recorder.Load()
	if rec == nil {
		return 0
	}
	ev := profiler.Event{
		HostNs: int64(e.hostNs), Type: uint32(e._type), Rank: int32(e.rank), Parent: profiler.Handle(e.parent),
		CommHash: uint64(e.commHash), SeqNumber: uint64(e.seqNumber), Func: cView(e._func),
		Datatype: cView(e.datatype), Algo: cView(e.algo), Proto: cView(e.proto), RedOp: cView(e.redop),
		Count: uint64(e.count), Root: int32(e.root), Peer: int32(e.peer), NChannels: int32(e.nChannels),
		Stream: uint64(e.stream), Channel: int32(e.channel), PTimer: uint64(e.pTimer), IsSend: e.isSend != 0,
		NSteps: int32(e.nSteps), ChunkSize: int32(e.chunkSize), Step: int32(e.step), Foreign: e.foreign != 0,
	}
	return C.uint64_t(rec.Start(profiler.Context(ctx), &ev))
}

//export twpGoStop
func twpGoStop(h C.uint64_t, now C.int64_t) {
	if rec := recorder.Load(); rec != nil {
		rec.Stop(profiler.Handle(h), int64(now))
	}
}

//export twpGoRecord
func twpGoRecord(h C.uint64_t, state C.int, transSize, pTimer C.uint64_t, now C.int64_t) {
	if rec := recorder.Load(); rec != nil {
		rec.Record(profiler.Handle(h), int32(state), uint64(transSize), uint64(pTimer), int64(now))
	}
}

//export twpGoFinalize
func twpGoFinalize(ctx C.uint64_t) C.int {
	rec := recorder.Load()
	if rec == nil {
		return 0
	}
	if err := rec.Finalize(profiler.Context(ctx)); err != nil {
		logMsg(profiler.LogWarn, err.Error())
		return 2 // ncclSystemError
	}
	return 0
}

//export twpGoAtExit
func twpGoAtExit() {
	rec := recorder.Load()
	if rec == nil {
		return
	}
	if err := rec.Flush(); err != nil {
		logMsg(profiler.LogWarn, err.Error())
	}
}

func main() {}
