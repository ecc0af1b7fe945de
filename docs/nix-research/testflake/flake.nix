{
  description = "test flake shaped like the VIPS SDK flake";
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.05";
  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in {
      packages = forAll (pkgs: rec {
        vips-sdk = pkgs.rustPlatform.buildRustPackage {
          pname = "vips-sdk";
          version = "0.1.0";
          src = pkgs.lib.cleanSource ./.;
          cargoLock.lockFile = ./Cargo.lock;
          outputs = [ "out" "dev" ];
          nativeBuildInputs = [ pkgs.pkg-config pkgs.cmake ];
          LIBCLANG_PATH = "${pkgs.llvmPackages.libclang.lib}/lib";
          postInstall = ''
            mkdir -p $out/lib/vips-sdk/providers $dev/include $dev/lib/pkgconfig
          '';
          meta = { mainProgram = "vips"; license = pkgs.lib.licenses.asl20; platforms = pkgs.lib.platforms.linux; };
        };
        conformance = pkgs.writeShellApplication {
          name = "vips-conformance";
          runtimeInputs = [ vips-sdk ];
          text = "exec vips conformance \"$@\"";
        };
        default = vips-sdk;
      });
      apps = nixpkgs.lib.genAttrs systems (system: rec {
        conformance = { type = "app"; program = nixpkgs.lib.getExe self.packages.${system}.conformance; };
        default = conformance;
      });
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          packages = [ pkgs.cargo pkgs.rustc pkgs.clippy pkgs.rustfmt pkgs.pkg-config (pkgs.python3.withPackages (ps: [ ps.numpy ])) ];
          LIBCLANG_PATH = "${pkgs.llvmPackages.libclang.lib}/lib";
        };
      });
      checks = nixpkgs.lib.genAttrs systems (system: {
        package = self.packages.${system}.default;
      });
    };
}
