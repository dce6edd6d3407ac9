#!/bin/sh
# Unpack the Debian packages a bare CUDA machine lacks (libpcap, libyaml,
# liburcu, jansson, libmicrohttpd and the GnuTLS it links, libxdp, libbpf,
# pkgconf) into .gpudeps/root, so that tests/gpu/run.sh can build and run
# there. Run on a Debian 12 machine with apt; nothing is installed.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$ROOT/.gpudeps
mkdir -p "$D/debs" "$D/root"
cd "$D/debs"
apt-get download libpcap0.8 libpcap0.8-dev libyaml-0-2 libyaml-dev \
	liburcu8 liburcu-dev pkgconf pkgconf-bin libpkgconf3 \
	libdbus-1-dev libdbus-1-3 libjansson4 libjansson-dev libmicrohttpd12 \
	libmicrohttpd-dev libxdp1 libxdp-dev libbpf1 libbpf-dev libelf1 \
	libzstd1 libgnutls30 libnettle8 libhogweed6 libp11-kit0 libidn2-0 \
	libtasn1-6 libunistring2 libgmp10 libffi8 >/dev/null
for f in *.deb; do dpkg -x "$f" "$D/root"; done
# merged-/usr packages (libdbus) put their libraries in /lib: one place
if [ -d "$D/root/lib/x86_64-linux-gnu" ]; then
	cp -a "$D/root/lib/x86_64-linux-gnu/." "$D/root/usr/lib/x86_64-linux-gnu/"
fi
PC=$D/root/usr/lib/x86_64-linux-gnu/pkgconfig
for f in "$PC"/*.pc; do
	sed -i -e 's|^prefix=.*|prefix=${pcfiledir}/../../..|' \
		-e 's|^libdir=/usr/lib/x86_64-linux-gnu|libdir=${prefix}/lib/x86_64-linux-gnu|' \
		-e 's|^includedir=/usr/include|includedir=${prefix}/include|' "$f"
done
# Private requirements (libmicrohttpd's gnutls, libbpf's libelf and zlib)
# serve static links only, yet pkgconf resolves them for --cflags too: the
# lookup fails without their -dev packages. dpflow links shared: they go.
sed -i '/^Requires.private:/d' "$PC"/*.pc
# Criterion is not needed by the GPU programs; a stand-in keeps meson quiet.
cat >"$PC/criterion.pc" <<PCEOF
Name: criterion
Description: stand-in (GPU-only build)
Version: 2.4.1
Libs:
Cflags:
PCEOF
echo "gpudeps: $(ls "$D/debs" | wc -l) packages unpacked in $D/root"
