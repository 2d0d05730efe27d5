package state

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// SpillReader reads the records of a spill file in order, verifying the
// header and every record's checksum. It reads through a bounded buffer; a
// record larger than the buffer gets a buffer of its own size for as long as
// it is current, so memory stays bounded by the largest single message.
type SpillReader struct {
	r       *bufio.Reader
	name    string
	closer  io.Closer
	off     int64 // offset of the next record
	end     int64 // expected file size, < 0 if unknown
	records int64
	scratch []byte
	hdr     [spillRecordHeader]byte
	err     error // sticky
}

// spillHeader is a parsed spill file header.
type spillHeader struct {
	applier string
	xid     uint32
	size    int64
}

// NewSpillReader reads the spill file in r, named name in errors, and checks
// that its header names applier and xid. A file that ends exactly at a record
// boundary reads as complete; SpillDir.OpenReader also checks the size the
// writer left.
func NewSpillReader(r io.Reader, name, applier string, xid uint32) (*SpillReader, error) {
	return newSpillReader(r, name, applier, xid, -1, defaultSpillBufferSize)
}

func newSpillReader(r io.Reader, name, applier string, xid uint32, end int64, bufSize int) (*SpillReader, error) {
	sr := &SpillReader{
		r:       bufio.NewReaderSize(r, bufSize),
		name:    name,
		end:     end,
		scratch: make([]byte, 0, bufSize),
	}
	h, err := readSpillHeader(sr.r, name)
	if err != nil {
		return nil, err
	}
	if h.applier != applier || h.xid != xid {
		return nil, fmt.Errorf("%w: %s is the spill file of applier %q xid %d, want applier %q xid %d",
			ErrSpillMismatch, name, h.applier, h.xid, applier, xid)
	}
	sr.off = h.size
	return sr, nil
}

// readSpillHeader reads and verifies a header.
func readSpillHeader(r io.Reader, name string) (spillHeader, error) {
	var fixed [spillHeaderFixed - 4]byte // up to the applier name
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return spillHeader{}, fmt.Errorf("%w: %s: reading header: %w", ErrSpillCorrupt, name, noEOF(err))
	}
	if string(fixed[:8]) != spillMagic {
		return spillHeader{}, fmt.Errorf("%w: %s: not a spill file (bad magic %q)", ErrSpillCorrupt, name, fixed[:8])
	}
	if v := binary.LittleEndian.Uint16(fixed[8:]); v != spillFormatVersion {
		return spillHeader{}, fmt.Errorf("%w: %s: format version %d, this build reads version %d", ErrSpillMismatch, name, v, spillFormatVersion)
	}
	nameLen := int(binary.LittleEndian.Uint16(fixed[16:]))
	rest := make([]byte, nameLen+4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return spillHeader{}, fmt.Errorf("%w: %s: reading header: %w", ErrSpillCorrupt, name, noEOF(err))
	}
	crc := crc32.Update(crc32.Checksum(fixed[:], crcTable), crcTable, rest[:nameLen])
	if want := binary.LittleEndian.Uint32(rest[nameLen:]); crc != want {
		return spillHeader{}, fmt.Errorf("%w: %s: header checksum mismatch at offset 0", ErrSpillCorrupt, name)
	}
	if reserved := binary.LittleEndian.Uint16(fixed[10:]); reserved != 0 {
		return spillHeader{}, fmt.Errorf("%w: %s: reserved header field is %d, want 0", ErrSpillCorrupt, name, reserved)
	}
	return spillHeader{
		applier: string(rest[:nameLen]),
		xid:     binary.LittleEndian.Uint32(fixed[12:]),
		size:    int64(spillHeaderFixed + nameLen),
	}, nil
}

// noEOF turns a plain EOF into ErrUnexpectedEOF: inside a header or record
// the end of the file is always unexpected.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Next returns the next record: the subxid that made the change and the raw
// pgoutput message. msg is valid until the next call. At the end of the file
// Next returns io.EOF; any other error is sticky.
func (sr *SpillReader) Next() (subxid uint32, msg []byte, err error) {
	if sr.err != nil {
		return 0, nil, sr.err
	}
	subxid, msg, err = sr.next()
	if err != nil {
		sr.err = err
	}
	return subxid, msg, err
}

func (sr *SpillReader) next() (uint32, []byte, error) {
	n, err := io.ReadFull(sr.r, sr.hdr[:])
	if err == io.EOF && n == 0 {
		if sr.end >= 0 && sr.off != sr.end {
			return 0, nil, fmt.Errorf("%w: %s ends at offset %d, the writer ended it at %d", ErrSpillCorrupt, sr.name, sr.off, sr.end)
		}
		return 0, nil, io.EOF
	}
	if sr.end >= 0 && sr.off >= sr.end {
		return 0, nil, fmt.Errorf("%w: %s has data past offset %d, where the writer ended it", ErrSpillCorrupt, sr.name, sr.end)
	}
	if err != nil {
		return 0, nil, sr.recordErr("truncated record header", noEOF(err))
	}
	length := binary.LittleEndian.Uint32(sr.hdr[4:])
	if length > maxSpillRecord {
		return 0, nil, sr.recordErr(fmt.Sprintf("record length %d exceeds %d", length, maxSpillRecord), nil)
	}
	payload, err := sr.readPayload(int(length))
	if err != nil {
		return 0, nil, sr.recordErr("truncated record payload", noEOF(err))
	}
	crc := crc32.Update(crc32.Update(0, crcTable, sr.hdr[4:]), crcTable, payload)
	if want := binary.LittleEndian.Uint32(sr.hdr[:4]); crc != want {
		return 0, nil, sr.recordErr("record checksum mismatch", nil)
	}
	if kind := sr.hdr[8]; kind != recordKindMessage {
		return 0, nil, sr.recordErr(fmt.Sprintf("unknown record kind %d", kind), nil)
	}
	subxid := binary.LittleEndian.Uint32(sr.hdr[9:])
	if subxid == 0 {
		return 0, nil, sr.recordErr("record with subxid 0", nil)
	}
	sr.off += int64(spillRecordHeader) + int64(length)
	sr.records++
	return subxid, payload, nil
}

// readPayload reads length bytes. Up to the buffer size it reuses the
// scratch buffer; beyond, it grows a buffer as data actually arrives, so a
// corrupt length cannot make it allocate more than the file holds.
func (sr *SpillReader) readPayload(length int) ([]byte, error) {
	if length <= cap(sr.scratch) {
		p := sr.scratch[:length]
		_, err := io.ReadFull(sr.r, p)
		return p, err
	}
	const chunk = 1 << 20
	p := make([]byte, 0, min(length, chunk))
	for len(p) < length {
		if len(p) == cap(p) {
			p = slices.Grow(p, min(length-len(p), cap(p))) // doubles
		}
		n, err := io.ReadFull(sr.r, p[len(p):min(cap(p), length)])
		p = p[:len(p)+n]
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (sr *SpillReader) recordErr(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%w: %s: %s at offset %d: %w", ErrSpillCorrupt, sr.name, what, sr.off, err)
	}
	return fmt.Errorf("%w: %s: %s at offset %d", ErrSpillCorrupt, sr.name, what, sr.off)
}

// Offset returns the offset of the next record.
func (sr *SpillReader) Offset() int64 { return sr.off }

// Records returns the number of records read so far.
func (sr *SpillReader) Records() int64 { return sr.records }

// Close closes the file if the reader was opened by SpillDir.OpenReader.
func (sr *SpillReader) Close() error {
	if sr.closer == nil {
		return nil
	}
	err := sr.closer.Close()
	sr.closer = nil
	if err != nil {
		return fmt.Errorf("state: closing spill file %s: %w", sr.name, err)
	}
	return nil
}
