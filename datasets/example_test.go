package datasets_test

import (
	"fmt"
	"log"
	"slices"

	"github.com/mixprec/mixprec/datasets"
)

// One epoch of shuffled mini-batches, flattened for a multilayer perceptron.
// Synthetic data keeps the example self-contained; a real script loads MNIST
// as in the LoadMNIST example.
func ExampleBatches() {
	train := datasets.Synthetic(1000, []int{1, 28, 28}, 10, 1).Reshape(784)
	fmt.Println(train.Name, train.Len(), train.Shape)

	const epoch = 0
	var last []int
	for b := range datasets.Batches(train, 128, datasets.Shuffle(42), datasets.Epoch(epoch)) {
		if b.Index == 0 {
			fmt.Println("first batch:", b.X.Shape, len(b.Y), "labels")
		}
		// b is reused by the next iteration: copy what must outlive it.
		last = slices.Clone(b.X.Shape)
	}
	fmt.Println("last batch:", last)
	fmt.Println("batches per epoch:", datasets.NumBatches(train, 128))
	// Output:
	// synthetic 1000 [784]
	// first batch: [128 784] 128 labels
	// last batch: [104 784]
	// batches per epoch: 8
}

// CIFAR-10 training batches are augmented in the background workers with a
// random crop and flip; the test set is not augmented.
func ExampleRandomCropFlip() {
	train := datasets.Synthetic(256, []int{3, 32, 32}, 10, 1) // LoadCIFAR10 in a real script
	for b := range datasets.Batches(train, 64,
		datasets.Shuffle(7), datasets.Epoch(0),
		datasets.Augment(datasets.RandomCropFlip(4)), datasets.Workers(2)) {
		fmt.Println(b.Index, b.X.Shape)
	}
	// Output:
	// 0 [64 3 32 32]
	// 1 [64 3 32 32]
	// 2 [64 3 32 32]
	// 3 [64 3 32 32]
}

func ExampleLoadMNIST() {
	train, test, err := datasets.LoadMNIST(datasets.Dir("mnist"))
	if err != nil {
		log.Fatal(err) // says to run `make data` when the files are missing
	}
	fmt.Println(train.Len(), test.Len(), train.Shape)
}
