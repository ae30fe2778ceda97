package transport

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
)

// tcpPair is two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (a, b net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		acc <- c
	}()
	a, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if b = <-acc; b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

// inlinePair is a send comm and a receive comm without helpers over one
// loopback socket, gathering header and payload as by default; the peer
// is called rank 7 on both sides.
func inlinePair(t testing.TB) (*inlineComm, *inlineComm) {
	t.Helper()
	a, b := tcpPair(t)
	snd, err := newInlineComm(a, 7, true)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := newInlineComm(b, 7, false)
	if err != nil {
		t.Fatal(err)
	}
	snd.gather = true
	t.Cleanup(func() { snd.Close(); rcv.Close() })
	return snd, rcv
}

// waitReq waits for r by the proxy's two means: polling Test (wake nil)
// or, between Tests, arming the comm's wake-up and blocking on the channel
// its wake function signals (what a progress loop that sleeps when idle
// relies on).
func waitReq(r Request, arm WakeArmer, wake <-chan struct{}, what string) error {
	deadline := time.After(20 * time.Second)
	for {
		done, err := r.Test()
		if done {
			return err
		}
		if wake == nil {
			select {
			case <-deadline:
				return fmt.Errorf("%s: not done after 20 s of polling", what)
			default:
			}
			continue
		}
		arm.ArmWake()
		select {
		case <-wake:
		case <-deadline:
			return fmt.Errorf("%s: no wake-up in 20 s (the waiter never saw the socket ready)", what)
		}
	}
}

// blockOn is the wake channel of a test side that blocks between Tests
// (poll false), or nil for one that polls.
func blockOn(wake chan struct{}, poll bool) <-chan struct{} {
	if poll {
		return nil
	}
	return wake
}

// TestInlineCommMessages sends messages of every size class, some far
// larger than the socket buffers (so the send blocks halfway and goes on
// when the receiver drains the socket), from a sender that polls to a
// receiver that only tests after its wake function was called, and then
// the other way round: the bytes must arrive whole and in order, and
// neither side may hang waiting for a wake-up that never comes.
func TestInlineCommMessages(t *testing.T) {
	checkGoroutines(t)
	for _, tc := range []struct{ pollRecv, gather bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		pollRecv := tc.pollRecv
		t.Run(fmt.Sprintf("poll-receiver=%v,gather=%v", pollRecv, tc.gather), func(t *testing.T) {
			snd, rcv := inlinePair(t)
			snd.gather = tc.gather
			sendWake, recvWake := make(chan struct{}, 1), make(chan struct{}, 1)
			snd.SetWake(func() { notify(sendWake) })
			rcv.SetWake(func() { notify(recvWake) })
			rng := rand.New(rand.NewPCG(1, 2))
			sizes := []int{0, 1, 13, 4096, 65536, 3 << 20, 17 << 20, 5}
			msgs := make([][]byte, len(sizes))
			for i, n := range sizes {
				msgs[i] = make([]byte, n)
				for j := range msgs[i] {
					msgs[i][j] = byte(rng.Uint32())
				}
			}
			errc := make(chan error, 1)
			go func() {
				for i, m := range msgs {
					var hdr [HeaderSize]byte
					putHeader(hdr[:], FifoEntry{Size: int64(len(m)), Wire: int64(len(m)), Step: int64(i), Steps: 1})
					r, err := snd.Isend(hdr[:], m)
					if err == nil {
						err = waitReq(r, snd, blockOn(sendWake, !pollRecv), fmt.Sprintf("send %d", i))
					}
					if err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for i, m := range msgs {
				var hdr [HeaderSize]byte
				r, err := rcv.IrecvHeader(hdr[:])
				if err != nil {
					t.Fatal(err)
				}
				if err := waitReq(r, rcv, blockOn(recvWake, pollRecv), fmt.Sprintf("header %d", i)); err != nil {
					t.Fatal(err)
				}
				e := getHeader(hdr[:])
				if e.Step != int64(i) || e.Size != int64(len(m)) {
					t.Fatalf("header %d: %+v, want step %d of %d bytes", i, e, i, len(m))
				}
				got := make([]byte, e.Size)
				if r, err = rcv.Irecv(got); err != nil {
					t.Fatal(err)
				}
				if err := waitReq(r, rcv, blockOn(recvWake, pollRecv), fmt.Sprintf("payload %d", i)); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, m) {
					t.Fatalf("message %d (%d bytes): wrong bytes", i, len(m))
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// recvMessage reads the next message on rcv, polling: its header, then
// the payload of the size the header announces.
func recvMessage(rcv *inlineComm) (FifoEntry, []byte, error) {
	var hdr [HeaderSize]byte
	r, err := rcv.IrecvHeader(hdr[:])
	if err == nil {
		err = waitReq(r, nil, nil, "header")
	}
	if err != nil {
		return FifoEntry{}, nil, err
	}
	e := getHeader(hdr[:])
	data := make([]byte, e.Size)
	if r, err = rcv.Irecv(data); err == nil {
		err = waitReq(r, nil, nil, "payload")
	}
	return e, data, err
}

// TestGatherOneCall: with gathering on (the default), a message's header
// and payload leave in one system call, whatever the payload's size (as
// long as the socket takes it all); off, a payload takes a call of its
// own; the receiver reads the same bytes either way; the environment
// turns it off.
func TestGatherOneCall(t *testing.T) {
	for _, tc := range []struct {
		gather      bool
		size, calls int
	}{{true, 48, 1}, {true, 129, 1}, {true, 4096, 1}, {true, 0, 1}, {false, 48, 2}, {false, 0, 1}} {
		snd, rcv := inlinePair(t)
		snd.gather = tc.gather
		msg := bytes.Repeat([]byte{0xa5}, tc.size)
		var hdr [HeaderSize]byte
		putHeader(hdr[:], FifoEntry{Size: int64(tc.size), Wire: int64(tc.size), Step: 3, Steps: 1})
		r, err := snd.Isend(hdr[:], msg)
		if err == nil {
			err = waitReq(r, nil, nil, "send")
		}
		if err != nil {
			t.Fatal(err)
		}
		if snd.ioCalls != tc.calls {
			t.Errorf("gather %v, %d-byte payload: %d system calls, want %d", tc.gather, tc.size, snd.ioCalls, tc.calls)
		}
		e, data, err := recvMessage(rcv)
		if err != nil {
			t.Fatal(err)
		}
		if e.Step != 3 || e.Size != int64(tc.size) {
			t.Fatalf("gather %v: header %+v, want step 3 of %d bytes", tc.gather, e, tc.size)
		}
		if !bytes.Equal(data, msg) {
			t.Errorf("gather %v, %d bytes: wrong payload", tc.gather, tc.size)
		}
	}
	for _, tc := range []struct {
		env  string
		want bool
	}{{"", true}, {"0", false}, {"1", true}} {
		t.Setenv("TWINCCL_SOCKET_GATHER", tc.env)
		if got := SocketOptionsFromEnv().Gather; got != tc.want {
			t.Errorf("TWINCCL_SOCKET_GATHER=%q: gather %v, want %v", tc.env, got, tc.want)
		}
	}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// TestInlineCommPeerGone: when the peer's socket closes, a pending
// receive ends with an error that names the peer (rank 7), through the
// waiter's wake-up as well as through Test, and later requests fail at
// once; a send into the closed connection fails too (no SIGPIPE).
func TestInlineCommPeerGone(t *testing.T) {
	checkGoroutines(t)
	snd, rcv := inlinePair(t)
	wake := make(chan struct{}, 1)
	rcv.SetWake(func() { notify(wake) })
	var hdr [HeaderSize]byte
	r, err := rcv.IrecvHeader(hdr[:])
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := r.Test(); done {
		t.Fatal("a header arrived from a sender that sent nothing")
	}
	if err := snd.Close(); err != nil {
		t.Fatal(err)
	}
	err = waitReq(r, rcv, wake, "header from a closed sender")
	if err == nil || !strings.Contains(err.Error(), "rank 7") {
		t.Fatalf("pending receive after the peer closed: %v, want an error naming rank 7", err)
	}
	r2, err := rcv.Irecv(make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	if done, err2 := r2.Test(); !done || err2 == nil {
		t.Fatalf("receive after the failure: done %v, error %v; want a failure at once", done, err2)
	}

	// The other direction: the receiver goes away, the sender's writes fail.
	snd2, rcv2 := inlinePair(t)
	rcv2.Close()
	big := make([]byte, 32<<20)
	var failed error
	for i := 0; i < 4 && failed == nil; i++ {
		r, err := snd2.Isend(hdr[:], big)
		if err != nil {
			failed = err
			break
		}
		failed = waitReq(r, nil, nil, "send to a closed receiver")
	}
	if failed == nil || !strings.Contains(failed.Error(), "rank 7") {
		t.Fatalf("sending to a closed receiver: %v, want an error naming rank 7", failed)
	}
}

// TestInlineCommClose: Close ends the requests still queued with an
// error, returns although the waiter was parked on the socket, and
// refuses new requests.
func TestInlineCommClose(t *testing.T) {
	checkGoroutines(t)
	_, rcv := inlinePair(t)
	var hdr [HeaderSize]byte
	r, err := rcv.IrecvHeader(hdr[:])
	if err != nil {
		t.Fatal(err)
	}
	r.Test()
	rcv.ArmWake()
	closed := make(chan error, 1)
	go func() { closed <- rcv.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs while the waiter is parked on the socket")
	}
	done, err := r.Test()
	if !done || !errors.Is(err, errInlineClosed) {
		t.Fatalf("queued request after Close: done %v, error %v; want errInlineClosed", done, err)
	}
	if _, err := rcv.Irecv(make([]byte, 1)); err == nil {
		t.Fatal("a request was taken after Close")
	}
}

// TestSocketModesInteroperate: over one socket the bytes of a message
// are the same with helpers or without, so a sender with helpers and a
// receiver without (and the other way round) understand each other.
func TestSocketModesInteroperate(t *testing.T) {
	checkGoroutines(t)
	for _, inlineSender := range []bool{false, true} {
		a, b := tcpPair(t)
		opt := SocketOptions{NThreads: 1, NSocksPerThread: 1, MinChunk: 64 << 10}
		inline := SocketOptions{NThreads: 0, NSocksPerThread: 1, MinChunk: 64 << 10}
		so, ro := opt, inline
		if inlineSender {
			so, ro = inline, opt
		}
		snd, err := openSockComm([]net.Conn{a}, so, 3, true)
		if err != nil {
			t.Fatal(err)
		}
		rcv, err := openSockComm([]net.Conn{b}, ro, 3, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := snd.(*inlineComm); ok != inlineSender {
			t.Fatalf("sender options %+v gave a %T", so, snd)
		}
		msg := bytes.Repeat([]byte("twinccl"), 100000)
		var hdr, got [HeaderSize]byte
		putHeader(hdr[:], FifoEntry{Size: int64(len(msg)), Wire: int64(len(msg)), Step: 9, Steps: 1})
		sr, err := snd.Isend(hdr[:], msg)
		if err != nil {
			t.Fatal(err)
		}
		hr, err := rcv.IrecvHeader(got[:])
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, len(msg))
		pr, err := rcv.Irecv(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []Request{sr, hr, pr} {
			if err := waitReq(r, nil, nil, "interoperating transfer"); err != nil {
				t.Fatal(err)
			}
		}
		if got != hdr || !bytes.Equal(data, msg) {
			t.Fatalf("inline sender %v: the message changed on the way", inlineSender)
		}
		snd.Close()
		rcv.Close()
	}
}

// BenchmarkInlineCommRoundTrip times a round trip of a small message
// (a header and a 64-byte payload each way, both sides polling) over two
// loopback connections without helpers, with header and payload gathered
// into one system call and without, and with a receive read-ahead buffer:
// compare the sub-benchmarks' ns/op on the same host.
func BenchmarkInlineCommRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		gather bool
		ahead  int
	}{{false, 0}, {true, 0}, {true, 4096}} {
		b.Run(fmt.Sprintf("gather=%v,readahead=%d", tc.gather, tc.ahead), func(b *testing.B) {
			aOut, bIn := inlinePair(b)
			bOut, aIn := inlinePair(b)
			aOut.gather, bOut.gather = tc.gather, tc.gather
			if tc.ahead > 0 {
				aIn.ahead, bIn.ahead = make([]byte, tc.ahead), make([]byte, tc.ahead)
			}
			payload := make([]byte, 64)
			hop := func(out, in *inlineComm, step int) error {
				var hdr [HeaderSize]byte
				putHeader(hdr[:], FifoEntry{Size: int64(len(payload)), Wire: int64(len(payload)), Step: int64(step), Steps: 1})
				r, err := out.Isend(hdr[:], payload)
				if err != nil {
					return err
				}
				if _, _, err := recvMessage(in); err != nil {
					return err
				}
				return waitReq(r, nil, nil, "send")
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := hop(aOut, bIn, i); err != nil {
					b.Fatal(err)
				}
				if err := hop(bOut, aIn, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestInlineRequestEndsWithItsTest: the Test that reports a request done
// ends it (the plugin reuses it for the next transfer, so that a message
// allocates nothing); testing it again is an error, not a hang on a
// request that no queue will move.
func TestInlineRequestEndsWithItsTest(t *testing.T) {
	checkGoroutines(t)
	snd, rcv := inlinePair(t)
	var hdr [HeaderSize]byte
	putHeader(hdr[:], FifoEntry{Size: 8, Wire: 8, Step: 0, Steps: 1})
	r, err := snd.Isend(hdr[:], make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReq(r, nil, nil, "send"); err != nil {
		t.Fatal(err)
	}
	if done, err := r.Test(); !done || !errors.Is(err, errEnded) {
		t.Fatalf("a Test after the one that reported the send done: done %v, error %v; want errEnded", done, err)
	}
	if _, _, err := recvMessage(rcv); err != nil {
		t.Fatal(err)
	}
	// The next transfer reuses the request, which works as new.
	r2, err := snd.Isend(hdr[:], make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	if r2 != r {
		t.Errorf("the second send got a new request: the ended one was not reused")
	}
	if err := waitReq(r2, nil, nil, "second send"); err != nil {
		t.Fatal(err)
	}
}

// TestReadAhead: with a read-ahead buffer, the receiver takes a small
// message that arrived whole (header and payload sent in one call) with
// one read, and a run of messages of every size (empty, small, larger than
// the buffer, and small ones sent before the receiver asked, so that one
// read holds parts of several) arrives byte for byte, through polling and
// through the waiter's wake-ups; the environment sets it.
func TestReadAhead(t *testing.T) {
	checkGoroutines(t)
	const ahead = 4096
	small := []int{0, 8, 48, 3, 0, 129, 16, 1000}
	sizes := []int{0, 8, 48, 4096 - HeaderSize, 4096, 5000, 100000, 16, 0, 3, 3 << 20, 129}
	for _, poll := range []bool{true, false} {
		snd, rcv := inlinePair(t)
		rcv.ahead = make([]byte, ahead)
		recvWake := make(chan struct{}, 1)
		rcv.SetWake(func() { notify(recvWake) })
		wake := blockOn(recvWake, poll)
		// send sends messages first, first+1, ... of the sizes in a
		// goroutine (a large one blocks until the receiver drains it)
		send := func(first int, sizes []int) <-chan error {
			errc := make(chan error, 1)
			go func() {
				for k, size := range sizes {
					var hdr [HeaderSize]byte
					putHeader(hdr[:], FifoEntry{Size: int64(size), Wire: int64(size), Step: int64(first + k), Steps: 1})
					r, err := snd.Isend(hdr[:], payloadOf(first+k, size))
					if err == nil {
						err = waitReq(r, nil, nil, "send")
					}
					if err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			return errc
		}
		recv := func(i, size int) {
			t.Helper()
			var hdr [HeaderSize]byte
			r, err := rcv.IrecvHeader(hdr[:])
			if err == nil {
				err = waitReq(r, rcv, wake, "header")
			}
			if err != nil {
				t.Fatal(err)
			}
			if e := getHeader(hdr[:]); e.Step != int64(i) || e.Size != int64(size) {
				t.Fatalf("poll %v, message %d: header %+v, want step %d of %d bytes", poll, i, e, i, size)
			}
			data := make([]byte, size)
			if r, err = rcv.Irecv(data); err == nil {
				err = waitReq(r, rcv, wake, "payload")
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, payloadOf(i, size)) {
				t.Fatalf("poll %v, message %d (%d bytes): wrong payload", poll, i, size)
			}
		}
		// one small message, whole in the socket before the read
		if err := <-send(0, []int{48}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		before := rcv.ioCalls
		recv(0, 48)
		if rcv.ioCalls-before != 1 {
			t.Errorf("poll %v: a 48-byte message that arrived whole took %d reads, want 1", poll, rcv.ioCalls-before)
		}
		// small ones sent ahead of the receiver, then every size
		if err := <-send(1, small); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		for k, size := range small {
			recv(1+k, size)
		}
		errc := send(100, sizes)
		for k, size := range sizes {
			recv(100+k, size)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		env  string
		want int
	}{{"", 0}, {"4096", 4096}, {"-1", 0}, {"99999999", maxReadAhead}} {
		t.Setenv("TWINCCL_SOCKET_READAHEAD", tc.env)
		if got := SocketOptionsFromEnv().ReadAhead; got != tc.want {
			t.Errorf("TWINCCL_SOCKET_READAHEAD=%q: %d bytes, want %d", tc.env, got, tc.want)
		}
	}
}

// payloadOf is the payload of message i of size bytes, different for
// every message and byte.
func payloadOf(i, size int) []byte {
	b := make([]byte, size)
	for k := range b {
		b[k] = byte(i*31 + k*7 + k>>8)
	}
	return b
}
