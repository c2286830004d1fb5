#!/bin/sh
# install-mpi.sh: makes sure Open MPI (mpirun and libmpi.so.40, Debian's
# openmpi-bin) is installed for the multi-process tests, installing it with
# apt-get when it is missing and this is root. Without root it says what to
# install and succeeds, and those tests skip with one line.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if command -v mpirun >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-mpi: mpirun is missing; as root: apt-get install -y openmpi-bin (the MPI tests will skip)" >&2
	exit 0
fi
echo "install-mpi: installing Debian's openmpi-bin for the MPI tests"
sh "$here/apt-get.sh" install -y -q openmpi-bin >/dev/null ||
	{ sh "$here/apt-get.sh" update -q >/dev/null && sh "$here/apt-get.sh" install -y -q openmpi-bin >/dev/null; }
