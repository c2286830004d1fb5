package datasets

// SetMNISTSums replaces the expected SHA-256 digests of the MNIST files so
// that tests can serve small files of their own, and returns the undo.
func SetMNISTSums(sums map[string]string) (restore func()) {
	saved := mnistSums
	mnistSums = sums
	return func() { mnistSums = saved }
}

// MNISTZipPath is where the module's zip sits under a proxy or module cache.
func MNISTZipPath() string { return moduleZipSuffix() }

// MNISTZipPrefix is the directory of the files inside the module zip.
const MNISTZipPrefix = mnistModule + "@" + mnistVersion + "/data/"
