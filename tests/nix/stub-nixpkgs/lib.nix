let
  lib = {
    genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
    optionals = cond: xs: if cond then xs else [ ];
    optional = cond: x: if cond then [ x ] else [ ];
    optionalString = cond: s: if cond then s else "";
    optionalAttrs = cond: as: if cond then as else { };
    concatStringsSep = builtins.concatStringsSep;
    concatMapStringsSep = sep: f: xs: builtins.concatStringsSep sep (map f xs);
    mapAttrs = builtins.mapAttrs;
    attrValues = builtins.attrValues;
    hasSuffix = suffix: s:
      let ls = builtins.stringLength s; lx = builtins.stringLength suffix;
      in ls >= lx && builtins.substring (ls - lx) lx s == suffix;
    getOutput = o: pkg: pkg.${o} or pkg;
    getLib = lib.getOutput "lib";
    getDev = lib.getOutput "dev";
    getBin = lib.getOutput "bin";
    makeLibraryPath = ps: builtins.concatStringsSep ":" (map (p: "${lib.getLib p}/lib") ps);
    makeBinPath = ps: builtins.concatStringsSep ":" (map (p: "${lib.getBin p}/bin") ps);
    getExe = x: "${lib.getBin x}/bin/${x.meta.mainProgram or x.pname or x.name}";
    getExe' = x: y: "${lib.getBin x}/bin/${y}";
    cleanSourceFilter = name: type:
      let b = baseNameOf (toString name);
      in !(type == "directory" && (b == ".git" || b == "target" || b == "result"));
    cleanSourceWith = { src, filter ? (_: _: true), name ? "source" }:
      builtins.path { path = src; inherit name; filter = n: t: lib.cleanSourceFilter n t && filter n t; };
    cleanSource = src: lib.cleanSourceWith { inherit src; };
    licenses = { asl20 = { spdxId = "Apache-2.0"; }; mit = { spdxId = "MIT"; }; };
    platforms = { linux = [ "x86_64-linux" "aarch64-linux" ]; };
    maintainers = { };
    systems.flakeExposed = [ "x86_64-linux" "aarch64-linux" ];
    versions.majorMinor = v: builtins.concatStringsSep "." (lib.take 2 (builtins.splitVersion v));
    take = n: xs: builtins.genList (i: builtins.elemAt xs i) (if n < builtins.length xs then n else builtins.length xs);
  };
in lib
