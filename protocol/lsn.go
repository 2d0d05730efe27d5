package protocol

import (
	"fmt"
	"time"
)

// LSN is a WAL position (XLogRecPtr). Its text form is "X/Y", the high and
// low 32 bits in hexadecimal.
type LSN uint64

// InvalidLSN is the zero position, which the protocol uses for "not set".
const InvalidLSN LSN = 0

// String formats the LSN as PostgreSQL does ("16/B374D848").
func (l LSN) String() string {
	return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l))
}

// ParseLSN parses the "X/Y" text form.
func ParseLSN(s string) (LSN, error) {
	var hi, lo uint32
	var rest string
	n, err := fmt.Sscanf(s, "%X/%X%s", &hi, &lo, &rest)
	if n != 2 || (err != nil && rest != "") {
		return 0, fmt.Errorf("protocol: invalid LSN %q: want the form X/Y in hexadecimal", s)
	}
	return LSN(uint64(hi)<<32 | uint64(lo)), nil
}

// Timestamp is a PostgreSQL TimestampTz on the wire: microseconds since
// 2000-01-01 00:00:00 UTC.
type Timestamp int64

// postgresEpochUnixMicros is 2000-01-01 00:00:00 UTC in Unix microseconds.
const postgresEpochUnixMicros = 946684800000000

// Time converts the timestamp to a time.Time in UTC.
func (t Timestamp) Time() time.Time {
	return time.UnixMicro(int64(t) + postgresEpochUnixMicros).UTC()
}

// TimestampFromTime converts a time.Time to the wire form.
func TimestampFromTime(t time.Time) Timestamp {
	return Timestamp(t.UnixMicro() - postgresEpochUnixMicros)
}
