// Command layercheck fails when a package of this module imports a package
// on its own layer or a higher one, contrary to docs/design.md §2:
//
//	0 dtype, atomicfile
//	1 device, device/cpu, device/devicetest, cudaops, safetensors, mpi
//	2 tensor
//	3 autograd, datasets
//	4 nn, optim, amp, distributed, profile
//	5 runstate, memplan
//	6 examples, cmd, internal
//
// A sub-package belongs to its parent's layer; tools/ is outside the layers.
// Backends, the conformance suite and mpi may import the device contract
// (and the suite the CPU backend).
//
// internal/ is the programs' shared plumbing (§2's layer 6), so:
//   - no package below layer 6 imports it;
//   - the programs, examples/ and cmd/, may import it (they compose the
//     layers, and the plumbing is theirs), and its packages one another;
//   - it imports no program.
//
// A package whose code imports "testing" (device/devicetest, and in
// internal/ testdev, reftest and cli/clitest) is test support: only test
// files and other test support may import it, so no library or program
// links the testing package. Test files are not held to the layers: a
// test is a program of its own, and a layer-1 package's tests may run on
// every device through internal/testdev.
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
	"dtype": 0, "atomicfile": 0,
	"device": 1, "device/cpu": 1, "device/devicetest": 1, "cudaops": 1, "safetensors": 1, "mpi": 1,
	"tensor":   2,
	"autograd": 3, "datasets": 3,
	"nn": 4, "optim": 4, "amp": 4, "distributed": 4, "profile": 4,
	"runstate": 5, "memplan": 5,
	"examples": 6, "cmd": 6, "internal": 6,
}

// allowed lists the imports within one layer that the design permits.
var allowed = map[[2]string]bool{
	{"device/cpu", "device"}: true, {"device/devicetest", "device"}: true,
	{"cudaops", "device"}: true, {"device/devicetest", "device/cpu"}: true,
	{"mpi", "device"}:        true,
	{"examples", "internal"}: true, {"cmd", "internal"}: true,
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

// pkg is what the check needs of one package: its path relative to the
// module and the module's packages its non-test code imports (relative
// too), with whether it imports "testing".
type pkg struct {
	rel     string
	imports []string
	testing bool
}

// check returns one line for each import that breaks the rules.
func check(pkgs []pkg) []string {
	support := map[string]bool{}
	for _, p := range pkgs {
		if p.testing {
			support[p.rel] = true
		}
	}
	var bad []string
	for _, p := range pkgs {
		src, ok := group(p.rel)
		for _, imp := range p.imports {
			if support[imp] && !p.testing {
				bad = append(bad, fmt.Sprintf("layercheck: %s imports %s, which is test support (it imports testing): only test files may", p.rel, imp))
				continue
			}
			if !ok {
				continue
			}
			dst, ok := group(imp)
			if !ok || dst == src || allowed[[2]string{src, dst}] {
				continue
			}
			if layers[dst] >= layers[src] {
				bad = append(bad, fmt.Sprintf("layercheck: %s (layer %d) imports %s (layer %d)", p.rel, layers[src], imp, layers[dst]))
			}
		}
	}
	return bad
}

// load lists the packages of the module in dir ("" for the current
// directory) with go list.
func load(dir string) ([]pkg, error) {
	goList := func(args ...string) ([]byte, error) {
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Dir = dir
		return cmd.Output()
	}
	mod, err := goList("-m")
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	module := strings.TrimSpace(string(mod))
	out, err := goList("-json", "./...")
	if err != nil {
		return nil, fmt.Errorf("go list ./...: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var pkgs []pkg
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list ./...: %w", err)
		}
		q := pkg{rel: strings.TrimPrefix(p.ImportPath, module+"/")}
		for _, imp := range p.Imports {
			if imp == "testing" {
				q.testing = true
			}
			if strings.HasPrefix(imp, module+"/") {
				q.imports = append(q.imports, strings.TrimPrefix(imp, module+"/"))
			}
		}
		pkgs = append(pkgs, q)
	}
	return pkgs, nil
}

func main() {
	pkgs, err := load("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "layercheck:", err)
		os.Exit(2)
	}
	bad := check(pkgs)
	for _, b := range bad {
		fmt.Println(b)
	}
	if len(bad) > 0 {
		os.Exit(1)
	}
}
