#!/bin/sh
# Checks for the Debian packages memdiag builds against; installs the
# missing ones when running as root (apt-get), otherwise names them.
need=""
have_hdr() { printf '#include <%s>\n' "$1" | ${CC:-cc} -E -x c - >/dev/null 2>&1; }
have_hdr zlib.h   || need="$need zlib1g-dev"
have_hdr zstd.h   || need="$need libzstd-dev"
have_hdr lzma.h   || need="$need liblzma-dev"
have_hdr jansson.h || need="$need libjansson-dev"
printf '#include <stdarg.h>\n#include <stddef.h>\n#include <setjmp.h>\n#include <cmocka.h>\n' |
    ${CC:-cc} -E -x c - >/dev/null 2>&1 || need="$need libcmocka-dev"
command -v cc >/dev/null 2>&1 || need="$need build-essential"
command -v python3 >/dev/null 2>&1 || need="$need python3"   # test scripts, validators
command -v node >/dev/null 2>&1 || need="$need nodejs"      # runs the HTML pages' scripts in tests
[ -z "$need" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "memdiag: installing$need" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null || {
        echo "memdiag: apt-get install$need failed" >&2; exit 1; }
else
    echo "memdiag: missing Debian packages:$need (run: sudo apt-get install$need)" >&2
    exit 1
fi
