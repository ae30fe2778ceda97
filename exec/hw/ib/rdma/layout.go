//go:build cgo

package rdma

/*
#include "twibv_abi.h"
#include "twibv_layout.h"

static int twibvLayoutLen(void) { return (int)(sizeof(twibvLayout) / sizeof(twibvLayout[0])); }
static const char* twibvLayoutName(int i) { return twibvLayout[i].name; }
static long long twibvLayoutValue(int i) { return twibvLayout[i].value; }
static long long twibvLayoutSize(int i) { return twibvLayout[i].size; }
*/
import "C"

// abiEntry is a row of twibv_layout.h's table: a size, a field's offset
// and size, or a constant's value (size 0).
type abiEntry struct{ value, size int64 }

// abiLayout is twibv_layout.h's table as the C compiler sees
// twibv_abi.h, by name: sizes ("sizeof(struct ibv_wc)"), fields
// ("ibv_wc.qp_num", "ibv_send_wr.wr.atomic.rkey"), verbs_context fields
// with their distance from its end ("verbs_context.end-query_port") and
// constants ("IBV_QP_STATE"). layout_test.go checks it against
// rdma-core's verbs.h.
func abiLayout() map[string]abiEntry {
	n := int(C.twibvLayoutLen())
	m := make(map[string]abiEntry, n)
	for i := 0; i < n; i++ {
		m[C.GoString(C.twibvLayoutName(C.int(i)))] = abiEntry{int64(C.twibvLayoutValue(C.int(i))), int64(C.twibvLayoutSize(C.int(i)))}
	}
	return m
}
