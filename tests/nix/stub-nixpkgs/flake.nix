{
  # STUB of nixpkgs: only the attributes the project's flake uses, with the real
  # signatures. Every package is a real (unbuildable) `derivation`, so
  # `nix flake check --no-build`, `nix eval ...drvPath` and `nix flake show` work offline.
  description = "stub nixpkgs for offline flake evaluation";
  outputs = { self }: {
    lib = import ./lib.nix;
    legacyPackages = self.lib.genAttrs [ "x86_64-linux" "aarch64-linux" ]
      (system: import ./pkgs.nix { inherit system; lib = self.lib; });
  };
}
