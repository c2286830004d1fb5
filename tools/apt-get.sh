#!/bin/sh
# apt-get.sh ARGS...: runs `apt-get ARGS` as root, waiting for another apt or
# dpkg (an unattended upgrade, a second install) to let go of its locks
# instead of failing at once. apt-get itself waits for the dpkg frontend lock
# when given DPkg::Lock::Timeout, but `apt-get update` and older apt fail
# straight away on the lists and archive locks, so failures that name a lock
# are retried too, until MIXPREC_APT_WAIT seconds (default 900) have passed.
# Any other failure is returned at once.
set -eu
wait_s=${MIXPREC_APT_WAIT:-900}
pause=${MIXPREC_APT_PAUSE:-5}
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
fi
err=$(mktemp)
trap 'rm -f "$err"' EXIT
start=$(date +%s)
while :; do
	status=0
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$wait_s" "$@" 2>"$err" || status=$?
	if [ $status -eq 0 ]; then
		cat "$err" >&2
		exit 0
	fi
	if ! grep -qiE 'could not get lock|unable to acquire the dpkg frontend lock|unable to lock|is another process using it' "$err"; then
		cat "$err" >&2
		exit $status
	fi
	now=$(date +%s)
	if [ $((now - start)) -ge "$wait_s" ]; then
		cat "$err" >&2
		echo "apt-get.sh: apt's lock was still held after ${wait_s}s; giving up" >&2
		exit $status
	fi
	echo "apt-get.sh: another apt or dpkg holds the lock; waiting (apt-get $*)" >&2
	sleep "$pause"
done
