package twophase

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mode selects how the GID of a prepared transaction on the target is chosen
// for a source transaction prepared with two-phase decoding.
type Mode int

const (
	// GIDModeApplier (the default) derives the target GID from the applier's
	// name and the source xid, like PostgreSQL's subscriber derives
	// pg_gid_<subid>_<xid>: "walapply_<applier>_<xid>". Source GIDs are
	// chosen by the source's clients and can collide on a target shared by
	// several appliers, or with the target's own prepared transactions; a
	// name derived from the applier cannot.
	GIDModeApplier Mode = iota
	// GIDModeSource keeps the source GID, for tools that look for the
	// prepared transaction by the name its client gave it. The operator
	// guarantees that no other applier or client on the target prepares
	// the same GID.
	GIDModeSource
)

// String returns the mode's name as ParseMode accepts it.
func (m Mode) String() string {
	switch m {
	case GIDModeApplier:
		return "applier"
	case GIDModeSource:
		return "source"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses a mode name: "applier" or "source".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "applier":
		return GIDModeApplier, nil
	case "source":
		return GIDModeSource, nil
	}
	return 0, fmt.Errorf("twophase: unknown GID mode %q: want \"applier\" or \"source\"", s)
}

// GIDSize is PostgreSQL's GIDSIZE: a GID takes at most GIDSize-1 bytes, the
// last byte of its buffer holding the terminating NUL.
const GIDSize = 200

// MaxGIDLen is the longest GID PostgreSQL accepts, in bytes.
const MaxGIDLen = GIDSize - 1

// GIDPrefix starts every GID of GIDModeApplier.
const GIDPrefix = "walapply_"

// ErrInvalidGID is wrapped by the errors of TargetGID.
var ErrInvalidGID = errors.New("twophase: invalid GID")

// TargetGID returns the GID under which the source transaction xid, prepared
// on the source as sourceGID, is prepared on the target.
//
// In GIDModeApplier the GID is GIDPrefix + applier + "_" + xid in decimal;
// since the xid has no underscore, the applier name and xid can be read back
// unambiguously (ParseTargetGID). sourceGID is not used. An applier name too
// long for the result to fit MaxGIDLen bytes is an error rather than a
// hashed name, so that an operator can always read the applier and xid off
// pg_prepared_xacts (applier names are far shorter in practice: origin names
// limit them to 54 bytes).
//
// In GIDModeSource the GID is sourceGID; xid and applier are not used.
//
// Either way the GID must be valid UTF-8 without NUL bytes and at most
// MaxGIDLen bytes long.
func TargetGID(mode Mode, applier string, xid uint32, sourceGID string) (string, error) {
	var gid string
	switch mode {
	case GIDModeApplier:
		if applier == "" {
			return "", fmt.Errorf("%w: the applier name is empty", ErrInvalidGID)
		}
		if xid == 0 {
			return "", fmt.Errorf("%w: xid 0 is not a valid transaction id", ErrInvalidGID)
		}
		gid = GIDPrefix + applier + "_" + strconv.FormatUint(uint64(xid), 10)
	case GIDModeSource:
		gid = sourceGID
	default:
		return "", fmt.Errorf("%w: unknown GID mode %d", ErrInvalidGID, int(mode))
	}
	if err := ValidGID(gid); err != nil {
		return "", err
	}
	return gid, nil
}

// ValidGID checks that PostgreSQL accepts gid as the name of a prepared
// transaction on a UTF-8 connection: valid UTF-8, no NUL byte, at most
// MaxGIDLen bytes.
func ValidGID(gid string) error {
	if len(gid) > MaxGIDLen {
		return fmt.Errorf("%w: %q has %d bytes, PostgreSQL takes at most %d", ErrInvalidGID, gid, len(gid), MaxGIDLen)
	}
	if strings.IndexByte(gid, 0) >= 0 {
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidGID, gid)
	}
	if !utf8.ValidString(gid) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidGID, gid)
	}
	return nil
}

// ParseTargetGID reports whether gid is a GIDModeApplier GID of applier, and
// if so, the source xid it was derived from. Restart recovery uses it to pick
// this applier's transactions out of pg_prepared_xacts.
func ParseTargetGID(applier, gid string) (xid uint32, ok bool) {
	digits, ok := strings.CutPrefix(gid, GIDPrefix+applier+"_")
	if !ok || applier == "" || digits == "" || digits[0] == '0' {
		return 0, false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(v), true
}

// QuoteGID returns gid as an SQL string literal for PREPARE TRANSACTION,
// COMMIT PREPARED and ROLLBACK PREPARED, which take the GID only as a literal,
// never as a parameter (DESIGN.md invariant 7).
//
// The literal is an escape string, E'...', in which backslashes are escapes
// whatever standard_conforming_strings says: each backslash is written as
// two, each quote as two quotes (never as \', which backslash_quote may
// forbid). Other bytes are copied as they are, which is safe on a connection
// whose client_encoding is UTF8 (pgx's default): no byte of a multibyte UTF-8
// character is a quote or a backslash. A NUL byte, which no GID can contain,
// is written as the escape \000, which the server rejects with an error,
// rather than passed on raw where it would end the query text early.
func QuoteGID(gid string) string {
	var b strings.Builder
	b.Grow(len(gid) + 3)
	b.WriteString("E'")
	for i := 0; i < len(gid); i++ {
		switch c := gid[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`''`)
		case 0:
			b.WriteString(`\000`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
