package ib_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestSettingsFromEnv: NCCL 2.28's defaults, every variable parsed into
// its field, ours over NCCL's, and each out-of-range or malformed value
// refused with the variable's name.
func TestSettingsFromEnv(t *testing.T) {
	s, err := ib.SettingsFromEnv(envMap(nil))
	require.NoError(t, err)
	assert.Equal(t, ib.Settings{TC: 0, SL: 0, Timeout: 20, RetryCnt: 7, AdaptiveRouting: -2, ARThreshold: 8192, ECE: true, RelaxedOrdering: 2}, s)

	s, err = ib.SettingsFromEnv(envMap(map[string]string{
		"NCCL_IB_TC": "106", "NCCL_IB_SL": "3", "NCCL_IB_TIMEOUT": "22", "TWINCCL_IB_TIMEOUT": "14", "NCCL_IB_RETRY_CNT": "5",
		"NCCL_IB_ADAPTIVE_ROUTING": "1", "NCCL_IB_AR_THRESHOLD": "65536", "NCCL_IB_ECE_ENABLE": "0", "NCCL_IB_PCI_RELAXED_ORDERING": "0",
		"NCCL_IB_SPLIT_DATA_ON_QPS": "1", "NCCL_GDR_FLUSH_DISABLE": "1",
	}))
	require.NoError(t, err)
	assert.Equal(t, ib.Settings{TC: 106, SL: 3, Timeout: 14, RetryCnt: 5, AdaptiveRouting: 1, ARThreshold: 65536, ECE: false, RelaxedOrdering: 0, SplitDataOnQPs: true, GDRFlushDisable: true}, s)

	for _, c := range []struct{ k, v, want string }{
		{"NCCL_IB_TC", "256", "NCCL_IB_TC=\"256\": want a traffic class from 0 to 255"},
		{"NCCL_IB_SL", "16", "NCCL_IB_SL=\"16\""},
		{"NCCL_IB_SL", "-1", "NCCL_IB_SL=\"-1\""},
		{"NCCL_IB_TIMEOUT", "0", "NCCL_IB_TIMEOUT=\"0\": want an ACK timeout exponent from 1 to 31"},
		{"NCCL_IB_TIMEOUT", "32", "NCCL_IB_TIMEOUT=\"32\""},
		{"TWINCCL_IB_RETRY_CNT", "8", "TWINCCL_IB_RETRY_CNT=\"8\": want a retry count from 0 to 7"},
		{"NCCL_IB_ADAPTIVE_ROUTING", "yes", "NCCL_IB_ADAPTIVE_ROUTING=\"yes\": want 0 or 1"},
		{"NCCL_IB_PCI_RELAXED_ORDERING", "3", "NCCL_IB_PCI_RELAXED_ORDERING=\"3\": want 0, 1 or 2"},
		{"NCCL_IB_ECE_ENABLE", "2", "NCCL_IB_ECE_ENABLE=\"2\": want 0 or 1"},
		{"NCCL_IB_SPLIT_DATA_ON_QPS", "on", "NCCL_IB_SPLIT_DATA_ON_QPS=\"on\""},
		{"NCCL_GDR_FLUSH_DISABLE", "x", "NCCL_GDR_FLUSH_DISABLE=\"x\""},
		{"NCCL_IB_AR_THRESHOLD", "-1", "NCCL_IB_AR_THRESHOLD=\"-1\""},
	} {
		_, err := ib.SettingsFromEnv(envMap(map[string]string{c.k: c.v}))
		require.Error(t, err, "%s=%s", c.k, c.v)
		assert.Contains(t, err.Error(), c.want)
	}
}

// TestOptionsFromEnvSettings: the plugin's options carry the settings, and
// a bad one fails OptionsFromEnv (run bench and run gpu check it before
// any rank starts).
func TestOptionsFromEnvSettings(t *testing.T) {
	t.Setenv("NCCL_IB_SL", "5")
	o, err := ib.OptionsFromEnv(nil)
	require.NoError(t, err)
	require.NotNil(t, o.Settings)
	assert.Equal(t, 5, o.Settings.SL)
	t.Setenv("NCCL_IB_SL", "99")
	_, err = ib.OptionsFromEnv(nil)
	require.ErrorContains(t, err, "NCCL_IB_SL=\"99\"")
}

// TestSettingsReachQPs: the sender's TC and SL are used by both ends'
// QPs (the receiver's own are 0: it takes the sender's, as NCCL's
// accept); each end's timeout and retry count are its own; ECE options
// are exchanged and set on every QP only when the sender enables ECE; data
// buffers are registered with relaxed ordering when the setting allows
// it (the soft device can).
func TestSettingsReachQPs(t *testing.T) {
	snd := ib.DefaultSettings()
	snd.TC, snd.SL, snd.Timeout, snd.RetryCnt = 106, 3, 14, 5
	rcv := ib.DefaultSettings()
	rcv.RelaxedOrdering = 0
	var provs [2]*countProvider
	p := newPairWith(t, pairOpt{devs: [2]int{1, 1}, qps: 2, settings: [2]*ib.Settings{&snd, &rcv},
		wrap: func(r int, sp *soft.Provider) verbs.Provider {
			provs[r] = &countProvider{Provider: sp}
			return provs[r]
		}})
	sc, rc := p.connect(t)
	defer sc.Close()
	defer rc.Close()
	for side, c := range []any{sc, rc} {
		qps := ib.QPs(c)
		require.Len(t, qps, 2)
		for i, qp := range qps {
			a := qp.(*soft.QP).Attr()
			assert.Equal(t, 106, a.TrafficClass, "side %d QP %d", side, i)
			assert.Equal(t, 3, a.SL, "side %d QP %d", side, i)
			wantTO, wantRetry := 14, 5
			if side == 1 {
				wantTO, wantRetry = 20, 7
			}
			assert.Equal(t, wantTO, a.Timeout, "side %d QP %d", side, i)
			assert.Equal(t, wantRetry, a.RetryCount, "side %d QP %d", side, i)
			ece, set := qp.(*soft.QP).ECESet()
			assert.True(t, set, "side %d QP %d: ECE not set", side, i)
			assert.NotZero(t, ece.VendorID)
		}
	}
	data := bytes.Repeat([]byte{0x5a}, 100<<10)
	buf := make([]byte, len(data))
	message(t, sc, rc, data, buf)
	sm, rm := provs[0].region(data), provs[1].region(buf)
	require.NotNil(t, sm)
	require.NotNil(t, rm)
	assert.NotZero(t, sm.MR.(*soft.MR).Access()&verbs.AccessRelaxedOrdering, "sender (mode 2, supported): relaxed ordering")
	assert.Zero(t, rm.MR.(*soft.MR).Access()&verbs.AccessRelaxedOrdering, "receiver (mode 0): none")

	noECE := ib.DefaultSettings()
	noECE.ECE = false
	p2 := newPairWith(t, pairOpt{devs: [2]int{1, 1}, qps: 1, settings: [2]*ib.Settings{&noECE, nil}})
	sc2, rc2 := p2.connect(t)
	defer sc2.Close()
	defer rc2.Close()
	for side, c := range []any{sc2, rc2} {
		_, set := ib.QPs(c)[0].(*soft.QP).ECESet()
		assert.False(t, set, "side %d: ECE set though the sender disables it", side)
	}
}

// postLog wraps a provider and records every send work request posted:
// the QP, opcode and length.
type postLog struct {
	verbs.Provider
	mu    sync.Mutex
	posts []post
	reads []verbs.SendWR // the RDMA reads, whole
}

type post struct {
	qp  uint32
	op  verbs.Opcode
	len uint32
}

type logCtx struct {
	verbs.Context
	l *postLog
}
type logPD struct {
	verbs.PD
	l *postLog
}
type logQP struct {
	verbs.QP
	l *postLog
}

func (l *postLog) Open(n string) (verbs.Context, error) {
	c, err := l.Provider.Open(n)
	return &logCtx{c, l}, err
}
func (c *logCtx) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return &logPD{pd, c.l}, err
}

// RegDevice forwards GPU registrations (an optional interface the
// embedding alone would hide).
func (p *logPD) RegDevice(m verbs.DeviceMemory, a verbs.Access) (verbs.MR, error) {
	dr, ok := p.PD.(verbs.DeviceRegistrar)
	if !ok {
		return nil, verbs.ErrNotSupported
	}
	return dr.RegDevice(m, a)
}
func (p *logPD) CreateQP(i verbs.QPInit) (verbs.QP, error) {
	q, err := p.PD.CreateQP(i)
	return &logQP{q, p.l}, err
}
func (q *logQP) PostSend(wr verbs.SendWR) error {
	n := uint32(0)
	for _, s := range wr.SGE {
		n += s.Len
	}
	q.l.mu.Lock()
	q.l.posts = append(q.l.posts, post{q.QPN(), wr.Op, n})
	if wr.Op == verbs.OpRead {
		q.l.reads = append(q.l.reads, wr)
	}
	q.l.mu.Unlock()
	return q.QP.PostSend(wr)
}

// dataPosts are the posts of more than a header's bytes, and the zero-
// byte writes with immediate.
func (l *postLog) dataPosts() []post {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []post
	for _, p := range l.posts {
		if p.len > 64 || p.op == verbs.OpWriteImm && p.len == 0 {
			out = append(out, p)
		}
	}
	return out
}

// TestSplitDataOnQPsAndAdaptiveRouting: with 4 QPs per connection on one
// device a 256 KiB message goes over one QP (NCCL_IB_SPLIT_DATA_ON_QPS=0)
// or is striped over all four (=1, which the receiver adopts from the
// sender although its own setting says 0: the message still completes
// intact); with adaptive routing a stripe above the threshold is a plain
// write followed by a zero-byte write with immediate on the same QP.
func TestSplitDataOnQPsAndAdaptiveRouting(t *testing.T) {
	for _, c := range []struct {
		name       string
		split      bool
		ar         int
		wantQPs    int
		wantPlain  bool // data as plain writes plus zero-byte immediates
		wantStripe uint32
	}{
		{"default", false, 0, 1, false, 256 << 10},
		{"split", true, 0, 4, false, 64 << 10},
		{"split+AR", true, 1, 4, true, 64 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			snd := ib.DefaultSettings()
			snd.SplitDataOnQPs, snd.AdaptiveRouting = c.split, c.ar
			var log postLog
			p := newPairWith(t, pairOpt{devs: [2]int{1, 1}, qps: 4, settings: [2]*ib.Settings{&snd, nil},
				wrap: func(r int, sp *soft.Provider) verbs.Provider {
					if r == 0 {
						log.Provider = sp
						return &log
					}
					return sp
				}})
			sc, rc := p.connect(t)
			defer sc.Close()
			defer rc.Close()
			data := make([]byte, 256<<10)
			for i := range data {
				data[i] = byte(i * 7)
			}
			message(t, sc, rc, data, make([]byte, len(data)))
			qps := map[uint32]bool{}
			var total uint32
			for i, p := range log.dataPosts() {
				if p.len == 0 {
					require.True(t, c.wantPlain, "zero-byte immediate without adaptive routing")
					continue
				}
				qps[p.qp] = true
				total += p.len
				assert.Equal(t, c.wantStripe, p.len, "post %d", i)
				if c.wantPlain {
					assert.Equal(t, verbs.OpWrite, p.op, "post %d", i)
					next := log.dataPosts()[i+1]
					assert.Equal(t, post{p.qp, verbs.OpWriteImm, 0}, next, "post %d: the immediate follows on the same QP", i)
				} else {
					assert.Equal(t, verbs.OpWriteImm, p.op, "post %d", i)
				}
			}
			assert.Len(t, qps, c.wantQPs)
			assert.Equal(t, uint32(len(data)), total)
		})
	}
}

// TestRelaxedOrderingForcedUnsupported: NCCL_IB_PCI_RELAXED_ORDERING=1 on
// a device that cannot (the wrapper hides the soft device's support)
// fails the plugin's Init, naming the variable; 2 quietly does without.
func TestRelaxedOrderingForcedUnsupported(t *testing.T) {
	p := newPair(t, [2]int{1, 1}, 1) // for its bootstrap comms
	sp, err := soft.New(soft.Options{Devices: 1})
	require.NoError(t, err)
	defer sp.Close()
	for _, c := range []struct {
		mode    int
		wantErr string
	}{{1, "NCCL_IB_PCI_RELAXED_ORDERING=1: device"}, {2, ""}} {
		st := ib.DefaultSettings()
		st.RelaxedOrdering = c.mode
		pl := ib.New(ib.Options{Provider: &postLog{Provider: sp}, Settings: &st})
		err := pl.Init(p.comms[0])
		if c.wantErr != "" {
			require.ErrorContains(t, err, c.wantErr)
		} else {
			require.NoError(t, err)
		}
		pl.Close()
	}
}

// TestConformanceSplitAdaptiveRouting: collectives over connections of 3
// QPs per device on ranks of 1 and 2 devices, striping every message over
// all QPs, with adaptive routing's write-then-immediate pairs from 4 KiB
// up (so that a proxy keeps many messages of three work requests per QP
// in flight): the bytes are the reference interpreter's.
func TestConformanceSplitAdaptiveRouting(t *testing.T) {
	st := ib.DefaultSettings()
	st.SplitDataOnQPs, st.AdaptiveRouting, st.ARThreshold = true, 1, 4096
	e := &executor{t: t, qps: 3, devs: func(r int) int { return 1 + r%2 }, jobs: map[int]*hostdev.LocalJob{}, settings: &st}
	defer e.close()
	for _, c := range []conformance.Case{
		{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 2, Count: 1 << 20},
		{Coll: model.CollAllGather, Algo: model.AlgoRing, Proto: model.ProtoLL, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 1, Count: 4099},
		{Coll: model.CollReduceScatter, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP16, Op: model.RedMax, NRanks: 2, NChannels: 2, Count: 300001},
	} {
		require.NoError(t, conformance.Check(e, c))
	}
}
