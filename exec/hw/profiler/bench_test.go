package profiler

import (
	"testing"
)

// BenchmarkRecorderCall is the Go side of one collective as NCCL 2.28
// reports it (API event, task, two kernel channels), without the C side and
// the cgo transitions (BenchmarkPluginPerCall has both).
func BenchmarkRecorderCall(b *testing.B) {
	cfg, err := LoadConfig([]string{EnvDir + "=" + b.TempDir()}, "host", 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxEvents = 2*b.N + 2
	r := New(cfg, nil)
	cx := r.Init(5, 1, "", 1, 2, 0)
	api := Event{Type: TypeCollApi, Func: "AllReduce", Datatype: "ncclFloat32", Count: 1024}
	coll := Event{Type: TypeColl, Func: "AllReduce", Datatype: "ncclFloat32", Algo: "RING", Proto: "LL", Count: 1024, NChannels: 2}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now := int64(i) * 1000
		api.HostNs = now
		a := r.Start(cx, &api)
		r.Stop(a, now+1)
		coll.Parent, coll.HostNs = a, now+2
		h := r.Start(cx, &coll)
		r.Stop(h, now+3)
		for c := range 2 {
			k := r.Start(cx, &Event{Type: TypeKernelCh, Parent: h, Channel: int32(c), PTimer: uint64(now + 10), HostNs: now + 20})
			r.Record(k, StateKernelChStop, 0, uint64(now+500), now+600)
		}
	}
}
