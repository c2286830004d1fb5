package datasets

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// ReadIDX reads an unsigned-byte IDX file, the format of the MNIST and
// Fashion-MNIST files, and returns its dimensions (e.g. [60000 28 28]) and its
// payload, one byte per element in row-major order. A gzip-compressed file is
// recognised by its content (magic 0x1f8b), not by its name, so a file that
// was decompressed but kept its .gz suffix, or the reverse, still reads.
//
// The magic number must be 0x00000801 (a vector, as in label files) or
// 0x00000803 (a 3-D array, as in image files); other ranks of unsigned bytes
// are read too. The payload must be exactly as long as the dimensions say.
func ReadIDX(path string) (dims []int, data []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: reading IDX: %w", err)
	}
	defer f.Close()

	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	compressed := false
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("datasets: %s: bad gzip header: %w", path, err)
		}
		defer zr.Close()
		r, compressed = zr, true
	}
	// Reading a gzip stream can fail part way with errors that only mean "the
	// file is cut short"; say so in words.
	describe := func(err error) error {
		if compressed && errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("datasets: %s: gzip stream is truncated: %w", path, err)
		}
		if compressed {
			return fmt.Errorf("datasets: %s: corrupt gzip stream: %w", path, err)
		}
		return fmt.Errorf("datasets: %s: %w", path, err)
	}

	var head [4]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, nil, fmt.Errorf("datasets: %s: too short for an IDX file: %d bytes, want at least 4 for the magic number", path, n)
		}
		return nil, nil, describe(err)
	}
	magic := binary.BigEndian.Uint32(head[:])
	rank := int(head[3])
	if head[0] != 0 || head[1] != 0 || head[2] != 0x08 || rank == 0 {
		return nil, nil, fmt.Errorf("datasets: %s: wrong magic number 0x%08x: want 0x00000801 or 0x00000803 (an unsigned-byte IDX file, as in MNIST)", path, magic)
	}

	raw := make([]byte, 4*rank)
	if n, err := io.ReadFull(r, raw); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, nil, fmt.Errorf("datasets: %s: truncated header: %d dimensions need %d bytes, got %d", path, rank, len(raw), n)
		}
		return nil, nil, describe(err)
	}
	dims = make([]int, rank)
	want := 1
	for i := range dims {
		d := binary.BigEndian.Uint32(raw[4*i:])
		if d > 0 && uint64(want) > uint64(math.MaxInt)/uint64(d) {
			return nil, nil, fmt.Errorf("datasets: %s: dimensions %v overflow", path, dims[:i+1])
		}
		dims[i] = int(d)
		want *= int(d)
	}

	data, err = readPayload(r, want)
	if err != nil {
		return nil, nil, describe(err)
	}
	if len(data) < want {
		return nil, nil, fmt.Errorf("datasets: %s: truncated payload: dimensions %v need %d bytes, got %d", path, dims, want, len(data))
	}
	if len(data) > want {
		return nil, nil, fmt.Errorf("datasets: %s: more data than dimensions %v call for (%d bytes): not an IDX file, or a corrupt one", path, dims, want)
	}
	return dims, data, nil
}

// readPayload reads up to want+1 bytes: the extra byte detects trailing data,
// and asking for it makes a gzip reader verify its checksum at the end of the
// stream. It does not trust want for its first allocation, so a corrupt header
// that claims terabytes fails on the short read, not on the allocation.
func readPayload(r io.Reader, want int) ([]byte, error) {
	lr := io.LimitReader(r, int64(want)+1)
	buf := make([]byte, 0, min(want, 64<<20)+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
