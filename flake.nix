{
  description = "VIPS SDK: a C-ABI SDK and conformance runner for accelerator drivers, with signed certification reports";

  # nixpkgs only, pinned in flake.lock to nixos-25.11 (rustc 1.91; the workspace needs 1.89).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      lib = nixpkgs.lib;
      forAll = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      version = (builtins.fromTOML (builtins.readFile ./Cargo.toml)).workspace.package.version;

      # The CLI, libvips_sdk (.so, .a), the CPU provider and the suites, laid out by
      # tools/install exactly as for C users; headers, vips-sdk.pc and the CMake package
      # config go to the `dev` output, pointing at `out`'s libraries.
      #
      # cudaSupport / rocmSupport add the CUDA and HIP providers. The CUDA one loads
      # its driver at run time (nothing of CUDA is needed to build it; on NixOS the
      # NVIDIA driver's libcuda is in /run/opengl-driver/lib); the HIP one is built
      # with its `hip-sys` feature, linking ROCm's libamdhip64 (rocmPackages.clr).
      sdk = pkgs: { cudaSupport ? false, rocmSupport ? false }: pkgs.rustPlatform.buildRustPackage {
        pname = "vips-sdk" + lib.optionalString cudaSupport "-cuda" + lib.optionalString rocmSupport "-rocm";
        inherit version;
        src = lib.cleanSource ./.;
        cargoLock.lockFile = ./Cargo.lock;
        outputs = [ "out" "dev" ];
        cargoBuildFlags = [ "-p" "vips-conformance" "-p" "vips-sdk-capi" "-p" "vsdk-provider-cpu" "-p" "vips-sdk" ]
          ++ lib.optionals cudaSupport [ "-p" "vsdk-provider-cuda" ]
          ++ lib.optionals rocmSupport [ "-p" "vsdk-provider-hip" "--features" "vsdk-provider-hip/hip-sys" ];
        nativeBuildInputs = [ pkgs.pkg-config ];
        buildInputs = lib.optionals rocmSupport [ pkgs.rocmPackages.clr ];
        env = lib.optionalAttrs rocmSupport { HIP_PATH = "${pkgs.rocmPackages.clr}"; };
        # The tests run in `checks` (they need more: libclang for the bindings drift test,
        # Python, cmake); the package builds what it installs.
        doCheck = false;
        installPhase = ''
          runHook preInstall
          target=target/${pkgs.stdenv.hostPlatform.rust.rustcTarget}
          CARGO_TARGET_DIR=$target bash tools/install "$out" --no-build
          for gpu in ${lib.optionalString cudaSupport "cuda"} ${lib.optionalString rocmSupport "hip"}; do
            install -m 755 "$target/release/libvsdk_provider_$gpu.so" "$out/lib/vips-sdk/providers/"
          done
          mkdir -p "$dev/lib"
          mv "$out/include" "$dev/include"
          mv "$out/lib/pkgconfig" "$out/lib/cmake" "$dev/lib/"
          # The .pc and CMake files find the prefix from their own location: in the
          # store, the headers are in $dev and the libraries in $out.
          sed -i -e "s|^prefix=.*|prefix=$dev|" -e "s|^libdir=.*|libdir=$out/lib|" \
            "$dev/lib/pkgconfig/vips-sdk.pc"
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
        vips-sdk = sdk pkgs { };
        # Off by default: the GPU providers as well.
        vips-sdk-cuda = sdk pkgs { cudaSupport = true; };
        vips-sdk-rocm = sdk pkgs { rocmSupport = true; };
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

      checks = forAll (pkgs: rec {
        package = self.packages.${pkgs.stdenv.hostPlatform.system}.vips-sdk;
        # README's test command inside the build, as tools/test runs it: the cdylibs the
        # tests load are built first. Left to tools/test: the GPU kernels' compile tests
        # and the flake layout test (they download NVRTC, ROCm and Nix).
        tests = package.overrideAttrs (old: {
          pname = "vips-sdk-tests";
          doCheck = true;
          nativeBuildInputs = old.nativeBuildInputs ++ [
            pkgs.cmake pkgs.openssl pkgs.vips
            (pkgs.python3.withPackages (ps: [ ps.numpy ps.cryptography ]))
          ];
          LIBCLANG_PATH = "${pkgs.llvmPackages.libclang.lib}/lib";
          checkPhase = ''
            runHook preCheck
            cargo build --offline --workspace
            cargo test --offline --workspace --exclude vsdk-provider-cuda --exclude vsdk-provider-hip \
              -- --skip the_flake_package_installs_the_c_library_layout
            runHook postCheck
          '';
        });
      });
    };
}
