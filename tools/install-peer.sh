#!/bin/sh
# install-peer.sh — make sure Debian's PyTorch (the CPU peer for benchmarks
# and reference values) is importable by /usr/bin/python3, installing it with
# apt-get when it is not.
set -eu
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-peer: PyTorch is missing; run as root: apt-get install -y python3-torch python3-numpy libopenblas0-pthread" >&2
	exit 1
fi
echo "install-peer: installing Debian's python3-torch (a few minutes)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy libopenblas0-pthread >/dev/null ||
	{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy libopenblas0-pthread >/dev/null; }
