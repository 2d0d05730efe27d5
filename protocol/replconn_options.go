package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// StreamOptions are the pgoutput options of START_REPLICATION.
type StreamOptions struct {
	// ProtoVersion is the pgoutput protocol version, 1 to 4; 0 picks the
	// highest the server supports (1 on PostgreSQL 10-13, 2 on 14, 3 on 15,
	// 4 on 16 and later).
	ProtoVersion int
	// Publications to stream; at least one.
	Publications []string
	// Binary asks for binary column values where the type has a binary
	// send function (PostgreSQL 14+).
	Binary bool
	// Messages asks for pg_logical_emit_message output (PostgreSQL 14+).
	Messages bool
	// Streaming is "off" (or ""), "on" (protocol 2+, PostgreSQL 14+) or
	// "parallel" (protocol 4+, PostgreSQL 16+).
	Streaming string
	// TwoPhase decodes prepared transactions at PREPARE (protocol 3+,
	// PostgreSQL 15+).
	TwoPhase bool
	// Origin is "" (server default), "any" or "none" (PostgreSQL 16+; before
	// 16 every change is sent, which is what "any" means, so "any" is then
	// simply not sent).
	Origin string
}

// ErrUnsupported is matched (errors.Is) by every *UnsupportedError.
var ErrUnsupported = errors.New("protocol: not supported by the source or the protocol version")

// UnsupportedError says that a requested option needs a newer server or a
// higher protocol version than the one at hand. It is returned before
// anything is sent, so the request can be corrected.
type UnsupportedError struct {
	Option string // what was asked for, e.g. `streaming "parallel"`
	Need   string // e.g. "PostgreSQL 16 or later"
	Have   string // e.g. "source is 15.18"
	Hint   string // what to do instead
}

func (e *UnsupportedError) Error() string {
	s := "protocol: " + e.Option + " needs " + e.Need + " (" + e.Have + ")"
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// serverMaxProto is the highest pgoutput protocol version a server has.
func serverMaxProto(serverVersion int) int {
	switch {
	case serverVersion >= 160000:
		return 4
	case serverVersion >= 150000:
		return 3
	case serverVersion >= 140000:
		return 2
	default:
		return 1
	}
}

// protoMinServer is the first server version with a protocol version.
var protoMinServer = [...]int{1: 100000, 2: 140000, 3: 150000, 4: 160000}

// startPlan is what StartReplication sends and what the decoder must expect.
type startPlan struct {
	pluginArgs []string // "name 'value'" each
	decoder    DecoderOptions
}

// planStart validates o against a server version and builds the plugin
// options. It is pure so that every combination is table-tested; the rules
// come from pgoutput_startup and parse_output_parameters in pgoutput.c.
func planStart(serverVersion int, o StreamOptions) (startPlan, error) {
	have := "source is " + versionString(serverVersion)
	if serverVersion < 100000 {
		return startPlan{}, &UnsupportedError{Option: "logical replication with pgoutput", Need: "PostgreSQL 10 or later", Have: have}
	}
	proto := o.ProtoVersion
	switch {
	case proto == 0:
		proto = serverMaxProto(serverVersion)
	case proto < 0 || proto > 4:
		return startPlan{}, fmt.Errorf("protocol: protocol version %d does not exist: pgoutput has versions 1 to 4", proto)
	case serverVersion < protoMinServer[proto]:
		return startPlan{}, &UnsupportedError{
			Option: "protocol version " + strconv.Itoa(proto),
			Need:   "PostgreSQL " + strconv.Itoa(protoMinServer[proto]/10000) + " or later", Have: have,
			Hint: "use --protocol-version " + strconv.Itoa(serverMaxProto(serverVersion)) + " or leave it unset"}
	}
	// needs checks one requirement: a server version and a protocol version.
	needs := func(option string, minServer, minProto int, hint string) error {
		if serverVersion < minServer {
			return &UnsupportedError{Option: option, Need: "PostgreSQL " + strconv.Itoa(minServer/10000) + " or later", Have: have, Hint: hint}
		}
		if proto < minProto {
			return &UnsupportedError{Option: option, Need: "protocol version " + strconv.Itoa(minProto) + " or later",
				Have: "asked for protocol version " + strconv.Itoa(proto), Hint: "raise --protocol-version or leave it unset"}
		}
		return nil
	}

	if len(o.Publications) == 0 {
		return startPlan{}, errors.New("protocol: no publication given: name at least one")
	}
	var pubs strings.Builder
	seen := make(map[string]bool, len(o.Publications))
	for i, p := range o.Publications {
		if err := validatePublicationName(p); err != nil {
			return startPlan{}, err
		}
		if seen[p] {
			return startPlan{}, fmt.Errorf("protocol: publication %q given twice", p)
		}
		seen[p] = true
		if i > 0 {
			pubs.WriteByte(',')
		}
		// pgoutput splits the list with SplitIdentifierString: each name is
		// quoted like an SQL identifier, so commas, spaces, upper case and
		// quotes in names survive.
		pubs.WriteString(quoteIdent(p))
	}

	args := []string{
		"proto_version " + quoteLiteral(strconv.Itoa(proto)),
		"publication_names " + quoteLiteral(pubs.String()),
	}
	if o.Binary {
		if err := needs("binary", 140000, 1, "leave out --binary"); err != nil {
			return startPlan{}, err
		}
		args = append(args, "binary 'true'")
	}
	if o.Messages {
		if err := needs("messages", 140000, 1, "leave out --messages"); err != nil {
			return startPlan{}, err
		}
		args = append(args, "messages 'true'")
	}
	dec := DecoderOptions{ProtoVersion: proto}
	switch o.Streaming {
	case "", "off":
		// Off is the default on every version; an older server does not
		// know the option at all.
	case "on":
		if err := needs(`streaming "on"`, 140000, 2, "use --streaming off"); err != nil {
			return startPlan{}, err
		}
		args = append(args, "streaming 'on'")
	case "parallel":
		hint := "use --streaming on"
		if serverVersion < 140000 {
			hint = "use --streaming off"
		}
		if err := needs(`streaming "parallel"`, 160000, 4, hint); err != nil {
			return startPlan{}, err
		}
		args = append(args, "streaming 'parallel'")
		dec.StreamingParallel = true
	default:
		return startPlan{}, fmt.Errorf("protocol: streaming %q: want off, on or parallel", o.Streaming)
	}
	if o.TwoPhase {
		if err := needs("two-phase decoding", 150000, 3, "leave out --two-phase"); err != nil {
			return startPlan{}, err
		}
		args = append(args, "two_phase 'true'")
	}
	switch strings.ToLower(o.Origin) {
	case "":
	case "any":
		if serverVersion >= 160000 {
			args = append(args, "origin 'any'")
		}
	case "none":
		if err := needs(`origin "none"`, 160000, 1, "leave --origin unset"); err != nil {
			return startPlan{}, err
		}
		args = append(args, "origin 'none'")
	default:
		return startPlan{}, fmt.Errorf("protocol: origin %q: want any or none", o.Origin)
	}
	return startPlan{pluginArgs: args, decoder: dec}, nil
}

// validatePublicationName rejects names PostgreSQL could not have created:
// empty, longer than 63 bytes (the server would silently truncate them and
// stream a different publication) or containing NUL.
func validatePublicationName(p string) error {
	switch {
	case p == "":
		return errors.New("protocol: empty publication name")
	case len(p) > 63:
		return fmt.Errorf("protocol: publication name %q is longer than 63 bytes", p)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("protocol: publication name %q contains a NUL byte", p)
	}
	return nil
}
