package ib

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// FuzzIBControl: a control frame as a peer sends it during connection
// setup. The frame is bounded by maxCtl; metadata checkMeta accepts can
// be indexed for every queue pair and device as connectQPs does.
func FuzzIBControl(f *testing.F) {
	frame := func(m ctlMsg) []byte {
		var b bytes.Buffer
		p := encodeCtl(m)
		b.Write([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), byte(len(p) >> 24)})
		b.Write(p)
		return b.Bytes()
	}
	f.Add(frame(ctlMsg{NDev: 2}), uint8(2))
	f.Add(frame(ctlMsg{Meta: &metadata{QPN: []uint32{7, 8}, Dev: []int{0, 1}, LID: []uint16{1, 2}, GID: make([][16]byte, 2), MTU: []int{4096, 4096}, Fifo: 1 << 20, RKey: 5}}), uint8(2))
	f.Add(frame(ctlMsg{Meta: &metadata{QPN: []uint32{7}, Dev: []int{0}, LID: []uint16{1}, GID: make([][16]byte, 1), MTU: []int{4096}, TC: 106, SL: 3,
		ECE: []verbs.ECE{{VendorID: 1, Options: 3}}, ECEOK: []bool{true}}}), uint8(1))
	f.Add(frame(ctlMsg{Ready: true}), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, nqps uint8) {
		p, err := bootstrap.DecodeFrame(bytes.NewReader(b), maxCtl)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(p), maxCtl)
		var m ctlMsg
		if json.Unmarshal(p, &m) != nil || checkMeta(m.Meta, int(nqps)) != nil {
			return
		}
		r := m.Meta
		var rkeys [maxDevs]uint32
		for i := 0; i < int(nqps); i++ {
			_, _, _, _, _ = r.QPN[i], r.LID[i], r.GID[i], r.MTU[i], rkeys[r.Dev[i]]
			if i < len(r.ECEOK) && r.ECEOK[i] {
				_ = r.ECE[i]
			}
		}
		require.True(t, r.TC >= 0 && r.TC <= 255 && r.SL >= 0 && r.SL <= 15, "TC %d SL %d", r.TC, r.SL)
	})
}

// FuzzIBFifoEntry: a FIFO entry the receiver wrote into the sender's
// memory decodes into fields that encode back to the same bytes.
func FuzzIBFifoEntry(f *testing.F) {
	b := make([]byte, entBytes)
	encodeEntry(b, fifoEntry{addr: 1 << 40, size: 4096, kind: kindData, msg: 9, rkeys: [maxDevs]uint32{1, 2}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != entBytes {
			return
		}
		e := decodeEntry(b)
		back := make([]byte, entBytes)
		encodeEntry(back, e)
		require.Equal(t, b, back)
	})
}
