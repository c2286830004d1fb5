//go:build !amd64 || purego

package gemm

// Off amd64, or with the purego build tag (which tests the fallback on an
// amd64 machine), the Go implementation in impl.go is the only one.
