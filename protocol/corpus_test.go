package protocol_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the golden seed files under testdata/fuzz")

// marshalCorpus writes fuzz arguments in the "go test fuzz v1" corpus file
// format that the go command reads from testdata/fuzz/<FuzzName>/.
func marshalCorpus(args ...any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch a := a.(type) {
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", a)
		case byte:
			fmt.Fprintf(&b, "byte(%q)\n", a)
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", a)
		default:
			panic(fmt.Sprintf("marshalCorpus: unsupported %T", a))
		}
	}
	return b.Bytes()
}

// corpusFileName turns a seed's name into a file name.
func corpusFileName(name string) string {
	return "golden-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
}

// TestFuzzCorpus checks that testdata/fuzz holds every golden seed of every
// fuzz test, in the go command's corpus format, so that plain `go test`
// runs them and `go test -fuzz` starts from them. Run with -update-corpus
// to rewrite the files after changing a golden message. Other files in the
// corpus directories (inputs the fuzzer found) are left alone.
func TestFuzzCorpus(t *testing.T) {
	want := map[string][]byte{}
	for _, ft := range fuzzTargets {
		for _, s := range ft.fuzzSeeds() {
			want[filepath.Join(ft.name, corpusFileName(s.name))] = marshalCorpus(s.args...)
		}
	}
	for _, s := range decoderSeeds() {
		want[filepath.Join("FuzzDecoder", corpusFileName(s.name))] = marshalCorpus(s.version, s.parallel, s.data)
	}
	for rel, content := range want {
		path := filepath.Join("testdata", "fuzz", rel)
		if *updateCorpus {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is missing; run go test -run TestFuzzCorpus -update-corpus", path)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) {
			t.Errorf("%s is stale; run go test -run TestFuzzCorpus -update-corpus", path)
		}
	}
}

// TestDecoderSeedsDecode checks that the FuzzDecoder seeds are valid
// transcripts, so that the fuzzer starts from messages that get deep into
// the decoders rather than from early errors.
func TestDecoderSeedsDecode(t *testing.T) {
	for _, s := range decoderSeeds() {
		d := newDecoder(t, int(s.version%4)+1, s.parallel)
		data := s.data
		for len(data) > 0 {
			n := int(data[0] &^ spilledFrame)
			msg := data[1 : 1+n]
			var err error
			if data[0]&spilledFrame != 0 {
				_, err = d.DecodeStreamedChange(msg)
			} else {
				_, err = d.Decode(msg)
			}
			if err != nil {
				t.Errorf("seed %s: %v", s.name, err)
				break
			}
			data = data[1+n:]
		}
	}
}
