#!/bin/sh
# CI sketch: evaluate every flake output offline against the stub nixpkgs. Run from the repo root.
set -eu
NIX=${NIX:-/tmp/nixfresh/bin/nix}
ST=$(mktemp -d /tmp/nixstate.XXXXXX)
export HOME=$ST/home XDG_CACHE_HOME=$ST/cache XDG_CONFIG_HOME=$ST/config XDG_DATA_HOME=$ST/data XDG_STATE_HOME=$ST/state
export NIX_CONF_DIR=$ST/etc NIX_STATE_DIR=$ST/var/nix NIX_LOG_DIR=$ST/var/log NO_COLOR=1
mkdir -p "$HOME" "$NIX_CONF_DIR"
cat > "$NIX_CONF_DIR/nix.conf" <<CONF
experimental-features = nix-command flakes
store = $ST/store
sandbox = false
substituters =
build-users-group =
flake-registry =
CONF
O="--offline --no-write-lock-file --override-input nixpkgs path:./tests/nix/stub-nixpkgs"
"$NIX" --version
# flake.nix and flake.lock agree (no re-lock needed) -- works offline, fetches nothing:
"$NIX" flake metadata --offline --no-update-lock-file --json > "$ST/metadata.json"
"$NIX" flake check --no-build --all-systems $O
"$NIX" flake show --all-systems --json $O > "$ST/show.json"
for s in x86_64-linux aarch64-linux; do
  "$NIX" eval $O --raw ".#packages.$s.default.drvPath"; echo
  "$NIX" eval $O --json ".#packages.$s.default.outputs"; echo
  "$NIX" eval $O --raw ".#apps.$s.conformance.program"; echo
  "$NIX" eval $O --raw ".#devShells.$s.default.drvPath"; echo
done
echo "state in $ST"
