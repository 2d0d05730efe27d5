package protocol_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/protocol/protocoltest"
)

// Values shared by the golden messages. Their wire forms are spelled out
// byte by byte in each test, so that a bug shared by the decoder and
// protocoltest.Encode cannot hide.
const (
	lsnA = protocol.LSN(0x0000_0001_6B37_4D48) // 1/6B374D48: 00 00 00 01 6b 37 4d 48
	lsnB = protocol.LSN(0x0000_0001_6B37_4D78) // 1/6B374D78: 00 00 00 01 6b 37 4d 78
	// ts1 is 2024-05-01 12:00:00 UTC: 00 02 ba 61 fe a1 50 00.
	ts1 = protocol.Timestamp(767880000000000)
	// ts2 is 2024-05-01 12:00:01.5 UTC: 00 02 ba 61 fe b8 33 60.
	ts2 = protocol.Timestamp(767880001500000)
)

// bs concatenates the parts of a message written out in a test: a rune
// constant like 'B' is one byte, a []byte is appended as is, and a string is
// appended as its raw bytes (C strings spell out their "\x00").
func bs(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case rune:
			if p < 0 || p > 0xff {
				panic(fmt.Sprintf("bs: %d is not a byte", p))
			}
			b = append(b, byte(p))
		case []byte:
			b = append(b, p...)
		case string:
			b = append(b, p...)
		default:
			panic(fmt.Sprintf("bs: unsupported part %T", p))
		}
	}
	return b
}

// goldenCase is one message as the server sends it and the value it must
// decode to. The want value's Streamed / WithAbortInfo field says how to
// decode it.
type goldenCase struct {
	name string
	src  []byte
	want protocol.Message
}

// blank returns a zero value of want's type with the caller-set inputs
// (Streamed, WithAbortInfo) copied over.
func blank(want protocol.Message) protocol.Message {
	v := reflect.New(reflect.TypeOf(want).Elem())
	for _, f := range []string{"Streamed", "WithAbortInfo"} {
		if src := reflect.ValueOf(want).Elem().FieldByName(f); src.IsValid() {
			v.Elem().FieldByName(f).Set(src)
		}
	}
	return v.Interface().(protocol.Message)
}

// runGolden checks, for each case, that src decodes to want (every field,
// through reflect.DeepEqual), that protocoltest.Encode(want) gives src back,
// that decoding into a value already used gives the same result, that every
// strict prefix of src is ErrShortMessage and that one extra byte is
// ErrTrailingBytes at the end of the message.
func runGolden(t *testing.T, cases []goldenCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := blank(tc.want)
			if got.Type() != protocol.MessageType(tc.src[0]) {
				t.Fatalf("Type() = %v, want %v", got.Type(), protocol.MessageType(tc.src[0]))
			}
			if err := got.Decode(tc.src); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode:\n got %#v\nwant %#v", got, tc.want)
			}
			if enc := protocoltest.Encode(tc.want); !bytes.Equal(enc, tc.src) {
				t.Errorf("protocoltest.Encode:\n got % x\nwant % x", enc, tc.src)
			}
			// Decode again into the same value: reuse must not leave
			// anything behind.
			if err := got.Decode(tc.src); err != nil {
				t.Fatalf("second Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("second Decode:\n got %#v\nwant %#v", got, tc.want)
			}
			for n := 0; n < len(tc.src); n++ {
				err := blank(tc.want).Decode(tc.src[:n])
				if !errors.Is(err, protocol.ErrShortMessage) {
					t.Errorf("Decode of the first %d bytes: got %v, want ErrShortMessage", n, err)
				}
			}
			long := append(append([]byte(nil), tc.src...), 0)
			err := blank(tc.want).Decode(long)
			var de *protocol.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, protocol.ErrTrailingBytes) || de.Offset != len(tc.src) {
				t.Errorf("Decode with one extra byte: got %v, want ErrTrailingBytes at offset %d", err, len(tc.src))
			}
		})
	}
}
