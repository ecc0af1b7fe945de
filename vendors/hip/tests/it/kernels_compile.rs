//! The kernel source compiles for AMD GPUs without one: offline with hipcc
//! (checking every kernel's resource usage: no scratch, no spills, LDS within
//! 64 KiB) and at run time with hiprtc through this crate's binding, for a
//! CDNA (gfx90a, wave64) and an RDNA (gfx1030, wave32) target.
//!
//! ROCm is required, not optional: a missing hipcc or HIP runtime fails these
//! tests with the command that installs them (`tools/gpu-toolchains`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use vsdk_provider_hip::{compile_kernels, Hiprtc, HIPRTC_OPTIONS};

/// A CDNA and an RDNA target.
const TARGETS: &[&str] = &["gfx90a", "gfx1030"];
const LDS_LIMIT: u64 = 64 * 1024;
const INSTALL: &str = "run `eval \"$(tools/gpu-toolchains)\"` (it installs Debian's ROCm 5.2: \
                       hipcc, libamdhip64-5, libhiprtc-builtins5, rocm-device-libs)";

/// hiprtc calls one at a time: tests of one binary run on several threads.
static HIPRTC: Mutex<()> = Mutex::new(());

fn hiprtc() -> &'static Hiprtc {
    vsdk_provider_hip::hiprtc()
        .unwrap_or_else(|e| panic!("hiprtc is not available: {e}\n{INSTALL}"))
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn hipcc() -> PathBuf {
    std::env::var_os("HIPCC")
        .map(PathBuf::from)
        .or_else(|| find_program("hipcc"))
        .unwrap_or_else(|| panic!("hipcc not found (set HIPCC or put it on PATH); {INSTALL}"))
}

/// A fresh directory holding the kernel source and its header as the
/// provider hands them to hiprtc.
fn source_dir(tag: &str) -> PathBuf {
    // Unique per call: tests run in parallel and some use the same tag.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hip-{tag}-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("vips_kernels.cu"), vsdk_gpu::KERNEL_SOURCE).unwrap();
    std::fs::write(
        dir.join(vsdk_gpu::DEVICE_HEADER_NAME),
        vsdk_gpu::DEVICE_HEADER,
    )
    .unwrap();
    dir
}

/// C-like tokens: identifiers, string literals, single punctuation.
fn tokens(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else {
            i += 1;
        }
        out.push(&text[start..i]);
    }
    out
}

/// The `extern "C" __global__` kernels of preprocessed source text:
/// `extern "C" __global__ void [__launch_bounds__(...)] NAME(`.
fn global_kernels(text: &str) -> BTreeSet<String> {
    let t = tokens(text);
    let mut names = BTreeSet::new();
    for i in 0..t.len().saturating_sub(3) {
        if t[i] != "extern" || t[i + 1] != "\"C\"" || t[i + 2] != "__global__" {
            continue;
        }
        let mut j = i + 3;
        while j < t.len() {
            if t[j] == "__launch_bounds__" {
                // Skip the balanced parentheses that follow.
                let mut depth = 0;
                j += 1;
                while j < t.len() {
                    match t[j] {
                        "(" => depth += 1,
                        ")" => depth -= 1,
                        _ => {}
                    }
                    j += 1;
                    if depth == 0 {
                        break;
                    }
                }
                continue;
            }
            if t.get(j + 1) == Some(&"(") && t[j] != "void" {
                names.insert(t[j].to_string());
                break;
            }
            j += 1;
        }
    }
    names
}

/// The kernels of the source as hiprtc sees it: the source preprocessed by
/// the system C++ preprocessor with hiprtc's macros (`__HIPCC_RTC__`,
/// `__HIP__`), so the macro-generated kernels are expanded while
/// `__global__` stays a plain word.
fn source_kernels() -> BTreeSet<String> {
    let dir = source_dir("preprocess");
    let cc = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(&cc)
        .current_dir(&dir)
        .args([
            "-E",
            "-P",
            "-x",
            "c++",
            "-D__HIPCC_RTC__",
            "-D__HIP__",
            "vips_kernels.cu",
        ])
        .output()
        .unwrap_or_else(|e| panic!("could not run the C++ preprocessor `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "`{cc} -E` failed on the kernel source:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = global_kernels(&String::from_utf8_lossy(&out.stdout));
    assert!(
        !names.is_empty(),
        "no extern \"C\" __global__ kernel found in the source"
    );
    names
}

/// Resource usage per kernel, from clang's `-Rpass-analysis=kernel-resource-usage`
/// remarks (ROCm 5.2 / clang 15 spelling):
/// `file:L:C: remark: Function Name: vips_gelu_f32 [-Rpass-analysis=...]`
/// followed by `remark:     SGPRs: 17`, `VGPRs`, `ScratchSize [bytes/lane]`,
/// `Occupancy [waves/SIMD]`, `SGPRs Spill`, `VGPRs Spill`, `LDS Size [bytes/block]`.
fn resource_usage(stderr: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in stderr.lines() {
        let Some((_, rest)) = line.split_once("remark: ") else {
            continue;
        };
        let Some(body) = rest.strip_suffix(" [-Rpass-analysis=kernel-resource-usage]") else {
            continue;
        };
        let Some((key, value)) = body.trim().split_once(": ") else {
            continue;
        };
        if key == "Function Name" {
            current = Some(value.to_string());
            out.entry(value.to_string()).or_default();
        } else if let Some(f) = &current {
            out.entry(f.clone())
                .or_default()
                .insert(key.to_string(), value.to_string());
        }
    }
    out
}

fn number(usage: &BTreeMap<String, String>, key: &str, kernel: &str, target: &str) -> u64 {
    let v = usage
        .get(key)
        .unwrap_or_else(|| panic!("{target} {kernel}: no `{key}` in the remarks: {usage:?}"));
    v.parse()
        .unwrap_or_else(|_| panic!("{target} {kernel}: `{key}` is {v:?}, not a number"))
}

#[test]
fn every_kernel_builds_with_hipcc_without_scratch_or_spills() {
    let hipcc = hipcc();
    let kernels = source_kernels();
    for target in TARGETS {
        let dir = source_dir(&format!("hipcc-{target}"));
        let out = Command::new(&hipcc)
            .current_dir(&dir)
            .arg(format!("--offload-arch={target}"))
            .args([
                "--cuda-device-only",
                "-c",
                "-Rpass-analysis=kernel-resource-usage",
                "-x",
                "hip",
                "vips_kernels.cu",
                "-o",
                "vips_kernels.o",
            ])
            .output()
            .unwrap_or_else(|e| panic!("could not run {}: {e}; {INSTALL}", hipcc.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "hipcc --offload-arch={target} failed ({}):\n{stderr}",
            out.status
        );
        let object = std::fs::metadata(dir.join("vips_kernels.o")).map(|m| m.len());
        assert!(
            matches!(object, Ok(n) if n > 0),
            "hipcc --offload-arch={target} wrote no code object: {object:?}"
        );
        let usage = resource_usage(&stderr);
        println!("{target}: kernel SGPRs VGPRs scratch LDS occupancy");
        for k in &kernels {
            let u = usage.get(k).unwrap_or_else(|| {
                panic!(
                    "{target}: kernel {k} has no resource-usage remark (kernels with remarks: {:?})",
                    usage.keys().collect::<Vec<_>>()
                )
            });
            let scratch = number(u, "ScratchSize [bytes/lane]", k, target);
            let sgpr_spill = number(u, "SGPRs Spill", k, target);
            let vgpr_spill = number(u, "VGPRs Spill", k, target);
            let lds = number(u, "LDS Size [bytes/block]", k, target);
            println!(
                "{target}: {k} {} {} {scratch} {lds} {}",
                number(u, "SGPRs", k, target),
                number(u, "VGPRs", k, target),
                number(u, "Occupancy [waves/SIMD]", k, target),
            );
            assert_eq!(
                scratch, 0,
                "{target} {k}: uses scratch (private) memory: {u:?}"
            );
            assert_eq!(
                (sgpr_spill, vgpr_spill),
                (0, 0),
                "{target} {k}: spills: {u:?}"
            );
            assert!(
                lds <= LDS_LIMIT,
                "{target} {k}: {lds} bytes of LDS (limit {LDS_LIMIT})"
            );
        }
    }
}

#[test]
fn the_source_defines_every_kernel_the_host_launches() {
    let in_source = source_kernels();
    let launched: BTreeSet<String> = vsdk_gpu::kernel_names().into_iter().collect();
    let missing: Vec<_> = launched.difference(&in_source).collect();
    assert!(
        missing.is_empty(),
        "kernels the host launches but the source lacks: {missing:?}"
    );
}

#[test]
fn hiprtc_compiles_the_kernels_for_cdna_and_rdna() {
    let rtc = hiprtc();
    let kernels = source_kernels();
    let _one = HIPRTC.lock().unwrap_or_else(|p| p.into_inner());
    for target in TARGETS {
        let started = std::time::Instant::now();
        let code = compile_kernels(rtc, target)
            .unwrap_or_else(|e| panic!("hiprtc ({}) failed for {target}:\n{e}", rtc.path));
        println!(
            "hiprtc {target}: {} bytes in {:.2} s",
            code.len(),
            started.elapsed().as_secs_f64()
        );
        assert!(
            code.starts_with(b"\x7fELF"),
            "{target}: not an ELF code object"
        );
        // Every kernel is a symbol of the code object (with its `.kd` descriptor).
        for k in &kernels {
            let kd = format!("{k}.kd");
            assert!(
                code.windows(kd.len()).any(|w| w == kd.as_bytes()),
                "{target}: the code object has no kernel descriptor {kd}"
            );
        }
    }
}

#[test]
fn a_feature_suffixed_target_id_compiles_for_its_processor() {
    let rtc = hiprtc();
    let _one = HIPRTC.lock().unwrap_or_else(|p| p.into_inner());
    let code = compile_kernels(rtc, "gfx90a:sramecc+:xnack-")
        .unwrap_or_else(|e| panic!("hiprtc failed for gfx90a:sramecc+:xnack-:\n{e}"));
    assert!(code.starts_with(b"\x7fELF"));
}

#[test]
fn compiler_errors_come_back_with_the_log() {
    let rtc = hiprtc();
    let _one = HIPRTC.lock().unwrap_or_else(|p| p.into_inner());
    let headers = [(vsdk_gpu::DEVICE_HEADER_NAME, vsdk_gpu::DEVICE_HEADER)];
    let mut opts = vec!["--gpu-architecture=gfx90a"];
    opts.extend_from_slice(HIPRTC_OPTIONS);

    let broken = format!(
        "{}\nextern \"C\" __global__ void vips_broken(float* p) {{ p[0] = vips_no_such_name; }}\n",
        vsdk_gpu::KERNEL_SOURCE
    );
    let e = rtc
        .compile(&broken, "broken.cu", &headers, &opts)
        .expect_err("a source using an undeclared name compiled");
    assert!(
        e.contains("HIPRTC_ERROR_COMPILATION")
            && e.contains("undeclared identifier")
            && e.contains("vips_no_such_name"),
        "the error lacks hiprtc's result or the compiler's message: {e}"
    );

    // The LDS limit is the compiler's too.
    let too_big = "#include \"vips_device.h\"\n\
        extern \"C\" __global__ void vips_big_lds(float* p) {\n\
          __shared__ float s[32768];\n\
          s[threadIdx.x] = p[threadIdx.x];\n\
          __syncthreads();\n\
          p[threadIdx.x] = s[(threadIdx.x + 1) % 32768];\n\
        }\n";
    let e = rtc
        .compile(too_big, "too_big.cu", &headers, &opts)
        .expect_err("a kernel with 128 KiB of LDS compiled");
    assert!(
        e.contains("local memory") && e.contains("exceeds limit"),
        "the error lacks the LDS limit message: {e}"
    );

    // Without the header, the include fails and says so.
    let e = rtc
        .compile(vsdk_gpu::KERNEL_SOURCE, "no_header.cu", &[], &opts)
        .expect_err("the source compiled without its header");
    assert!(
        e.contains("vips_device.h"),
        "the error does not name the header: {e}"
    );
}

#[test]
fn hipcc_reports_a_broken_source() {
    let hipcc = hipcc();
    let dir = source_dir("hipcc-broken");
    let mut src = vsdk_gpu::KERNEL_SOURCE.to_string();
    src.push_str(
        "\nextern \"C\" __global__ void vips_broken(float* p) { p[0] = vips_no_such_name; }\n",
    );
    std::fs::write(dir.join("vips_kernels.cu"), src).unwrap();
    let out = Command::new(&hipcc)
        .current_dir(&dir)
        .args([
            "--offload-arch=gfx90a",
            "--cuda-device-only",
            "-c",
            "-x",
            "hip",
            "vips_kernels.cu",
            "-o",
            "vips_kernels.o",
        ])
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}; {INSTALL}", hipcc.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "hipcc accepted a broken source");
    assert!(
        stderr.contains("undeclared identifier 'vips_no_such_name'"),
        "hipcc's error is not the expected one:\n{stderr}"
    );
}

#[test]
fn the_kernel_parser_reads_launch_bounds_and_plain_kernels() {
    let text = "extern \"C\" __global__ void __launch_bounds__(256) vips_a(int x) {}\n\
                extern \"C\" __global__ void vips_b(const float* p) {}\n\
                __global__ void not_extern_c(int) {}\n\
                extern \"C\" __device__ void vips_not_a_kernel(int) {}\n";
    let names: Vec<_> = global_kernels(text).into_iter().collect();
    assert_eq!(names, ["vips_a", "vips_b"]);
}
