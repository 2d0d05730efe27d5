package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"unicode/utf8"
)

// Errors of the spill files. Match them with errors.Is; the returned errors
// wrap them with the file, the offset and what was being done.
var (
	// ErrSpillCorrupt: a record or header checksum does not match, a record
	// is malformed, or the file ends inside a record.
	ErrSpillCorrupt = errors.New("state: spill file corrupt")
	// ErrSpillMismatch: the header is intact but names another applier or
	// transaction, or a format version this build does not read.
	ErrSpillMismatch = errors.New("state: spill file belongs to another applier, transaction or format version")
	// ErrSpillBroken: an earlier error left the spill file in a state that
	// cannot be trusted (a failed sync, or a failed write that could not be
	// undone). Remove it and let the source send the transaction again.
	ErrSpillBroken = errors.New("state: spill file unusable after an earlier error")
)

const (
	spillMagic = "WALSPILL"
	// spillFormatVersion is the on-disk format version written in headers.
	spillFormatVersion = 1

	// spillHeaderFixed is the header size without the applier name.
	spillHeaderFixed = 8 + 2 + 2 + 4 + 2 + 4
	// spillRecordHeader is the size of a record's header: crc, length, kind,
	// subxid.
	spillRecordHeader = 4 + 4 + 1 + 4

	// maxSpillRecord bounds a record's payload. PostgreSQL cannot send a
	// message of 1 GiB or more; a longer length read from a file is a corrupt
	// file, not a reason to allocate it.
	maxSpillRecord = 1<<30 - 1

	// maxApplierNameLen bounds the name in a header (uint16 length field).
	maxApplierNameLen = 1<<16 - 1
)

// Record kinds.
const (
	recordKindMessage byte = 1 // a raw pgoutput message
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// appendSpillHeader appends the header of a spill file.
func appendSpillHeader(dst []byte, applier string, xid uint32) []byte {
	start := len(dst)
	dst = append(dst, spillMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, spillFormatVersion)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, xid)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(applier)))
	dst = append(dst, applier...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// spillHeaderSize is the size of the header for an applier name.
func spillHeaderSize(applier string) int64 {
	return int64(spillHeaderFixed + len(applier))
}

// validSpillApplier checks that an applier name fits a header.
func validSpillApplier(applier string) error {
	if applier == "" || len(applier) > maxApplierNameLen || !utf8.ValidString(applier) {
		return fmt.Errorf("state: invalid applier name %q for a spill file: want 1 to %d bytes of UTF-8", applier, maxApplierNameLen)
	}
	return nil
}

// putRecordHeader fills hdr (spillRecordHeader bytes) for a record whose
// payload is payload.
func putRecordHeader(hdr []byte, kind byte, subxid uint32, payload []byte) {
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(payload)))
	hdr[8] = kind
	binary.LittleEndian.PutUint32(hdr[9:], subxid)
	crc := crc32.Update(0, crcTable, hdr[4:spillRecordHeader])
	crc = crc32.Update(crc, crcTable, payload)
	binary.LittleEndian.PutUint32(hdr[0:], crc)
}
