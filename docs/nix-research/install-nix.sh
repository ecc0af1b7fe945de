#!/bin/sh
# Install Debian trixie's nix-bin (2.26.x) into a private prefix on Debian bookworm,
# without touching system libraries or apt state. Usage: install-nix.sh PREFIX
# Result: $PREFIX/bin/nix (wrapper running nix through the prefix's own glibc 2.41 loader).
set -eu
PREFIX=${1:?usage: install-nix.sh PREFIX}
A=$PREFIX/apt
mkdir -p "$A/etc/sources.list.d" "$A/etc/apt.conf.d" "$A/etc/preferences.d" "$A/state/lists/partial" \
         "$A/cache/archives/partial" "$A/debs" "$PREFIX/bin" "$PREFIX/root"
echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' > "$A/etc/sources.list"
: > "$A/state/status"   # empty dpkg status: apt resolves the full closure, installs nothing
APTOPTS="-o Dir::Etc=$A/etc -o Dir::Etc::sourcelist=$A/etc/sources.list -o Dir::Etc::sourceparts=$A/etc/sources.list.d
 -o Dir::Etc::parts=$A/etc/apt.conf.d -o Dir::Etc::preferencesparts=$A/etc/preferences.d
 -o Dir::State=$A/state -o Dir::State::status=$A/state/status -o Dir::Cache=$A/cache
 -o APT::Sandbox::User=root -o Acquire::Languages=none"
apt-get $APTOPTS -qq update
# Exactly the packages whose shared objects `nix` loads (computed with ld.so --list); no maintainer scripts run.
PKGS="nix-bin libc6 libgcc-s1 libstdc++6 zlib1g libpcre2-8-0
 libacl1 libarchive13t64 libboost-context1.83.0 libbrotli1 libbsd0 libbz2-1.0 libcom-err2 libcpuid17
 libcurl3t64-gnutls libffi8 libgc1 libgit2-1.9 libgmp10 libgnutls30t64 libgssapi-krb5-2 libhogweed6t64
 libhttp-parser2.9 libidn2-0 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 libldap2 liblowdown2
 liblz4-1 liblzma5 libmbedcrypto16 libmbedtls21 libmbedx509-7 libmd0 libnettle8t64 libnghttp2-14
 libnghttp3-9 libngtcp2-16 libngtcp2-crypto-gnutls8 libp11-kit0 libpsl5t64 libreadline8t64 librtmp1
 libsasl2-2 libseccomp2 libsodium23 libsqlite3-0 libssh2-1t64 libssl3t64 libtasn1-6 libtinfo6
 libunistring5 libxml2 libxxhash0 libzstd1"
(cd "$A/debs" && apt-get $APTOPTS -qq download $PKGS)
for d in "$A"/debs/*.deb; do dpkg-deb -x "$d" "$PREFIX/root"; done
cat > "$PREFIX/bin/nix" <<WRAP
#!/bin/sh
exec "$PREFIX/root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$PREFIX/root/usr/lib/x86_64-linux-gnu" --argv0 nix "$PREFIX/root/usr/bin/nix" "\$@"
WRAP
chmod +x "$PREFIX/bin/nix"
"$PREFIX/bin/nix" --version
