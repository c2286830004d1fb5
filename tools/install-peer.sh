#!/bin/sh
# install-peer.sh — make sure Debian's PyTorch (the CPU peer for benchmarks
# and reference values) is importable by /usr/bin/python3, with the
# multi-threaded OpenBLAS it runs its F32 GEMMs on, installing them with
# apt-get when they are not. tools/apt-get.sh waits for another apt or dpkg
# (an unattended upgrade, a second install) to let go of its locks.
set -eu
here=$(dirname "$0")
packages="python3-torch python3-numpy libopenblas0-pthread"
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null &&
	dpkg-query -W -f='${Status}\n' libopenblas0-pthread 2>/dev/null | grep -q 'install ok installed'; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
	echo "install-peer: PyTorch is missing; run as root: apt-get install -y $packages" >&2
	exit 1
fi
echo "install-peer: installing Debian's $packages (a few minutes)"
# shellcheck disable=SC2086 # the package list splits on purpose
sh "$here/apt-get.sh" install -y -q $packages >/dev/null ||
	{ sh "$here/apt-get.sh" update -q >/dev/null && sh "$here/apt-get.sh" install -y -q $packages >/dev/null; }
/usr/bin/python3 -c 'import torch, numpy' || {
	echo "install-peer: /usr/bin/python3 still cannot import torch and numpy" >&2
	exit 1
}
