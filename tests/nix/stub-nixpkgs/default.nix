# allows `import nixpkgs { inherit system; }` as well as legacyPackages
{ system ? builtins.currentSystem, overlays ? [ ], config ? { } }:
import ./pkgs.nix { inherit system; lib = import ./lib.nix; }
