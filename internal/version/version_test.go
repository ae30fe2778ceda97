package version

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLine(t *testing.T) {
	l := Line("replay", "0123456789ab+modified")
	assert.True(t, strings.HasPrefix(l, "replay (github.com/twinccl/twinccl) "), l)
	assert.Contains(t, l, "revision 0123456789ab+modified")
	assert.Contains(t, l, "NCCL "+NCCL+" model")
	assert.Equal(t, "abc", Revision("abc"), "a stamp wins over the VCS stamp")
}
