package commsmeta

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTripAndChecks(t *testing.T) {
	comms := []Comm{{ID: 0xb2, Ranks: []int32{3, 1}}, {ID: 0x1f, Name: "tp0", Ranks: []int32{0, 2}}}
	s, err := Encode(comms)
	require.NoError(t, err)
	require.Equal(t, `[{"comm":"0x1f","name":"tp0","ranks":[0,2]},{"comm":"0xb2","ranks":[3,1]}]`, s)
	back, err := Decode(s)
	require.NoError(t, err)
	require.Equal(t, []Comm{comms[1], comms[0]}, back)
	for _, tc := range []struct{ in, want string }{
		{`[{"comm":"x","ranks":[0]}]`, `id "x" is not a number`},
		{`[{"comm":"0x1","ranks":[0]},{"comm":"1","ranks":[1]}]`, "communicator 0x1 listed twice"},
		{`[{"comm":"0x1","ranks":[]}]`, "no ranks"},
		{`[{"comm":"0x1","ranks":[0,-1]}]`, "rank 1: global rank -1"},
		{`[{"comm":"0x1","ranks":[4,4]}]`, "ranks 0 and 1 are both global rank 4"},
		{`{`, Key},
	} {
		_, err := Decode(tc.in)
		require.ErrorContains(t, err, tc.want, tc.in)
	}
}

// FuzzDecode: any metadata value decodes or gives an error; what decodes
// encodes back to what decodes the same.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`[{"comm":"0x1f","name":"tp0","ranks":[0,2]}]`, `[]`, `[{"comm":"7","ranks":[1,1]}]`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		comms, err := Decode(s)
		if err != nil {
			return
		}
		enc, err := Encode(comms)
		require.NoError(t, err)
		back, err := Decode(enc)
		require.NoError(t, err)
		require.ElementsMatch(t, comms, back)
	})
}
