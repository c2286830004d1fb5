package datasets_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/mixprec/mixprec/datasets"
)

// A character-level corpus, its 90/10 split, and a batch of random
// training windows as nanoGPT's get_batch makes them. Opticks ships with
// Go; "austen" is loaded the same way, with datasets.Download() to fetch it
// the first time and datasets.In(dir) for the directory that keeps it.
func ExampleLoadText() {
	text, err := datasets.LoadText("opticks")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(text.Name, len(text.Vocab), "characters;", len(text.Train), "train ids,", len(text.Val), "val ids")

	const batch, block = 2, 16
	x, y := make([]int32, batch*block), make([]int32, batch*block)
	datasets.SampleWindows(text.Train, block, rand.New(rand.NewPCG(1, 1)), x, y)
	fmt.Printf("%q -> %q\n", text.Decode(x[:block]), text.Decode(y[:block]))

	fmt.Println(datasets.EvalWindows(text.Val, block, 200), "validation windows")
	datasets.EvalWindow(text.Val, block, 0, x[:block], y[:block])
	fmt.Printf("%q\n", text.Decode(x[:block]))
	// Output:
	// opticks 91 characters; 510334 train ids, 56704 val ids
	// "ia_,\nwho made a " -> "a_,\nwho made a _"
	// 200 validation windows
	// "he Will, and whe"
}
