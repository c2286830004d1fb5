// Package cuda holds the scripts of the CUDA kit: building and checking the
// kernels' PTX (build-kernels.sh, check-kernels.sh, install-toolkit.sh),
// and the bundle that checks the CUDA backend on a GPU machine without Go
// (bundle.sh builds it, run-bundle.sh becomes its run.sh). It has no code
// of its own; its tests run the bundle's scripts, with stand-in programs
// and with a real bundle, on the machine at hand.
package cuda
