{
  description = "VIPS SDK: a C-ABI SDK and conformance runner for accelerator drivers, with signed certification reports";

  # nixpkgs only. TODO before this lands (issue 13): flake.lock pins a nixos-25.05 revision taken
  # from public lock files (unverified from here), and 25.05's rustc is 1.86 while the workspace's
  # rust-version is 1.89: pin nixos-25.11 or later (rev + narHash checked on a machine that
  # reaches github). See docs/nix-research/README.md.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.05";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      lib = nixpkgs.lib;
      forAll = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      version = (builtins.fromTOML (builtins.readFile ./Cargo.toml)).workspace.package.version;

      # The CLI, libvips_sdk (.so, .a), the CPU provider and the suites, laid out by
      # tools/install exactly as for C users; headers, vips-sdk.pc and the CMake package
      # config go to the `dev` output, pointing at `out`'s libraries.
      sdk = pkgs: pkgs.rustPlatform.buildRustPackage {
        pname = "vips-sdk";
        inherit version;
        src = lib.cleanSource ./.;
        cargoLock.lockFile = ./Cargo.lock;
        outputs = [ "out" "dev" ];
        cargoBuildFlags = [ "-p" "vips-conformance" "-p" "vips-sdk-capi" "-p" "vsdk-provider-cpu" ];
        nativeBuildInputs = [ pkgs.pkg-config ];
        # The tests run in `checks` (they need more: libclang for the bindings drift test,
        # Python, cmake); the package builds what it installs.
        doCheck = false;
        installPhase = ''
          runHook preInstall
          CARGO_TARGET_DIR=target/${pkgs.stdenv.hostPlatform.rust.rustcTarget} \
            bash tools/install "$out" --no-build
          mkdir -p "$dev/lib"
          mv "$out/include" "$dev/include"
          mv "$out/lib/pkgconfig" "$out/lib/cmake" "$dev/lib/"
          # The .pc and CMake files find the prefix from their own location: in the
          # store, the headers are in $dev and the libraries in $out.
          sed -i -e "s|^libdir=.*|libdir=$out/lib|" "$dev/lib/pkgconfig/vips-sdk.pc"
          sed -i -e "s|\''${_vsdk_prefix}/lib|$out/lib|g" "$dev/lib/cmake/VipsSdk/VipsSdkConfig.cmake"
          runHook postInstall
        '';
        meta = {
          description = "VIPS SDK: conformance runner, C library and CPU reference provider";
          mainProgram = "vips-conformance";
          license = lib.licenses.asl20;
          platforms = lib.platforms.linux;
        };
      };
    in {
      packages = forAll (pkgs: rec {
        vips-sdk = sdk pkgs;
        # README's main job: the DINOv2 suite on the CPU provider, the table, a signed report.
        conformance = pkgs.writeShellApplication {
          name = "vips-conformance-dinov2";
          runtimeInputs = [ vips-sdk ];
          text = ''
            export VSDK_SUITES_PATH="${vips-sdk}/share/vips-sdk/suites''${VSDK_SUITES_PATH:+:$VSDK_SUITES_PATH}"
            vips-conformance keygen vips-key.pem --if-missing
            exec vips-conformance run dinov2-vits14 --report dinov2-vits14.report.json --sign-key vips-key.pem "$@"
          '';
        };
        default = vips-sdk;
      });

      apps = lib.genAttrs systems (system: rec {
        conformance = {
          type = "app";
          program = lib.getExe self.packages.${system}.conformance;
          meta.description = "Run the DINOv2 conformance suite on the CPU provider and write a signed report";
        };
        default = conformance;
      });

      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.stdenv.hostPlatform.system}.vips-sdk ];
          packages = [
            pkgs.cargo pkgs.rustc pkgs.clippy pkgs.rustfmt pkgs.pkg-config pkgs.cmake pkgs.openssl
            (pkgs.python3.withPackages (ps: [ ps.numpy ps.cryptography ]))
          ];
          LIBCLANG_PATH = "${pkgs.llvmPackages.libclang.lib}/lib";
        };
      });

      checks = forAll (pkgs: {
        package = self.packages.${pkgs.stdenv.hostPlatform.system}.vips-sdk;
        # The workspace's tests inside the build (no network: the GPU compile tests,
        # which download toolchains, are left to tools/test).
        tests = self.packages.${pkgs.stdenv.hostPlatform.system}.vips-sdk.overrideAttrs (old: {
          pname = "vips-sdk-tests";
          doCheck = true;
          nativeBuildInputs = old.nativeBuildInputs ++ [ pkgs.cmake pkgs.openssl (pkgs.python3.withPackages (ps: [ ps.numpy ps.cryptography ])) ];
          LIBCLANG_PATH = "${pkgs.llvmPackages.libclang.lib}/lib";
          cargoTestFlags = [ "--workspace" "--exclude" "vsdk-provider-cuda" "--exclude" "vsdk-provider-hip" ];
        });
      });
    };
}
