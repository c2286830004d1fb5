package runstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// sumKey is state.json's last member: the SHA-256 of the bytes before it.
const sumKey = "state_sha256"

// sumLine is what follows the body of state.json: the checksum member and
// the object's closing brace. Its length is fixed, so Load finds the sum
// without trusting anything the sum protects.
func sumLine(sum string) string { return ",\n\t\"" + sumKey + "\": \"" + sum + "\"\n}\n" }

var sumLineLen = len(sumLine(strings.Repeat("0", 2*sha256.Size)))

// seal encodes st as state.json: indented JSON whose last member is the
// SHA-256 of every byte before the comma that introduces it.
func seal(st state) ([]byte, error) {
	js, err := json.MarshalIndent(st, "", "\t")
	if err != nil {
		return nil, err
	}
	body, ok := bytes.CutSuffix(js, []byte("\n}"))
	if !ok {
		return nil, fmt.Errorf("state.json does not end as an indented object: %q", js[max(0, len(js)-8):])
	}
	sum := sha256.Sum256(body)
	return append(body, sumLine(hex.EncodeToString(sum[:]))...), nil
}

// unseal checks state.json's checksum, then decodes it strictly.
func unseal(js []byte) (state, error) {
	var st state
	if len(js) < sumLineLen {
		return st, fmt.Errorf("%d bytes are too few to hold a checkpoint's state and its SHA-256: the file is corrupt or cut short", len(js))
	}
	body, tail := js[:len(js)-sumLineLen], js[len(js)-sumLineLen:]
	at := strings.Index(sumLine(""), `""`) + 1 // where the digits go
	want := string(tail[at : at+2*sha256.Size])
	if string(tail) != sumLine(want) || !isHex(want) {
		if bytes.Contains(js, []byte(`"format": "mixprec-run-1"`)) {
			return st, errors.New("was written by an earlier mixprec (format mixprec-run-1, without a checksum of its own); start the run afresh")
		}
		return st, fmt.Errorf("does not end with its %q line: the file is corrupt or cut short", sumKey)
	}
	if got := sha256.Sum256(body); hex.EncodeToString(got[:]) != want {
		return st, fmt.Errorf("has SHA-256 %x, its %s says %s: the file is corrupt", got, sumKey, want)
	}
	var sealed struct {
		state
		Sum string `json:"state_sha256"`
	}
	if err := strictDecode(js, &sealed); err != nil {
		return st, err
	}
	st = sealed.state
	if st.Format != format {
		return st, fmt.Errorf("is not a mixprec run checkpoint of this version (format %q, want %q)", st.Format, format)
	}
	return st, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// strictDecode decodes js into v, refusing what encoding/json lets pass: a
// key given twice (it keeps the last), null (it leaves the zero value), a
// member v does not have, and text after the value; and then a missing
// member of state or of its position.
func strictDecode(js []byte, v any) error {
	if err := walk(json.NewDecoder(bytes.NewReader(js)), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("is not a checkpoint's state: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("holds text after its JSON object")
	}
	var top, pos map[string]json.RawMessage
	json.Unmarshal(js, &top) // decoded once already: cannot fail
	for _, k := range []string{"format", "run", "config", "position", "sha256", sumKey} {
		if _, ok := top[k]; !ok {
			return fmt.Errorf("has no %q", k)
		}
	}
	json.Unmarshal(top["position"], &pos)
	for _, k := range []string{"step", "epoch", "batch"} {
		if _, ok := pos[k]; !ok {
			return fmt.Errorf("has no position %q", k)
		}
	}
	return nil
}

// walk reads one JSON value from dec, refusing null and any object that
// names a key twice; path names where it is, for the message.
func walk(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("is not valid JSON: %w", err)
	}
	switch tok {
	case nil:
		return fmt.Errorf("holds null at %s", orTop(path))
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return fmt.Errorf("is not valid JSON: %w", err)
			}
			key := k.(string) // object keys are strings
			if seen[key] {
				return fmt.Errorf("names %q twice in %s", key, orTop(path))
			}
			seen[key] = true
			if err := walk(dec, path+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walk(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	if err != nil {
		return fmt.Errorf("is not valid JSON: %w", err)
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path[1:]
}

// check refuses a position that no run of extent e reaches.
func (p Position) check(e Extent) error {
	switch {
	case p.Step < 0 || p.Epoch < 0 || p.Batch < 0:
		return fmt.Errorf("step %d, epoch %d, batch %d: none may be negative", p.Step, p.Epoch, p.Batch)
	case e.Epochs > 0 && p.Epoch >= e.Epochs:
		return fmt.Errorf("epoch %d (0-based) is past the run's %d epochs", p.Epoch, e.Epochs)
	case e.PerEpoch > 0 && p.Batch > e.PerEpoch:
		return fmt.Errorf("batch %d is past the %d batches of an epoch", p.Batch, e.PerEpoch)
	case e.Steps > 0 && p.Step > e.Steps:
		return fmt.Errorf("step %d is past the run's %d steps", p.Step, e.Steps)
	case e.PerEpoch > 0 && p.Epoch <= (math.MaxInt-p.Batch)/e.PerEpoch && p.Step > p.Epoch*e.PerEpoch+p.Batch:
		return fmt.Errorf("step %d is more than the %d batches taken by batch %d of epoch %d", p.Step, p.Epoch*e.PerEpoch+p.Batch, p.Batch, p.Epoch)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Counts)) {
		if p.Counts[k] < 0 {
			return fmt.Errorf("count %s is %d; want >= 0", k, p.Counts[k])
		}
	}
	return nil
}
