// Package asmcheck checks the project's amd64 assembly for legacy-SSE
// instructions on vector registers. The kernels are AVX and AVX-512 code;
// a non-VEX instruction such as MOVQ AX, X8 in the middle of them pays an
// SSE/AVX transition penalty wherever the upper halves of the Y registers
// are dirty (about 100 cycles an instruction on a Zen 3 under KVM, which
// made one converter 8.5 times slower), so every vector instruction must be
// its V-prefixed form.
package asmcheck
