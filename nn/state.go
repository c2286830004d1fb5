package nn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/mixprec/mixprec/tensor"
)

// stateMagic opens a state file: format name and version.
const stateMagic = "MIXPREC-STATE-1\n"

// Save writes every parameter and buffer of m (State order, F32, little
// endian) to w: the magic line, the entry count, then per entry its name,
// shape and values.
func Save(w io.Writer, m Module) error {
	bw := bufio.NewWriter(w)
	st := State(m)
	put := func(v any) error { return binary.Write(bw, binary.LittleEndian, v) }
	if _, err := bw.WriteString(stateMagic); err != nil {
		return err
	}
	if err := put(uint32(len(st))); err != nil {
		return err
	}
	for _, e := range st {
		h := hostValue(e)
		if err := put(uint32(len(e.Name))); err != nil {
			return err
		}
		if _, err := bw.WriteString(e.Name); err != nil {
			return err
		}
		if err := put(uint32(len(h.Shape))); err != nil {
			return err
		}
		for _, d := range h.Shape {
			if err := put(uint32(d)); err != nil {
				return err
			}
		}
		if err := put(h.Data); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func hostValue(e Named) tensor.Host {
	if e.Var.Value != nil {
		return e.Var.Value.Host()
	}
	return tensor.Host{Shape: e.Var.Shape(), Data: e.Var.InitialValues()}
}

// Load reads a state written by Save into m, which must have the same
// entries with the same shapes; nothing is changed unless all of it reads
// cleanly.
func Load(r io.Reader, m Module) error {
	br := bufio.NewReader(r)
	get := func(v any) error {
		if err := binary.Read(br, binary.LittleEndian, v); err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		return nil
	}
	magic := make([]byte, len(stateMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != stateMagic {
		return fmt.Errorf("nn.Load: not a mixprec state file (bad header)")
	}
	st := State(m)
	var n uint32
	if err := get(&n); err != nil {
		return fmt.Errorf("nn.Load: reading entry count: %w", err)
	}
	if int(n) != len(st) {
		return fmt.Errorf("nn.Load: file has %d entries, model has %d", n, len(st))
	}
	vals := make([]tensor.Host, len(st))
	for i, e := range st {
		var ln uint32
		if err := get(&ln); err != nil || ln > 1<<16 {
			return fmt.Errorf("nn.Load: entry %d: bad name length (%v)", i, err)
		}
		name := make([]byte, ln)
		if _, err := io.ReadFull(br, name); err != nil {
			return fmt.Errorf("nn.Load: entry %d: %w", i, io.ErrUnexpectedEOF)
		}
		if string(name) != e.Name {
			return fmt.Errorf("nn.Load: entry %d is %q in the file, %q in the model", i, name, e.Name)
		}
		var rank uint32
		if err := get(&rank); err != nil || rank > 8 {
			return fmt.Errorf("nn.Load: %s: bad rank (%v)", e.Name, err)
		}
		shape := make([]int, rank)
		size := 1
		for j := range shape {
			var d uint32
			if err := get(&d); err != nil {
				return fmt.Errorf("nn.Load: %s: %w", e.Name, err)
			}
			shape[j] = int(d)
			size *= int(d)
		}
		if !slices.Equal(shape, e.Var.Shape()) {
			return fmt.Errorf("nn.Load: %s has shape %v in the file, %v in the model", e.Name, shape, e.Var.Shape())
		}
		data := make([]float32, size)
		if err := get(data); err != nil {
			return fmt.Errorf("nn.Load: %s: values: %w", e.Name, err)
		}
		vals[i] = tensor.Host{Shape: shape, Data: data}
	}
	for i, e := range st {
		e.Var.SetValues(vals[i].Data)
	}
	return nil
}

// SaveFile saves m's state to path.
func SaveFile(path string, m Module) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Save(f, m); err != nil {
		f.Close()
		return fmt.Errorf("saving %s: %w", path, err)
	}
	return f.Close()
}

// LoadFile loads m's state from path.
func LoadFile(path string, m Module) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Load(f, m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
