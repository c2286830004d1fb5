//go:build !purego && !linux

package gemm

// amxPermit reports whether this process may use the AMX tile registers:
// only Linux is asked (amx_linux_amd64.go); elsewhere bfloat16 products
// take the other paths.
func amxPermit() bool { return false }
