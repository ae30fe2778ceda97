package soft

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// Attack 4 (issue 51): a process that guessed a queue pair's number (and
// its peer's) connects to the device to hijack it: before, the device
// replaced the queue pair's inbound connection with the attacker's and
// served its writes. It is refused, and the queue pairs keep working.
func TestAttackGuessedQPN(t *testing.T) {
	a, b := connected(t, all)
	dst := make([]byte, 64)
	dmr, err := b.pd.RegMR(dst, all)
	require.NoError(t, err)
	src := []byte("before the attack")
	smr, _ := a.pd.RegMR(src, 0)
	write := func(id uint64) verbs.WC {
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: id, Op: verbs.OpWrite, Signaled: true, RemoteAddr: dmr.Addr(), RKey: dmr.RKey(),
			SGE: []verbs.SGE{{Addr: smr.Addr(), Len: uint32(len(src)), LKey: smr.LKey()}}}))
		return poll(t, a.cq)
	}
	require.Equal(t, verbs.WCSuccess, write(1).Status)
	bdev := b.qp.(*QP).dev
	hello := func(dstQPN, srcQPN uint32) []byte {
		var h [12]byte
		binary.LittleEndian.PutUint32(h[0:], wireMagic)
		binary.LittleEndian.PutUint32(h[4:], dstQPN)
		binary.LittleEndian.PutUint32(h[8:], srcQPN)
		return h[:]
	}
	attack := func(secret auth.Secret, srcQPN uint32) error {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(bdev.lid))))
		require.NoError(t, err)
		defer c.Close()
		h := hello(b.qp.QPN(), srcQPN)
		_, _ = c.Write(h)
		if secret.IsZero() {
			// No secret: answer the challenge with a guess and go on.
			guess := make([]byte, auth.NonceSize+auth.MACSize)
			_, _ = c.Write(guess[:auth.NonceSize])
			_, _ = io.ReadFull(c, make([]byte, auth.NonceSize+auth.MACSize))
			_, _ = c.Write(guess[auth.NonceSize:])
		} else if err := auth.Client(c, secret, h, time.Now().Add(2*time.Second)); err != nil {
			return err
		}
		// A write request into b's memory, as the hijacker would send.
		var r [reqBytes]byte
		r[0] = byte(verbs.OpWrite)
		binary.LittleEndian.PutUint32(r[4:], dmr.RKey())
		binary.LittleEndian.PutUint64(r[8:], dmr.Addr())
		binary.LittleEndian.PutUint32(r[16:], 8)
		_, _ = c.Write(append(r[:], "HIJACKED"...))
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = io.ReadFull(c, make([]byte, respBytes))
		return err
	}
	// Without the secret, spoofing the peer's QPN.
	require.ErrorIs(t, attack(auth.NewSecret(), a.qp.QPN()), auth.ErrDenied)
	require.Error(t, attack(auth.Secret{}, a.qp.QPN()), "a guessed proof was served")
	bdev.mu.Lock()
	assert.Equal(t, 2, bdev.refused, "both unproven connections refused")
	bdev.mu.Unlock()
	// With this process's secret (an insider) but another source QPN.
	require.Error(t, attack(processSecret(), a.qp.QPN()+1))
	assert.NotContains(t, string(dst), "HIJACKED")
	src = append(src[:0], "after the attack!"...)
	require.Equal(t, verbs.WCSuccess, write(2).Status, "the queue pair did not survive")
	assert.Equal(t, "after the attack!", string(dst[:len(src)]))
}
