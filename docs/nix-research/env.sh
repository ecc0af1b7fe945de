# source me: isolated nix state under $NIXR (nothing outside /tmp is touched)
export NIXR=${NIXR:-/tmp/nixroot}
export NIX_CONF_DIR=$NIXR/etc          # nix.conf lives here (instead of /etc/nix)
export NIX_STATE_DIR=$NIXR/var/nix     # only used by the default store; harmless
export NIX_LOG_DIR=$NIXR/var/log/nix
export XDG_CACHE_HOME=$NIXR/cache      # fetcher cache + eval cache (~/.cache/nix)
export XDG_CONFIG_HOME=$NIXR/config XDG_DATA_HOME=$NIXR/data XDG_STATE_HOME=$NIXR/state
export HOME=$NIXR/home
mkdir -p $NIX_CONF_DIR $HOME $XDG_CACHE_HOME
cat > $NIX_CONF_DIR/nix.conf <<CONF
experimental-features = nix-command flakes
store = $NIXR/store
sandbox = false
substituters =
build-users-group =
flake-registry =
CONF
