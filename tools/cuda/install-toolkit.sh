#!/bin/sh
# install-toolkit.sh: installs Debian 12's nvidia-cuda-toolkit (nvcc and
# ptxas of CUDA 11.8), which lives in the non-free component. When no apt
# source for bookworm has non-free, it adds one with contrib and non-free
# for bookworm and bookworm-updates. It does nothing when nvcc is already
# installed, so running it twice is harmless. Needs root (or sudo).
#
# apt-get runs through tools/apt-get.sh, which waits (up to
# MIXPREC_APT_WAIT seconds, default 900) for another apt or dpkg holding
# its locks instead of failing.
#
# APT_DIR (default /etc/apt) and DRY_RUN=1 (print the apt-get commands
# instead of running them) exist to test the script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
APT_DIR=${APT_DIR:-/etc/apt}
if command -v nvcc >/dev/null 2>&1; then
	echo "install-toolkit: nvcc is already installed: $(command -v nvcc)"
	exit 0
fi
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
fi
run() {
	if [ "${DRY_RUN:-}" = 1 ]; then
		echo "install-toolkit: would run: $*"
	else
		"$@"
	fi
}
# apt reads sources.list and the .list and .sources files of sources.list.d.
has_nonfree() {
	for f in "$APT_DIR/sources.list" "$APT_DIR"/sources.list.d/*.list "$APT_DIR"/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		if grep -qE '^(Components:.*[[:space:]]non-free([[:space:]]|$)|deb .*bookworm.*[[:space:]]non-free([[:space:]]|$))' "$f"; then
			return 0
		fi
	done
	return 1
}
if ! has_nonfree; then
	list=$APT_DIR/sources.list.d/mixprec-nonfree.sources
	echo "install-toolkit: adding contrib and non-free for bookworm in $list"
	$SUDO mkdir -p "$APT_DIR/sources.list.d"
	$SUDO sh -c "cat >'$list'" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
run sh "$here/../apt-get.sh" update
run sh "$here/../apt-get.sh" install -y nvidia-cuda-toolkit
if [ "${DRY_RUN:-}" != 1 ] && ! command -v nvcc >/dev/null 2>&1; then
	echo "install-toolkit: nvcc still missing after installing nvidia-cuda-toolkit" >&2
	exit 1
fi
