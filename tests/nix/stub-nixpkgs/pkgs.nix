{ system, lib }:
let
  # Strip what `derivation` cannot take (functions, attrsets) and keep the rest as env.
  toEnv = v: if builtins.isFunction v then null
    else if builtins.isAttrs v && !(v ? outPath) then null
    else if builtins.isList v then map (x: if builtins.isAttrs x && !(x ? outPath) then null else x) v
    else v;
  mkDrv = { name, outputs ? [ "out" ], meta ? { }, passthru ? { }, ... }@args:
    let
      env = builtins.removeAttrs (builtins.mapAttrs (_: toEnv) args) [ "meta" "passthru" "name" "outputs" ];
      drv = derivation (env // {
        inherit name system outputs;
        builder = "/bin/sh";
        args = [ "-c" "echo 'stub nixpkgs: cannot build' >&2; exit 1" ];
      });
    in drv // passthru // { inherit meta passthru; }
       // lib.genAttrs outputs (o: drv.${o} // { inherit meta; });
  # real signature: mkDerivation (attrs or finalAttrs: attrs); the result has overrideAttrs.
  mkDerivation = fArgs:
    let
      args = if builtins.isFunction fArgs then fArgs final else fArgs;
      final = args;
      name = args.name or "${args.pname}-${args.version}";
    in mkDrv (args // { inherit name; }) // {
      overrideAttrs = f: mkDerivation (args // (if builtins.isFunction f then f args else f));
    };
  pkg = name: extra: mkDrv ({ inherit name; } // extra);
  hostPlatform = {
    inherit system;
    isLinux = true;
    isx86_64 = system == "x86_64-linux";
    isAarch64 = system == "aarch64-linux";
    rust.rustcTarget = if system == "x86_64-linux" then "x86_64-unknown-linux-gnu" else "aarch64-unknown-linux-gnu";
  };
  stdenv = { inherit mkDerivation system hostPlatform; cc = pkg "gcc-wrapper" { }; };
  python3 = pkg "python3-3.12" { } // {
    pkgs = {
      numpy = pkg "python3.12-numpy" { };
      pytest = pkg "python3.12-pytest" { };
      cryptography = pkg "python3.12-cryptography" { };
    };
    withPackages = f: pkg "python3-3.12-env" { deps = f python3.pkgs; };
  };
  llvmLibclang = pkg "clang-18-lib" { outputs = [ "out" "lib" "dev" ]; };
  rustPackages = { cargo = pkg "cargo-1.86.0" { }; rustc = pkg "rustc-1.86.0" { }; };
in {
  inherit rustPackages;
  inherit (rustPackages) cargo rustc;
  inherit stdenv python3 lib;
  python3Packages = python3.pkgs;
  inherit (stdenv) hostPlatform;
  mkShell = { name ? "nix-shell", packages ? [ ], inputsFrom ? [ ], shellHook ? "", ... }@args:
    mkDerivation (builtins.removeAttrs args [ "packages" "inputsFrom" ] // {
      inherit name shellHook;
      nativeBuildInputs = packages ++ builtins.concatLists (map (d: d.nativeBuildInputs or [ ]) inputsFrom);
    });
  rustPlatform = {
    # real signature: buildRustPackage { pname, version, src, cargoLock ? null, cargoHash ? "", ... }
    buildRustPackage = { pname, version, src, cargoLock ? null, cargoHash ? null, ... }@args:
      assert cargoLock != null || cargoHash != null;
      let
        # like importCargoLock: the lock file must exist and parse
        lock = builtins.fromTOML (builtins.readFile cargoLock.lockFile);
        crates = builtins.filter (p: p ? source) lock.package;
        vendor = pkg "${pname}-${version}-vendor" { n = toString (builtins.length crates); };
      in mkDerivation (builtins.removeAttrs args [ "cargoLock" "cargoHash" ] // {
        cargoDeps = vendor;
      });
    inherit (rustPackages) cargo rustc;
  };
  clippy = pkg "clippy-1.86.0" { };
  rustfmt = pkg "rustfmt-1.86.0" { };
  pkg-config = pkg "pkg-config-wrapper-0.29.2" { };
  cmake = pkg "cmake-3.31" { };
  openssl = pkg "openssl-3.4" { outputs = [ "out" "bin" "dev" ]; };
  vips = pkg "vips-8.17" { outputs = [ "out" "dev" "bin" ]; };
  llvmPackages = { libclang = llvmLibclang; clang = pkg "clang-wrapper-18" { }; };
  rocmPackages = { clr = pkg "clr-6.4.3" { }; };
  writeShellApplication = { name, text, runtimeInputs ? [ ], ... }:
    pkg name { inherit text runtimeInputs; meta = { mainProgram = name; }; };
  runCommand = name: env: buildCommand: mkDerivation (env // { inherit name buildCommand; });
}
