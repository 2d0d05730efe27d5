package engine

import "testing"

func TestAppendMask(t *testing.T) {
	for _, tc := range []struct {
		n    int
		bits []int
		want []byte
	}{
		{0, nil, nil},
		{3, []int{0, 2}, []byte{0b101}},
		{8, []int{7}, []byte{0x80}},
		{9, []int{0, 8}, []byte{0x01, 0x01}},
	} {
		set := map[int]bool{}
		for _, b := range tc.bits {
			set[b] = true
		}
		got := appendMask(nil, tc.n, func(i int) bool { return set[i] })
		if string(got) != string(tc.want) {
			t.Errorf("n=%d bits=%v: got %08b want %08b", tc.n, tc.bits, got, tc.want)
		}
	}
}
