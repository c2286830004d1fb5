package atomicfile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// SHA256 returns the SHA-256 of the file at path in lower-case hex, as
// sha256sum prints it: what a writer records of the files it wrote (a run
// checkpoint's manifest) and a reader checks before it trusts one (the
// checkpoint, a data directory's SHA256SUMS).
func SHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
