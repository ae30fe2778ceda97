package ib_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/ib"
)

// Attack 9 (issue 51): a peer sends more control frames than the
// connection's setup reads (the reader's queue holds four). Before, the
// reader blocked on the full queue and Close waited for it forever; now
// Close returns at once, on both sides.
func TestAttackUnsolicitedControlFrames(t *testing.T) {
	p := newPair(t, [2]int{1, 1}, 1)
	sc, rc := p.connect(t)
	for _, c := range []struct {
		from, to any
	}{{sc, rc}, {rc, sc}} {
		ctl := ib.CtlConn(c.from)
		require.NotNil(t, ctl)
		for i := 0; i < 16; i++ {
			require.NoError(t, bootstrap.WriteFrame(ctl, []byte(`{"Ready":true}`), time.Now().Add(time.Second)))
		}
	}
	time.Sleep(100 * time.Millisecond) // the frames arrive and fill the queues
	done := make(chan error, 2)
	go func() { done <- rc.Close() }()
	go func() { done <- sc.Close() }()
	for i := 0; i < 2; i++ {
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("close blocked after unsolicited control frames")
		}
	}
}
