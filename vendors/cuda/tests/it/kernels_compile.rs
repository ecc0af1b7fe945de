//! Every kernel of the shared source compiles with NVRTC to machine code for
//! the data-centre GPUs the reference provider targets (sm_80, sm_90), with
//! the options the provider uses, and ptxas reports each one: registers, no
//! spills, no errors. No GPU is needed; NVRTC is (`tools/gpu-toolchains`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use vsdk_provider_cuda::nvrtc::{self, Image, Target};

/// NVRTC, or a failure that says how to get it: never a silent skip.
fn require_nvrtc() {
    if let Err(e) = nvrtc::version() {
        panic!(
            "{e}\n\nThe GPU compile tests need NVRTC. Run\n    eval \"$(tools/gpu-toolchains)\"\n\
             first: it installs NVIDIA's NVRTC and CUDA header wheels into a cache and sets \
             VIPS_NVRTC_LIBRARY and VIPS_CUDA_INCLUDE."
        );
    }
}

/// The `extern "C" __global__` kernels of the source, macros expanded by the
/// host C++ preprocessor (`$CXX`, else `c++`) as NVRTC would expand them.
fn kernels_in_source() -> BTreeSet<String> {
    // One directory per call: tests of this binary may run side by side.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("vsdk-cuda-kernels-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(vsdk_gpu::DEVICE_HEADER_NAME),
        vsdk_gpu::DEVICE_HEADER,
    )
    .unwrap();
    let src = dir.join("vips_kernels.cu");
    std::fs::write(&src, vsdk_gpu::KERNEL_SOURCE).unwrap();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(&cxx)
        .args(["-E", "-P", "-x", "c++", "-D__CUDACC_RTC__", "-I"])
        .arg(&dir)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running the C++ preprocessor {cxx}: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{cxx} -E failed on the kernel source:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let kernels = global_functions(&text);
    let not_extern_c: Vec<_> = kernels.iter().filter(|(_, c)| !c).map(|(n, _)| n).collect();
    assert!(
        not_extern_c.is_empty(),
        "kernels not declared extern \"C\" (their names would be mangled and not found by \
         name): {not_extern_c:?}"
    );
    let names: BTreeSet<String> = kernels.into_iter().map(|(n, _)| n).collect();
    assert!(
        !names.is_empty(),
        "no __global__ function found in the kernel source"
    );
    names
}

/// Each `__global__` function of preprocessed text: its name, and whether
/// the declaration says `extern "C"`.
fn global_functions(text: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("__global__") {
        // The declaration's start: after the previous `;` or `}`.
        let start = text[..at].rfind([';', '}']).map_or(0, |i| i + 1);
        let extern_c = text[start..at].contains("extern \"C\"");
        let mut rest = &text[at + "__global__".len()..];
        loop {
            rest = rest.trim_start();
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if len == 0 {
                break;
            }
            let ident = &rest[..len];
            rest = rest[len..].trim_start();
            if rest.starts_with('(') {
                if ident == "__launch_bounds__" {
                    let close = rest.find(')').expect("unbalanced __launch_bounds__");
                    rest = &rest[close + 1..];
                    continue;
                }
                found.push((ident.to_string(), extern_c));
                break;
            }
        }
    }
    found
}

/// What ptxas reported for one kernel.
#[derive(Debug, Default)]
struct Usage {
    registers: Option<u32>,
    /// "N bytes stack frame, N bytes spill stores, N bytes spill loads"
    properties: Option<String>,
    spill_stores: u64,
    spill_loads: u64,
}

fn leading_number(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// ptxas' `-v` report, per entry function.
fn ptxas_report(log: &str) -> BTreeMap<String, Usage> {
    let mut usage: BTreeMap<String, Usage> = BTreeMap::new();
    let mut entry: Option<String> = None;
    let mut properties_of: Option<String> = None;
    let quoted = |line: &str| line.split('\'').nth(1).map(str::to_string);
    for line in log.lines() {
        if line.contains("Compiling entry function") {
            entry = quoted(line);
            if let Some(e) = &entry {
                usage.entry(e.clone()).or_default();
            }
        } else if let Some(pos) = line.find("Function properties for ") {
            properties_of = Some(
                line[pos + "Function properties for ".len()..]
                    .trim()
                    .to_string(),
            );
        } else if line.contains("spill stores") {
            if let Some(name) = properties_of.take() {
                let u = usage.entry(name).or_default();
                let text = line
                    .find(|c: char| c.is_ascii_digit())
                    .map_or(line, |i| &line[i..]);
                u.properties = Some(text.trim().to_string());
                for part in line.split(',') {
                    if part.contains("spill stores") {
                        u.spill_stores = leading_number(part).unwrap_or(u64::MAX);
                    } else if part.contains("spill loads") {
                        u.spill_loads = leading_number(part).unwrap_or(u64::MAX);
                    }
                }
            }
        } else if let Some(pos) = line.find("Used ") {
            if let (Some(e), Some(n)) = (&entry, leading_number(&line[pos + 5..])) {
                usage.entry(e.clone()).or_default().registers = Some(n as u32);
            }
        }
    }
    usage
}

/// The `.entry` functions of a PTX text.
fn ptx_entries(ptx: &str) -> BTreeSet<String> {
    ptx.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix(".visible .entry ")?;
            Some(rest.split('(').next()?.trim().to_string())
        })
        .collect()
}

fn check_arch(arch: u32) {
    require_nvrtc();
    let source_kernels = kernels_in_source();
    let compiled =
        vsdk_provider_cuda::compile_kernel_source(Target::Cubin(arch), &["--ptxas-options=-v"])
            .unwrap_or_else(|e| panic!("the kernel source does not compile for sm_{arch}:\n{e}"));
    assert!(
        matches!(&compiled.image, Image::Cubin(c) if c.len() > 4 && c[..4] == *b"\x7fELF"),
        "sm_{arch}: NVRTC returned no cubin"
    );
    let log = &compiled.log;
    let problems: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("error") || l.contains("ptxas warning"))
        .collect();
    assert!(
        problems.is_empty(),
        "sm_{arch}: the compiler reported:\n{}",
        problems.join("\n")
    );

    let report = ptxas_report(log);
    assert_eq!(
        ptx_entries(&compiled.ptx),
        source_kernels,
        "sm_{arch}: the PTX's entry functions differ from the source's kernels"
    );
    let mut failures = Vec::new();
    for name in &source_kernels {
        match report.get(name) {
            None => failures.push(format!("{name}: no ptxas report")),
            Some(u) => {
                if u.registers.is_none() {
                    failures.push(format!("{name}: no `Used N registers` line"));
                }
                if u.properties.is_none() {
                    failures.push(format!("{name}: no stack frame / spill line"));
                }
                if u.spill_stores != 0 || u.spill_loads != 0 {
                    failures.push(format!(
                        "{name}: spills ({})",
                        u.properties.as_deref().unwrap_or("?")
                    ));
                }
            }
        }
    }
    eprintln!("sm_{arch}: {} kernels", source_kernels.len());
    for (name, u) in &report {
        eprintln!(
            "  {name:32} {:>3} registers  {}",
            u.registers.map_or("?".into(), |r| r.to_string()),
            u.properties.as_deref().unwrap_or("")
        );
    }
    if report.is_empty() {
        eprintln!("NVRTC log:\n{log}");
    }
    assert!(failures.is_empty(), "sm_{arch}:\n{}", failures.join("\n"));
}

#[test]
fn every_kernel_compiles_for_sm_80_without_spills() {
    check_arch(80);
}

#[test]
fn every_kernel_compiles_for_sm_90_without_spills() {
    check_arch(90);
}

/// The provider's choice for a device: a cubin when NVRTC knows the device,
/// PTX for a newer one. Both images are produced.
#[test]
fn targets_chosen_for_devices_compile() {
    require_nvrtc();
    let archs = nvrtc::supported_archs()
        .unwrap()
        .expect("NVRTC 12 lists its architectures");
    assert!(archs.contains(&80) && archs.contains(&90), "{archs:?}");
    assert_eq!(
        Target::for_device(9, 0, Some(&archs)),
        Ok(Target::Cubin(90))
    );
    let newest = *archs.iter().max().unwrap();
    // A GPU one generation past this NVRTC gets PTX it can JIT.
    let future = Target::for_device(newest / 10 + 1, 0, Some(&archs)).unwrap();
    assert_eq!(future, Target::Ptx(newest));
    let ptx = vsdk_provider_cuda::compile_kernel_source(Target::Ptx(80), &[]).unwrap();
    match &ptx.image {
        Image::Ptx(bytes) => {
            assert_eq!(
                bytes.last(),
                Some(&0),
                "PTX for cuModuleLoadData is NUL-terminated"
            );
            assert!(String::from_utf8_lossy(bytes).contains(".target sm_80"));
        }
        Image::Cubin(_) => panic!("compute_80 gave a cubin"),
    }
}

#[test]
fn a_broken_source_reports_the_compiler_error() {
    require_nvrtc();
    let source = "#include \"vips_device.h\"\n\
                  extern \"C\" __global__ void broken(float* x) {\n\
                  \x20 x[threadIdx.x] = undefined_name;\n\
                  }\n";
    let err = nvrtc::compile(
        source,
        &[(vsdk_gpu::DEVICE_HEADER_NAME, vsdk_gpu::DEVICE_HEADER)],
        &[Target::Cubin(80).option()],
    )
    .expect_err("a source using an undefined name compiled");
    assert!(
        err.contains("vips_kernels.cu(3): error: identifier \"undefined_name\" is undefined"),
        "{err}"
    );
    assert!(err.contains("NVRTC_ERROR_COMPILATION"), "{err}");

    // ptxas' own errors (resource limits) come back the same way.
    let too_big = "extern \"C\" __global__ void big(float* x) {\n\
                   \x20 __shared__ float s[16384 * 2];\n\
                   \x20 s[threadIdx.x] = x[threadIdx.x];\n\
                   \x20 __syncthreads();\n\
                   \x20 x[threadIdx.x] = s[(threadIdx.x + 1) % 32768];\n\
                   }\n";
    let err = nvrtc::compile(too_big, &[], &[Target::Cubin(80).option()])
        .expect_err("128 KiB of static shared memory compiled");
    assert!(
        err.contains("ptxas error") && err.contains("too much shared data"),
        "{err}"
    );
}

#[test]
fn parsers_read_what_ptxas_prints() {
    let log = "ptxas info    : 0 bytes gmem\n\
               ptxas info    : Compiling entry function 'k1' for 'sm_80'\n\
               ptxas info    : Function properties for k1\n\
               \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
               ptxas info    : Used 14 registers, used 1 barriers, 128 bytes smem, 372 bytes cmem[0]\n\
               ptxas info    : Compiling entry function 'k2' for 'sm_80'\n\
               ptxas info    : Function properties for k2\n\
               \x20   8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n\
               ptxas info    : Used 255 registers, 372 bytes cmem[0]\n";
    let r = ptxas_report(log);
    assert_eq!(r["k1"].registers, Some(14));
    assert_eq!((r["k1"].spill_stores, r["k1"].spill_loads), (0, 0));
    assert_eq!(r["k2"].registers, Some(255));
    assert_eq!((r["k2"].spill_stores, r["k2"].spill_loads), (4, 8));

    let src = "extern \"C\" __global__ void __launch_bounds__(256) a(int* x) {}\n\
               __global__ void b(int* x) {}\n\
               extern \"C\" __global__ void c(const float* x, int n) {}";
    assert_eq!(
        global_functions(src),
        vec![("a".into(), true), ("b".into(), false), ("c".into(), true)]
    );
    assert_eq!(
        ptx_entries(".visible .entry a(\n\t.param .u64 a_param_0\n)\n.visible .entry bb(\n"),
        BTreeSet::from(["a".to_string(), "bb".to_string()])
    );
}

/// NVRTC carries no `cuda_fp16.h`: the provider finds the CUDA headers
/// itself, from `VIPS_CUDA_INCLUDE`, or without it beside a wheel's NVRTC
/// (or in a toolkit). Run twice: as set up, and in a child process without
/// `VIPS_CUDA_INCLUDE`.
#[test]
fn cuda_headers_are_found() {
    require_nvrtc();
    let source = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\
                  extern \"C\" __global__ void h(__half* a, __nv_bfloat16* b) {\n\
                  \x20 a[0] = __float2half(__bfloat162float(b[0]));\n\
                  }\n";
    nvrtc::compile(source, &[], &[Target::Cubin(80).option()])
        .unwrap_or_else(|e| panic!("include directory {:?}:\n{e}", nvrtc::include_dir()));
    if std::env::var_os("VSDK_CUDA_HEADERS_CHILD").is_some() {
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "kernels_compile::cuda_headers_are_found",
            "--nocapture",
        ])
        .env_remove("VIPS_CUDA_INCLUDE")
        .env("VSDK_CUDA_HEADERS_CHILD", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "without VIPS_CUDA_INCLUDE:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
