package nn

import "github.com/mixprec/mixprec/tensor"

// hostValue is e's value on the host, whether or not the module has been
// moved to a device yet.
func hostValue(e Named) tensor.Host {
	if e.Var.Value != nil {
		return e.Var.Value.Host()
	}

	return tensor.Host{Shape: e.Var.Shape(), Data: e.Var.InitialValues()}
}
