# mixprec — see README.md. The two commands a fresh Debian 12 machine with Go
# needs are `make mnist` and `make test`; everything else they need, they fetch.

GO      ?= go
DATA    ?= $(or $(MIXPREC_DATA),$(CURDIR)/data)
MNIST   := $(DATA)/mnist/train-images-idx3-ubyte.gz
AUSTEN  := $(DATA)/austen/austen.txt $(DATA)/austen/r-cran-janeaustenr_1.0.0-1_all.deb
BIN     := $(CURDIR)/bin
export MIXPREC_DATA := $(DATA)

.PHONY: all data mnist test test-long test-long-training test-cuda-kit test-short lint bench bench-peer build clean generate reference kernels check-kernels cuda-bundle test-cuda

all: build

build:
	$(GO) build ./...

## data: fetch MNIST through the Go module proxy, and Jane Austen's novels (the GPT's corpus) from Debian's archive, into $(DATA)
data: $(MNIST) $(AUSTEN)

$(MNIST):
	sh tools/fetch-mnist.sh $(DATA)/mnist

$(AUSTEN):
	$(GO) run ./cmd/mixprec fetch austen -data $(DATA)

## mnist: fetch MNIST, train the MLP for 3 epochs, report
mnist: data
	$(GO) run ./examples/mnist -data $(DATA) -epochs 3

## test: the test suite, what CI runs on every change (its slow tests are in test-long); installs openmpi-bin for the MPI tests when it is missing
test: data
	sh tools/install-mpi.sh
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 25m ./...

# The tests that skip unless MIXPREC_LONG=1 (tools/readmetest checks that
# every such test is named here).
LONG_TRAINING := ^(TestCNNAccuracy|TestResumeAfterKill)$$
CUDA_KIT      := ^TestBundle$$

## test-long: the slow tests make test skips: test-long-training and test-cuda-kit
test-long: test-long-training test-cuda-kit

## test-long-training: the MNIST CNN's two-epoch accuracy in f32 and f16, and SIGKILL-and-resume in every model and precision
test-long-training: data
	MIXPREC_LONG=1 $(GO) test -count=1 -timeout 60m -run '$(LONG_TRAINING)' -v ./examples/mnist/

## test-cuda-kit: build the GPU machine's bundle (make cuda-bundle) for real and check its binaries and run.sh
test-cuda-kit: data
	MIXPREC_LONG=1 $(GO) test -count=1 -timeout 30m -run '$(CUDA_KIT)' ./tools/cuda/

## test-short: the suite without long training tests
test-short:
	$(GO) test -short ./...

## lint: gofmt, go vet, go.mod and go.sum tidy, and the layering rule of docs/design.md §2
lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	$(GO) run ./tools/layercheck
	$(GO) generate ./...
	@git diff --quiet -- '*.s' cudaops/kernels/ops.cuh autograd/unary_gen.go || { echo "generated files differ from what make generate produces:"; git diff --stat -- '*.s' cudaops/kernels/ops.cuh autograd/unary_gen.go; exit 1; }

## bench: Go benchmarks: CPU GEMM GFLOP/s (and the fraction of the measured FMA peak), training steps in samples/s
bench:
	$(GO) test -run '^$$' -bench 'Gemm/(mlp-fwd|conv-fwd|square-NN-1024|wide)|Peak' -benchtime 1s ./device/cpu/internal/gemm/
	$(GO) test -run '^$$' -bench 'TrainStep' -benchtime 10x ./nn/models/

## generate: regenerate generated files (the GEMM assembly, and from device's op tables the CUDA ops and autograd's unary ops; then make kernels for the PTX); they must come out byte for byte as committed
generate:
	$(GO) generate ./...

## reference: recompute testdata/torch_reference.json, the PyTorch-trained safetensors fixtures and the GPT's (testdata/torch_gpt*) with PyTorch (installs Debian's python3-torch if needed)
reference:
	sh tools/install-peer.sh
	/usr/bin/python3 tools/reference/torch_reference.py testdata/torch_reference.json
	/usr/bin/python3 tools/reference/torch_safetensors.py make testdata
	GO=$(GO) /usr/bin/python3 tools/reference/torch_gpt.py make testdata

## bench-peer: our programs against PyTorch (each workload under its four thread settings, compared at the fastest) and the Go peers (Gorgonia, GoMLX) on the same machine, with ratios; WORKLOADS=mlp,cnn,wide,resnet20,gemm,gpt,gpt6x384 REPEAT=N BENCH_JSON=FILE BENCH_FLAGS='--steps cnn=60 ...' (see tools/bench_peer.py -h)
bench-peer: data
	sh tools/install-peer.sh
	mkdir -p $(BIN)
	$(GO) build -o $(BIN)/mnist ./examples/mnist
	$(GO) build -o $(BIN)/cifar ./examples/cifar
	$(GO) build -o $(BIN)/mixprec ./cmd/mixprec
	rm -f $(BIN)/gpt; $(GO) build -o $(BIN)/gpt ./examples/gpt || echo "bench-peer: examples/gpt did not build; the gpt workload will show as unavailable"
	rm -f $(BIN)/gopeer-gorgonia $(BIN)/gopeer-gomlx
	cd tools/gopeers/gorgonia && $(GO) build -o $(BIN)/gopeer-gorgonia . || echo "bench-peer: the Gorgonia peer did not build; it will show as unavailable"
	cd tools/gopeers/gomlx && $(GO) build -o $(BIN)/gopeer-gomlx . || echo "bench-peer: the GoMLX peer did not build; it will show as unavailable"
	/usr/bin/python3 tools/bench_peer.py --data $(DATA) --bin $(BIN) $(if $(WORKLOADS),--workloads $(WORKLOADS)) $(if $(REPEAT),--repeat $(REPEAT)) $(if $(BENCH_JSON),--json $(BENCH_JSON)) $(BENCH_FLAGS)

clean:
	rm -rf $(BIN)

## kernels: compile cudaops/kernels/*.cu with nvcc to the committed, embedded PTX (compute_70 and compute_80)
kernels:
	sh tools/cuda/build-kernels.sh cudaops/ptx

## check-kernels: the committed PTX is exactly what the sources compile to, and ptxas accepts it for sm_70, sm_80 and sm_90 (installs nvidia-cuda-toolkit when nvcc is missing)
check-kernels:
	sh tools/cuda/check-kernels.sh

## cuda-bundle: test binaries, programs, MNIST and run.sh for a GPU machine without Go, in ./cuda-bundle (run: sh cuda-bundle/run.sh OUTDIR, which leaves summary.txt and one archive of logs there)
cuda-bundle: data
	sh tools/cuda/bundle.sh cuda-bundle

## test-cuda: on a machine with a GPU and Go, the CUDA backend's tests and every device-parametrised test, failing (not skipping) without a GPU
test-cuda: data
	$(GO) run ./cmd/mixprec device
	MIXPREC_REQUIRE_CUDA=1 $(GO) test -count=1 -v -run 'TestConformance|TestAgainstCPU|TestDeterministic|TestInfo' ./cudaops/
	MIXPREC_REQUIRE_CUDA=1 $(GO) test -count=1 ./cudaops/ ./internal/testdev/ ./autograd/ ./amp/ ./nn/... ./optim/ ./examples/...
