// Command layercheck fails when a package of this module imports a package
// on its own layer or a higher one, contrary to DESIGN.md §2:
//
//	0 dtype
//	1 device, device/cpu, device/devicetest, cudaops, safetensors, mpi
//	2 tensor
//	3 autograd, datasets
//	4 nn, optim, amp, distributed, profile
//	5 runstate
//	6 examples, cmd
//
// A sub-package belongs to its parent's layer; internal/ and tools/ are
// outside the layers. Backends, the conformance suite and mpi may import
// the device contract (and the suite the CPU backend).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

var layers = map[string]int{
	"dtype":  0,
	"device": 1, "device/cpu": 1, "device/devicetest": 1, "cudaops": 1, "safetensors": 1, "mpi": 1,
	"tensor":   2,
	"autograd": 3, "datasets": 3,
	"nn": 4, "optim": 4, "amp": 4, "distributed": 4, "profile": 4,
	"runstate": 5,
	"examples": 6, "cmd": 6,
}

var allowed = map[[2]string]bool{
	{"device/cpu", "device"}: true, {"device/devicetest", "device"}: true,
	{"cudaops", "device"}: true, {"device/devicetest", "device/cpu"}: true,
	{"mpi", "device"}: true,
}

// group returns the longest entry of layers that rel is, or is under.
func group(rel string) (string, bool) {
	best := ""
	for name := range layers {
		if (rel == name || strings.HasPrefix(rel, name+"/")) && len(name) > len(best) {
			best = name
		}
	}
	return best, best != ""
}

func main() {
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "layercheck: go list -m:", err)
		os.Exit(2)
	}
	module := strings.TrimSpace(string(mod))
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "layercheck: go list ./...:", err)
		os.Exit(2)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	bad := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "layercheck:", err)
			os.Exit(2)
		}
		src, ok := group(strings.TrimPrefix(p.ImportPath, module+"/"))
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dst, ok := group(strings.TrimPrefix(imp, module+"/"))
			if !ok || dst == src || allowed[[2]string{src, dst}] {
				continue
			}
			if layers[dst] >= layers[src] {
				fmt.Printf("layercheck: %s (layer %d) imports %s (layer %d)\n", p.ImportPath, layers[src], imp, layers[dst])
				bad++
			}
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}
