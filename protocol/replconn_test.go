package protocol

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateSlotName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"walapply", true},
		{"a_1", true},
		{"_", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"Upper", false},
		{"has-dash", false},
		{"sp ace", false},
		{`x"; DROP TABLE t; --`, false},
		{"x (TWO_PHASE)", false},
		{"é", false},
		{"a\x00", false},
	} {
		err := ValidateSlotName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateSlotName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestCreateSlotSQL(t *testing.T) {
	for _, tc := range []struct {
		version int
		o       SlotOptions
		want    string // "" means an error is expected
	}{
		{150018, SlotOptions{}, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput"},
		{150018, SlotOptions{TwoPhase: true, Snapshot: "nothing"}, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (TWO_PHASE true, SNAPSHOT 'nothing')"},
		{180004, SlotOptions{Temporary: true, Snapshot: "export"}, "CREATE_REPLICATION_SLOT s TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')"},
		{180004, SlotOptions{Snapshot: "use"}, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'use')"},
		{140010, SlotOptions{Snapshot: "nothing"}, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput NOEXPORT_SNAPSHOT"},
		{140010, SlotOptions{Snapshot: "use", Temporary: true}, "CREATE_REPLICATION_SLOT s TEMPORARY LOGICAL pgoutput USE_SNAPSHOT"},
		{140010, SlotOptions{TwoPhase: true}, ""},
		{170006, SlotOptions{Failover: true, Snapshot: "nothing"}, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (FAILOVER true, SNAPSHOT 'nothing')"},
		{180004, SlotOptions{TwoPhase: true, Failover: true, Snapshot: "export"}, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (TWO_PHASE true, FAILOVER true, SNAPSHOT 'export')"},
		{160010, SlotOptions{Failover: true}, ""},
		{140010, SlotOptions{Failover: true}, ""},
		{180004, SlotOptions{Snapshot: "export'); DROP"}, ""},
	} {
		got, err := createSlotSQL(tc.version, "s", tc.o)
		if tc.want == "" {
			if err == nil {
				t.Errorf("createSlotSQL(%d, %+v) = %q, want an error", tc.version, tc.o, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("createSlotSQL(%d, %+v) = %q, %v; want %q", tc.version, tc.o, got, err, tc.want)
		}
	}
}

func TestParseServerVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"15.18 (Debian 15.18-0+deb12u1)", 150018},
		{"18.4", 180004},
		{"16.14", 160014},
		{"19devel", 190000},
		{"17beta1", 170000},
		{"9.6.24", 90624},
		{"10.23", 100023},
	} {
		got, err := parseServerVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseServerVersion(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if tc.want >= 100000 && !strings.Contains(tc.in, "devel") && !strings.Contains(tc.in, "beta") && !strings.HasPrefix(tc.in, versionString(got)) {
			t.Errorf("versionString(%d) = %q, not a prefix of %q", got, versionString(got), tc.in)
		}
	}
	for _, bad := range []string{"", "devel", "x.y"} {
		if v, err := parseServerVersion(bad); err == nil {
			t.Errorf("parseServerVersion(%q) = %d, want an error", bad, v)
		}
	}
}

// TestPlanStart runs every option request against every server generation
// that behaves differently.
func TestPlanStart(t *testing.T) {
	pub := []string{"p"}
	type want struct {
		args  string // the plugin option list; "" when an error is expected
		err   string // a substring of the error
		proto int
		par   bool
	}
	cases := []struct {
		name    string
		version int
		o       StreamOptions
		want    want
	}{
		// Protocol version choice.
		{"pg13 default", 130015, StreamOptions{Publications: pub}, want{args: "proto_version '1', publication_names '\"p\"'", proto: 1}},
		{"pg14 default", 140010, StreamOptions{Publications: pub}, want{args: "proto_version '2', publication_names '\"p\"'", proto: 2}},
		{"pg15 default", 150018, StreamOptions{Publications: pub}, want{args: "proto_version '3', publication_names '\"p\"'", proto: 3}},
		{"pg16 default", 160014, StreamOptions{Publications: pub}, want{args: "proto_version '4', publication_names '\"p\"'", proto: 4}},
		{"pg18 default", 180004, StreamOptions{Publications: pub}, want{args: "proto_version '4', publication_names '\"p\"'", proto: 4}},
		{"pg18 proto 1", 180004, StreamOptions{ProtoVersion: 1, Publications: pub}, want{args: "proto_version '1', publication_names '\"p\"'", proto: 1}},
		{"pg15 proto 4", 150018, StreamOptions{ProtoVersion: 4, Publications: pub}, want{err: "protocol version 4 needs PostgreSQL 16 or later (source is 15.18); use --protocol-version 3"}},
		{"pg14 proto 3", 140010, StreamOptions{ProtoVersion: 3, Publications: pub}, want{err: "protocol version 3 needs PostgreSQL 15 or later (source is 14.10)"}},
		{"pg13 proto 2", 130015, StreamOptions{ProtoVersion: 2, Publications: pub}, want{err: "protocol version 2 needs PostgreSQL 14 or later"}},
		{"proto 5", 180004, StreamOptions{ProtoVersion: 5, Publications: pub}, want{err: "protocol version 5 does not exist"}},
		{"proto -1", 180004, StreamOptions{ProtoVersion: -1, Publications: pub}, want{err: "protocol version -1 does not exist"}},
		{"pg9.6", 90624, StreamOptions{Publications: pub}, want{err: "needs PostgreSQL 10 or later (source is 9.6.24)"}},

		// Publications.
		{"no publication", 180004, StreamOptions{}, want{err: "no publication"}},
		{"empty publication", 180004, StreamOptions{Publications: []string{"a", ""}}, want{err: "empty publication name"}},
		{"duplicate publication", 180004, StreamOptions{Publications: []string{"a", "a"}}, want{err: "given twice"}},
		{"long publication", 180004, StreamOptions{Publications: []string{strings.Repeat("p", 64)}}, want{err: "longer than 63"}},
		{"NUL publication", 180004, StreamOptions{Publications: []string{"a\x00b"}}, want{err: "NUL"}},
		{"publications quoted", 150018, StreamOptions{Publications: []string{"a", `We"ird, 'one'`, "ü"}},
			want{args: `proto_version '3', publication_names '"a","We""ird, ''one''","ü"'`, proto: 3}},

		// binary and messages.
		{"pg14 binary messages", 140010, StreamOptions{Publications: pub, Binary: true, Messages: true},
			want{args: "proto_version '2', publication_names '\"p\"', binary 'true', messages 'true'", proto: 2}},
		{"pg18 proto 1 binary", 180004, StreamOptions{ProtoVersion: 1, Publications: pub, Binary: true},
			want{args: "proto_version '1', publication_names '\"p\"', binary 'true'", proto: 1}},
		{"pg13 binary", 130015, StreamOptions{Publications: pub, Binary: true}, want{err: "binary needs PostgreSQL 14 or later (source is 13.15); leave out --binary"}},
		{"pg13 messages", 130015, StreamOptions{Publications: pub, Messages: true}, want{err: "messages needs PostgreSQL 14 or later"}},

		// streaming.
		{"off explicit", 150018, StreamOptions{Publications: pub, Streaming: "off"}, want{args: "proto_version '3', publication_names '\"p\"'", proto: 3}},
		{"pg14 on", 140010, StreamOptions{Publications: pub, Streaming: "on"}, want{args: "proto_version '2', publication_names '\"p\"', streaming 'on'", proto: 2}},
		{"pg15 on", 150018, StreamOptions{Publications: pub, Streaming: "on"}, want{args: "proto_version '3', publication_names '\"p\"', streaming 'on'", proto: 3}},
		{"pg13 on", 130015, StreamOptions{Publications: pub, Streaming: "on"}, want{err: `streaming "on" needs PostgreSQL 14 or later`}},
		{"pg18 proto 1 on", 180004, StreamOptions{ProtoVersion: 1, Publications: pub, Streaming: "on"}, want{err: `streaming "on" needs protocol version 2 or later (asked for protocol version 1)`}},
		{"pg15 parallel", 150018, StreamOptions{Publications: pub, Streaming: "parallel"},
			want{err: `protocol: streaming "parallel" needs PostgreSQL 16 or later (source is 15.18); use --streaming on`}},
		{"pg13 parallel", 130015, StreamOptions{Publications: pub, Streaming: "parallel"}, want{err: "use --streaming off"}},
		{"pg16 parallel", 160014, StreamOptions{Publications: pub, Streaming: "parallel"},
			want{args: "proto_version '4', publication_names '\"p\"', streaming 'parallel'", proto: 4, par: true}},
		{"pg18 proto 3 parallel", 180004, StreamOptions{ProtoVersion: 3, Publications: pub, Streaming: "parallel"},
			want{err: `streaming "parallel" needs protocol version 4 or later (asked for protocol version 3)`}},
		{"pg18 proto 2 on", 180004, StreamOptions{ProtoVersion: 2, Publications: pub, Streaming: "on"},
			want{args: "proto_version '2', publication_names '\"p\"', streaming 'on'", proto: 2}},
		{"bad streaming", 180004, StreamOptions{Publications: pub, Streaming: "yes"}, want{err: `streaming "yes": want off, on or parallel`}},

		// two-phase.
		{"pg15 two-phase", 150018, StreamOptions{Publications: pub, TwoPhase: true},
			want{args: "proto_version '3', publication_names '\"p\"', two_phase 'true'", proto: 3}},
		{"pg14 two-phase", 140010, StreamOptions{Publications: pub, TwoPhase: true}, want{err: "two-phase decoding needs PostgreSQL 15 or later (source is 14.10)"}},
		{"pg18 proto 2 two-phase", 180004, StreamOptions{ProtoVersion: 2, Publications: pub, TwoPhase: true},
			want{err: "two-phase decoding needs protocol version 3 or later"}},

		// origin.
		{"pg15 origin any", 150018, StreamOptions{Publications: pub, Origin: "any"}, want{args: "proto_version '3', publication_names '\"p\"'", proto: 3}},
		{"pg15 origin none", 150018, StreamOptions{Publications: pub, Origin: "none"}, want{err: `origin "none" needs PostgreSQL 16 or later`}},
		{"pg16 origin none", 160014, StreamOptions{Publications: pub, Origin: "NONE"}, want{args: "proto_version '4', publication_names '\"p\"', origin 'none'", proto: 4}},
		{"pg18 origin any", 180004, StreamOptions{Publications: pub, Origin: "any"}, want{args: "proto_version '4', publication_names '\"p\"', origin 'any'", proto: 4}},
		{"bad origin", 180004, StreamOptions{Publications: pub, Origin: "local"}, want{err: "want any or none"}},

		// Everything at once.
		{"pg18 all", 180004, StreamOptions{Publications: []string{"a", "b"}, Binary: true, Messages: true, Streaming: "parallel", TwoPhase: true, Origin: "none"},
			want{args: `proto_version '4', publication_names '"a","b"', binary 'true', messages 'true', streaming 'parallel', two_phase 'true', origin 'none'`, proto: 4, par: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planStart(tc.version, tc.o)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("err = %v, want one containing %q (args %q)", err, tc.want.err, plan.pluginArgs)
				}
				if !strings.HasPrefix(err.Error(), "protocol: ") {
					t.Errorf("error %q lacks the package prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(plan.pluginArgs, ", "); got != tc.want.args {
				t.Errorf("args = %s\nwant   %s", got, tc.want.args)
			}
			if plan.decoder.ProtoVersion != tc.want.proto || plan.decoder.StreamingParallel != tc.want.par {
				t.Errorf("decoder options = %+v, want proto %d parallel %v", plan.decoder, tc.want.proto, tc.want.par)
			}
		})
	}
}

func TestUnsupportedErrorIs(t *testing.T) {
	_, err := planStart(150018, StreamOptions{Publications: []string{"p"}, Streaming: "parallel"})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("errors.Is(%v, ErrUnsupported) = false", err)
	}
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Option != `streaming "parallel"` {
		t.Fatalf("errors.As: %#v", ue)
	}
	_, err = planStart(150018, StreamOptions{Publications: []string{"p"}, Streaming: "bogus"})
	if errors.Is(err, ErrUnsupported) {
		t.Fatalf("an invalid value is not an unsupported option: %v", err)
	}
}

func TestQuoting(t *testing.T) {
	if got := quoteLiteral(`it's`); got != `'it''s'` {
		t.Errorf("quoteLiteral = %s", got)
	}
	if got := quoteIdent(`a"b`); got != `"a""b"` {
		t.Errorf("quoteIdent = %s", got)
	}
}

// TestConnectErrorHidesPassword feeds malformed and unreachable connection
// strings with a password to ConnectReplication: no error may show it.
func TestConnectErrorHidesPassword(t *testing.T) {
	const pw = "s3cr%tPW"
	for _, cs := range []string{
		"postgres://u:s3cr%25tPW@127.0.0.1:notaport/db",
		"postgres://u:s3cr%tPW@127.0.0.1:1/db",
		"postgres://u:s3cr%25tPW@127.0.0.1:1/db?sslmode=bogus",
		"host=127.0.0.1 port=x password=s3cr%tPW",
		"host=127.0.0.1 port=1 password='s3cr%tPW' sslmode=disable",
		"host=127.0.0.1 port=1 password = s3cr%tPW connect_timeout=1",
		"postgres://127.0.0.1:1/db?password=s3cr%25tPW&sslmode=disable&connect_timeout=1",
		"host=127.0.0.1 port=1 password='s3cr%tPW",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5e9)
		c, err := ConnectReplication(ctx, cs)
		cancel()
		if err == nil {
			c.Close(context.Background())
			t.Errorf("%q: connected, want an error", cs)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, pw) || strings.Contains(msg, "s3cr%25tPW") || strings.Contains(msg, "s3cr") {
			t.Errorf("error shows the password: %s", msg)
		}
		if !strings.HasPrefix(msg, "protocol: ") {
			t.Errorf("error lacks context: %s", msg)
		}
	}
}

func TestParseStreamEvent(t *testing.T) {
	xlog := []byte{
		'w',
		0, 0, 0, 0x16, 0xB3, 0x74, 0xD8, 0x48, // WAL start 16/B374D848
		0, 0, 0, 0x16, 0xB3, 0x74, 0xD9, 0x00, // server WAL end 16/B374D900
		0, 0, 0, 0, 0, 0, 0, 1, // server clock: 1 µs after 2000-01-01
		'B', 1, 2, // the pgoutput message
	}
	var ev StreamEvent
	if err := parseStreamEvent(xlog, &ev); err != nil {
		t.Fatal(err)
	}
	want := StreamEvent{Kind: EventXLogData, WALStart: 0x16B374D848, ServerWALEnd: 0x16B374D900,
		ServerTime: time.Date(2000, 1, 1, 0, 0, 0, 1000, time.UTC), Data: []byte{'B', 1, 2}}
	if ev.Kind != want.Kind || ev.WALStart != want.WALStart || ev.ServerWALEnd != want.ServerWALEnd ||
		!ev.ServerTime.Equal(want.ServerTime) || string(ev.Data) != string(want.Data) || ev.ReplyRequested {
		t.Errorf("XLogData = %+v, want %+v", ev, want)
	}
	if &ev.Data[0] != &xlog[25] {
		t.Error("Data does not alias the input")
	}

	keepalive := []byte{
		'k',
		0, 0, 0, 0, 0, 0, 0x10, 0, // server WAL end 0/1000
		0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // server clock: 1 µs before 2000-01-01
		1, // reply requested
	}
	ev = StreamEvent{Data: []byte("stale"), WALStart: 7}
	if err := parseStreamEvent(keepalive, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != EventKeepalive || ev.ServerWALEnd != 0x1000 || !ev.ReplyRequested || ev.Data != nil || ev.WALStart != 0 ||
		!ev.ServerTime.Equal(time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)) {
		t.Errorf("keepalive = %+v", ev)
	}

	for name, bad := range map[string][]byte{
		"empty":               {},
		"short XLogData":      xlog[:24],
		"short keepalive":     keepalive[:17],
		"long keepalive":      append(append([]byte{}, keepalive...), 0),
		"primary status 's'":  {'s', 0, 0, 0, 0, 0, 0, 0, 0},
		"copy done byte 'c'":  {'c'},
		"unknown type byte 0": {0},
	} {
		if err := parseStreamEvent(bad, &ev); err == nil || !strings.HasPrefix(err.Error(), "protocol: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func FuzzParseStreamEvent(f *testing.F) {
	f.Add([]byte{'w', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 'B'})
	f.Add([]byte{'k', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0})
	f.Add([]byte{'s'})
	f.Fuzz(func(t *testing.T, d []byte) {
		var ev StreamEvent
		err := parseStreamEvent(d, &ev)
		if err != nil {
			return
		}
		switch ev.Kind {
		case EventXLogData:
			if d[0] != 'w' || len(ev.Data) != len(d)-25 {
				t.Fatalf("XLogData from %x: %+v", d, ev)
			}
		case EventKeepalive:
			if d[0] != 'k' || len(d) != 18 || ev.Data != nil {
				t.Fatalf("keepalive from %x: %+v", d, ev)
			}
		default:
			t.Fatalf("kind %d from %x", ev.Kind, d)
		}
	})
}

func TestEncodeStatus(t *testing.T) {
	var b [39]byte
	encodeStatus(&b, 0x16B374D848, 0x100, 0, time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC), true)
	want := []byte{
		'd', 0, 0, 0, 38, // CopyData, length 38 (itself + 34)
		'r',
		0, 0, 0, 0x16, 0xB3, 0x74, 0xD8, 0x48, // write
		0, 0, 0, 0, 0, 0, 1, 0, // flush, as given
		0, 0, 0, 0, 0, 0, 0, 0, // apply 0 stays 0 (pglogrepl would send write)
		0, 0, 0, 0, 0, 0x0F, 0x42, 0x40, // clock: 1 s = 1000000 µs after 2000-01-01
		1, // reply requested
	}
	if string(b[:]) != string(want) {
		t.Errorf("encodeStatus =\n%x\nwant\n%x", b, want)
	}
	encodeStatus(&b, 1, 1, 1, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), false)
	if b[38] != 0 {
		t.Error("reply flag stays set")
	}
}
