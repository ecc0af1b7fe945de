//! Hostile input files through the command line: each one exits 2 with a
//! message naming the file (and the place, where there is one), never a
//! panic, within a bounded peak memory and time (docs/vips-format.md,
//! "Input limits"). Every file is built in a temporary directory at test
//! time; nothing big is committed.
//!
//! Each run is a child process reaped with `wait4`, which gives that child's
//! own peak resident set size (`ru_maxrss`), whatever else this test program
//! runs in parallel. A run still going after [`LIMIT`] is killed and fails.

#[path = "../../../sdk/tests/it/hostile_builders/mod.rs"]
mod hostile_builders;

use hostile_builders::*;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Peak resident memory allowed to any run.
const MAX_RSS_BYTES: u64 = 512 << 20;
/// A hang guard for two slow cores, not a benchmark.
const LIMIT: Duration = Duration::from_secs(20);

const DEMO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/suites/demo-mlp");

fn test_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").to_path_buf()
}

struct Run {
    /// The exit code; None if a signal ended the process.
    code: Option<i32>,
    stdout: String,
    stderr: String,
    max_rss_bytes: u64,
    wall: Duration,
}

/// Set in the helper process: the arguments of the run it measures.
const HELPER_ARGS: &str = "VSDK_HOSTILE_HELPER_ARGS";
/// Set in the helper process: the directory for the run's output and usage.
const HELPER_OUT: &str = "VSDK_HOSTILE_HELPER_OUT";

/// Runs `vips-conformance` with `args` and `env` (the CPU provider on the
/// search path), measuring its peak memory and wall time.
///
/// It runs as the child of a fresh helper process (this test program again,
/// running only [`measure_in_a_fresh_process`]): Linux counts the memory of
/// the process image a child was forked from, before its exec, in its
/// `ru_maxrss`, and this test program grows while it builds big files.
fn run(case: &str, args: &[&OsStr], env: &[(&str, &OsStr)]) -> Run {
    run_within(case, args, env, MAX_RSS_BYTES)
}

/// [`run`] with its own bound on the peak memory.
fn run_within(case: &str, args: &[&OsStr], env: &[(&str, &OsStr)], max_rss_bytes: u64) -> Run {
    let out = tempfile::tempdir().unwrap();
    let encoded: Vec<String> = args.iter().map(|a| hex(a.as_bytes())).collect();
    let helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hostile_files::measure_in_a_fresh_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ARGS, encoded.join(","))
        .env(HELPER_OUT, out.path())
        .env("VSDK_PROVIDER_PATH", test_dir())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run the helper");
    let read = |name: &str| std::fs::read(out.path().join(name)).unwrap_or_default();
    let usage = String::from_utf8(read("usage")).unwrap();
    assert!(
        helper.status.success() && !usage.is_empty(),
        "{case}: the helper failed: {}",
        String::from_utf8_lossy(&helper.stderr)
    );
    let f: Vec<i64> = usage
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let run = Run {
        code: (f[0] >= 0).then_some(f[0] as i32),
        stdout: String::from_utf8_lossy(&read("stdout")).into_owned(),
        stderr: String::from_utf8_lossy(&read("stderr")).into_owned(),
        max_rss_bytes: f[1] as u64,
        wall: Duration::from_millis(f[2] as u64),
    };
    println!(
        "{case}: exit {:?}, peak RSS {:.1} MiB, {:.2} s",
        run.code,
        run.max_rss_bytes as f64 / (1 << 20) as f64,
        run.wall.as_secs_f64()
    );
    assert!(
        f[3] == 0,
        "{case}: still running after {LIMIT:?}, killed\n{}",
        run.stderr
    );
    assert!(
        run.max_rss_bytes < max_rss_bytes,
        "{case}: peak RSS {} bytes, above {max_rss_bytes}\n{}",
        run.max_rss_bytes,
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{case}: {}", run.stderr);
    run
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> OsString {
    let bytes: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect();
    OsString::from_vec(bytes)
}

/// The helper: does nothing in a normal test run. In the helper process it
/// runs `vips-conformance` once, reaps it with `wait4` and writes its exit
/// code, peak RSS in bytes, wall time in ms and whether it was killed for
/// running past [`LIMIT`].
#[test]
fn measure_in_a_fresh_process() {
    let (Some(args), Some(out)) = (std::env::var_os(HELPER_ARGS), std::env::var_os(HELPER_OUT))
    else {
        return;
    };
    let out = PathBuf::from(out);
    let args: Vec<OsString> = args
        .to_str()
        .unwrap()
        .split(',')
        .filter(|a| !a.is_empty())
        .map(unhex)
        .collect();
    let start = Instant::now();
    // Reaped below with wait4, which std's `wait` would not give the usage of.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .args(&args)
        .env_remove(HELPER_ARGS)
        .env_remove(HELPER_OUT)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out.join("stdout")).unwrap())
        .stderr(std::fs::File::create(out.join("stderr")).unwrap())
        .spawn()
        .expect("run vips-conformance");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain data, filled by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut killed = false;
    loop {
        // SAFETY: our own child; valid out pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break;
        }
        if start.elapsed() > LIMIT && !killed {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // Linux reports kilobytes.
    let usage = format!(
        "{code} {} {} {}",
        usage.ru_maxrss * 1024,
        start.elapsed().as_millis(),
        u8::from(killed)
    );
    std::fs::write(out.join("usage"), usage).unwrap();
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// `run`, then: exit code 2 and every one of `needles` in stderr.
fn refused(case: &str, args: &[&OsStr], needles: &[&str]) {
    let r = run(case, args, &[]);
    assert_eq!(r.code, Some(2), "{case}: {}{}", r.stdout, r.stderr);
    for n in needles {
        assert!(
            r.stderr.contains(n),
            "{case}: wanted `{n}` in:\n{}",
            r.stderr
        );
    }
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, bytes).unwrap();
    p
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

/// A fresh seed per run, from the clock.
fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    println!("seed {s}");
    s
}

/// A suite directory: `document` and a golden file for it of `entries`.
fn suite_dir(dir: &Path, document: &str, entries: &[Entry]) -> PathBuf {
    let d = dir.join("suite");
    write(&d, "suite.yaml", document);
    write(
        &d,
        "suite.golden",
        golden(sha256(document.as_bytes()), entries),
    );
    d
}

// ---- 1, 2: seeded tensors --------------------------------------------------

#[test]
fn a_tiny_suite_seeding_a_gigabyte_image_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let s = seed();
    let doc = small_document(
        &format!("x: {{ dtype: uint8, shape: [32768, 32768, 1], source: {{ seeded: {{ seed: {s}, test_image: true }} }} }}"),
        "y: { dtype: uint8, shape: [1, 1, 1], source: golden }",
        "      - { op: vsdk.crop, inputs: [x], outputs: [y], attrs: { offsets: [0, 0, 0], sizes: [1, 1, 1] } }\n",
    );
    assert!(doc.len() < 700, "{} bytes", doc.len());
    let line = line_of(&doc, "x: {");
    let dir = suite_dir(
        tmp.path(),
        &doc,
        &[
            // The document's own recipe: only its size stops it.
            Entry::new("x", 4, &[32768, 32768, 1], Data::TestImage { seed: s }),
            Entry {
                sha256: sha256(&0f32.to_le_bytes()),
                ..Entry::new("y", 4, &[1, 1, 1], Data::Raw(vec![0]))
            },
        ],
    );
    let where_ = format!("{}:{line}:3: tensors.x.shape: a seeded uint8 [32768, 32768, 1] tensor is 1073741824 bytes once generated, above the 268435456-byte limit", dir.join("suite.yaml").display());
    refused(
        "run: 1 GiB seeded image",
        &[os("run"), dir.as_os_str(), os("--provider"), os("cpu")],
        &[&where_],
    );
    // The golden file on its own.
    let golden = dir.join("suite.golden");
    refused(
        "inspect: golden file seeding 1 GiB",
        &[os("inspect"), golden.as_os_str()],
        &[&format!(
            "{}: tensor `x`: a seeded uint8 [32768, 32768, 1] tensor is 1073741824 bytes",
            golden.display()
        )],
    );
}

#[test]
fn pack_refuses_a_document_seeding_2_to_the_36() {
    let tmp = tempfile::tempdir().unwrap();
    let doc = small_document(
        &format!("x: {{ dtype: float32, shape: [68719476736], source: {{ seeded: {{ seed: {}, uniform: [0.0, 1.0] }} }} }}", seed()),
        "y: { dtype: float32, shape: [1], source: golden }",
        "      - { op: vsdk.crop, inputs: [x], outputs: [y], attrs: { offsets: [0], sizes: [1] } }\n",
    );
    let line = line_of(&doc, "x: {");
    let path = write(tmp.path(), "doc.yaml", &doc);
    let y = write(tmp.path(), "y.npy", npy_f32("(1,)", &[0.5]));
    let out = tmp.path().join("out.golden");
    refused(
        "pack: seeded [2^36]",
        &[os("pack"), os("--document"), path.as_os_str(), os("--tensors"), y.as_os_str(), os("--out"), out.as_os_str()],
        &[&format!("{}:{line}:3: tensors.x.shape: float32 [68719476736] is 274877906944 bytes, above the 17179869184-byte tensor limit", path.display())],
    );
    assert!(!out.exists());
}

#[test]
fn seeded_tensors_beyond_the_total_are_refused_before_generate_computes() {
    let tmp = tempfile::tempdir().unwrap();
    let decls: String = (0..33)
        .map(|i| format!("  big{i}: {{ dtype: float32, shape: [67108864], source: {{ seeded: {{ seed: {i}, normal: [0.0, 1.0] }} }} }}\n"))
        .collect();
    let doc = demo_with_tensors(&decls);
    let line = line_of(&doc, "big32:");
    let dir = tmp.path().join("suite");
    let path = write(&dir, "suite.yaml", &doc);
    let out = tmp.path().join("out.golden");
    refused(
        "generate: 8.25 GiB of seeded tensors",
        &[os("generate"), dir.as_os_str(), os("--out"), out.as_os_str()],
        &[&format!("{}:{line}:3: tensors.big32.shape: the seeded tensors up to this one total 8858370048 bytes", path.display())],
    );
}

#[test]
fn a_seeded_tensor_at_the_limit_is_hashed_without_a_copy() {
    // 256 MiB of uint8 image: its canonical hash used to convert it to a
    // float64 copy of 2 GiB first.
    let tmp = tempfile::tempdir().unwrap();
    let doc = small_document(
        &format!("x: {{ dtype: uint8, shape: [8192, 8192, 4], source: {{ seeded: {{ seed: {}, test_image: true }} }} }}", seed()),
        "y: { dtype: uint8, shape: [1, 1, 4], source: golden }",
        "      - { op: vsdk.crop, inputs: [x], outputs: [y], attrs: { offsets: [0, 0, 0], sizes: [1, 1, 4] } }\n",
    );
    let path = write(tmp.path(), "doc.yaml", &doc);
    // Nothing of the document captured (pack computes `y` with the reference
    // from the regenerated image; a capture of it would be judged, not stored).
    let y = write(
        tmp.path(),
        "other.npy",
        npy("|u1", "(1, 1, 4)", &[1, 2, 3, 4]),
    );
    let out = tmp.path().join("out.golden");
    // pack computes `y` on the reference provider: the image and its upload,
    // 2 x 256 MiB, never the float64 copy of 2 GiB this test was written for.
    let r = run_within(
        "pack: a 256 MiB seeded image",
        &[
            os("pack"),
            os("--document"),
            path.as_os_str(),
            os("--tensors"),
            y.as_os_str(),
            os("--out"),
            out.as_os_str(),
        ],
        &[],
        640 << 20,
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("0 stored, 1 seeded, 1 computed"),
        "{}",
        r.stdout
    );
}

// ---- 3: documents ----------------------------------------------------------

#[test]
fn deep_or_oversized_yaml_is_refused_before_the_parser_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let deep = write(tmp.path(), "deep.yaml", deep_block_sequence(25_000));
    refused(
        "list: 25 000 nested block sequences",
        &[os("list"), deep.as_os_str()],
        &[&format!(
            "{}:1:129: the YAML nests deeper than 64 levels here",
            deep.display()
        )],
    );
    let flow = write(
        tmp.path(),
        "flow.yaml",
        format!("vips: {}1\n", "[".repeat(25_000)),
    );
    refused(
        "list: 25 000 nested flow sequences",
        &[os("list"), flow.as_os_str()],
        &[
            &format!("{}:1:", flow.display()),
            "nests deeper than 64 levels",
        ],
    );
    let text = std::fs::read_to_string(DEMO_YAML).unwrap().replacen(
        "    notes:\n",
        &format!("    notes:\n      - {}", deep_block_sequence(25_000)),
        1,
    );
    let line = line_of(&text, "- - - -");
    let notes = write(tmp.path(), "notes/suite.yaml", &text);
    std::fs::copy(
        format!("{DEMO_DIR}/suite.golden"),
        tmp.path().join("notes/suite.golden"),
    )
    .unwrap();
    refused(
        "run: deep nesting in a stage's notes",
        &[
            os("run"),
            notes.parent().unwrap().as_os_str(),
            os("--provider"),
            os("cpu"),
        ],
        &[
            &format!("{}:{line}:", notes.display()),
            "nests deeper than 64 levels",
        ],
    );
    // 5 MiB: the parser took about 100 bytes of memory per byte of this.
    let n = 5 << 19;
    let big = demo_with_tensors(&format!(
        "  big: {{ dtype: float32, shape: [{n}], source: {{ values: [{}] }} }}\n",
        vec!["0"; n].join(",")
    ));
    let path = write(tmp.path(), "big.yaml", &big);
    refused(
        "list: a 5 MiB document",
        &[os("list"), path.as_os_str()],
        &[&format!(
            "{}:0:0: is {} bytes, larger than the 4194304-byte limit",
            path.display(),
            big.len()
        )],
    );
}

#[test]
fn the_worst_document_within_the_size_limit_stays_within_the_memory_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let head = demo_with_tensors("");
    let n = ((4 << 20) - head.len() - 200) / 2;
    let doc = demo_with_tensors(&format!(
        "  big: {{ dtype: float32, shape: [{n}], source: {{ values: [{}] }} }}\n",
        vec!["0"; n].join(",")
    ));
    assert!(doc.len() <= 4 << 20 && doc.len() > (4 << 20) - 400);
    let path = write(tmp.path(), "big.yaml", &doc);
    let r = run(
        "list: a 4 MiB list of zeros",
        &[os("list"), path.as_os_str()],
        &[],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

// ---- 4: not regular files --------------------------------------------------

fn mkfifo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p
}

#[test]
fn fifos_and_devices_are_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let out = t.join("out.golden");
    let zero = os("/dev/zero");
    let zero_msg = ["/dev/zero:", "not a regular file (a character device)"];
    refused("list /dev/zero", &[os("list"), zero], &zero_msg);
    refused("inspect /dev/zero", &[os("inspect"), zero], &zero_msg);
    refused(
        "run /dev/zero",
        &[os("run"), zero, os("--provider"), os("cpu")],
        &zero_msg,
    );
    let doc = mkfifo(t, "fifo.yaml");
    let fifo_msg = |p: &Path| format!("{}: not a regular file (a FIFO)", p.display());
    let fifo_doc_msg = format!("{}:0:0: not a regular file (a FIFO)", doc.display());
    refused(
        "list FIFO",
        &[os("list"), doc.as_os_str()],
        &[&fifo_doc_msg],
    );
    refused(
        "pack --document FIFO",
        &[
            os("pack"),
            os("--document"),
            doc.as_os_str(),
            os("--tensors"),
            zero,
            os("--out"),
            out.as_os_str(),
        ],
        &[&fifo_doc_msg],
    );
    let golden = mkfifo(t, "fifo.golden");
    refused(
        "inspect FIFO",
        &[os("inspect"), golden.as_os_str()],
        &[&fifo_msg(&golden)],
    );
    // A suite whose golden file is a FIFO.
    let suite = t.join("suite");
    write(&suite, "suite.yaml", std::fs::read(DEMO_YAML).unwrap());
    let g = mkfifo(&suite, "suite.golden");
    refused(
        "run: golden file a FIFO",
        &[os("run"), suite.as_os_str(), os("--provider"), os("cpu")],
        &[&fifo_msg(&g)],
    );
    for name in ["h.npy", "c.npz", "c.safetensors"] {
        let capture = mkfifo(t, name);
        refused(
            &format!("check --tensors FIFO {name}"),
            &[
                os("check"),
                os(DEMO_DIR),
                os("--tensors"),
                capture.as_os_str(),
            ],
            &[&fifo_msg(&capture)],
        );
        refused(
            &format!("pack --tensors FIFO {name}"),
            &[
                os("pack"),
                os("--document"),
                os(DEMO_YAML),
                os("--tensors"),
                capture.as_os_str(),
                os("--out"),
                out.as_os_str(),
            ],
            &[&fifo_msg(&capture)],
        );
    }
    let zero_npy = t.join("zero.npy");
    std::os::unix::fs::symlink("/dev/zero", &zero_npy).unwrap();
    refused(
        "check --tensors -> /dev/zero",
        &[
            os("check"),
            os(DEMO_DIR),
            os("--tensors"),
            zero_npy.as_os_str(),
        ],
        &[&format!(
            "{}: not a regular file (a character device)",
            zero_npy.display()
        )],
    );
}

// ---- 5: capture files ------------------------------------------------------

#[test]
fn hostile_captures_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let check = |case: &str, file: &Path, needles: &[&str]| {
        let mut all = vec![file.display().to_string()];
        all.extend(needles.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        refused(
            case,
            &[os("check"), os(DEMO_DIR), os("--tensors"), file.as_os_str()],
            &all,
        );
    };
    let deep = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': {}\n",
        "[".repeat(30)
    );
    let p = write(
        t,
        "deep/h.npy",
        npy_raw((1, 0), deep.len() as u32, deep.as_bytes()),
    );
    check(
        "npy: 30 unclosed brackets",
        &p,
        &["bad .npy header: brackets nest deeper than 8 levels"],
    );
    let p = write(t, "long/h.npy", npy_raw((2, 0), u32::MAX, b"{}"));
    check(
        "npy: header length 0xFFFFFFFF",
        &p,
        &["not a .npy file: the header declares 4294967295 bytes, above the 65536-byte limit"],
    );
    let p = write(t, "huge/h.npy", npy("<f4", "(4294967296, 4294967296)", &[]));
    check(
        "npy: shape beyond 2^64 bytes",
        &p,
        &["larger than the 17179869184-byte tensor limit"],
    );
    let mut liar = Member::stored("h.npy", npy_f32("(2,)", &[1.0, 2.0]));
    (liar.method, liar.size) = (8, u32::MAX as u64);
    let p = write(t, "liar.npz", zip(&[liar]));
    check(
        "npz: declared size beyond deflate's ratio",
        &p,
        &["array `h`: the member declares 4294967295 bytes from 136 compressed"],
    );
    let p = write(t, "huge.safetensors", safetensors_raw(1 << 40, b"{}"));
    check(
        "safetensors: header length 2^40",
        &p,
        &["not a safetensors file: the header declares 1099511627776 bytes, above the 16777216-byte limit"],
    );
    // A name captured in two files is refused by `check` (as before).
    let v: Vec<f32> = vec![0.5; 128];
    let a = write(t, "a/h.npy", npy_f32("(4, 32)", &v));
    let b = write(t, "b/h.npy", npy_f32("(4, 32)", &v));
    refused(
        "check: `h` captured twice",
        &[
            os("check"),
            os(DEMO_DIR),
            os("--tensors"),
            a.as_os_str(),
            os("--tensors"),
            b.as_os_str(),
        ],
        &[&format!(
            "`h` is captured twice: in {} and in {}",
            a.display(),
            b.display()
        )],
    );
}

#[test]
fn pack_never_inflates_an_npz_member_the_document_does_not_name() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let big = write(t, "big.npz", npz_with_a_gigabyte_member());
    assert!(std::fs::metadata(&big).unwrap().len() < 2 << 20);
    let demo = vips_sdk::suite::Suite::open(Path::new(DEMO_DIR)).unwrap();
    let members = demo_members(&demo);
    let good = write(t, "good.npz", zip(&members));
    let out = t.join("out.golden");
    let r = run(
        "pack: an unused 1 GiB .npz member",
        &[
            os("pack"),
            os("--document"),
            os(DEMO_YAML),
            os("--tensors"),
            good.as_os_str(),
            os("--tensors"),
            big.as_os_str(),
            os("--out"),
            out.as_os_str(),
        ],
        &[],
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("not in the document (ignored): unused"),
        "{}",
        r.stdout
    );
}

// ---- 6, 7, 8: golden names, distributions, shapes ---------------------------

#[test]
fn a_golden_file_naming_a_tensor_twice_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let x = (seed() as f32).to_le_bytes().to_vec();
    let bytes = golden(
        [0; 32],
        &[
            Entry {
                sha256: sha256(&x),
                ..Entry::new("x", 2, &[1], Data::Raw(x.clone()))
            },
            Entry {
                sha256: sha256(&x),
                ..Entry::new("x", 2, &[1], Data::Raw(x.clone()))
            },
        ],
    );
    let p = write(tmp.path(), "dup.golden", bytes);
    refused(
        "inspect: a name twice",
        &[os("inspect"), p.as_os_str()],
        &[&format!(
            "{}: tensor `x`: the name is used twice (tensor #0 and tensor #1",
            p.display()
        )],
    );
}

#[test]
fn a_uniform_range_that_overflows_is_refused_with_its_location() {
    let tmp = tempfile::tempdir().unwrap();
    let doc = demo_with_tensors(&format!(
        "  w: {{ dtype: float32, shape: [4], source: {{ seeded: {{ seed: {}, uniform: [-1.0e308, 1.0e308] }} }} }}\n",
        seed()
    ));
    let line = line_of(&doc, "  w: ");
    let p = write(tmp.path(), "doc.yaml", &doc);
    refused(
        "list: uniform [-1e308, 1e308]",
        &[os("list"), p.as_os_str()],
        &[
            &format!("{}:{line}:", p.display()),
            "tensors.w.source.seeded: invalid distribution",
            "high - low = inf is not finite",
        ],
    );
}

#[test]
fn a_reshape_that_wraps_is_refused_before_any_provider_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let wraps = 4611686018427387905i64; // (2^62 + 1) · 128 wraps to 128
    let s = seed();
    let doc = small_document(
        &format!("x: {{ dtype: float32, shape: [128], source: {{ seeded: {{ seed: {s}, uniform: [-1.0, 1.0] }} }} }}"),
        "y: { dtype: float32, shape: [1, 128], source: golden }",
        &format!(
            "      - {{ op: vsdk.reshape, inputs: [x], outputs: [r], attrs: {{ shape: [{wraps}, 128] }} }}\n\
             \x20     - {{ op: vsdk.crop, inputs: [r], outputs: [y], attrs: {{ offsets: [1099511627776, 0], sizes: [1, 128] }} }}\n"
        ),
    );
    let line = line_of(&doc, "vsdk.reshape");
    let y = vec![0u8; 512];
    let dir = suite_dir(
        tmp.path(),
        &doc,
        &[
            Entry::new(
                "x",
                2,
                &[128],
                Data::Uniform {
                    seed: s,
                    low: -1.0,
                    high: 1.0,
                },
            ),
            Entry {
                sha256: sha256(&y),
                ..Entry::new("y", 2, &[1, 128], Data::Raw(y.clone()))
            },
        ],
    );
    refused(
        "run on the C template: reshape to [2^62 + 1, 128]",
        &[os("run"), dir.as_os_str(), os("--provider"), os(vsdk_template_c::LIBRARY_PATH)],
        &[&format!(
            "{}:{line}:15: stage `s`: vsdk.reshape: attribute `shape`: [{wraps}, 128]: the element count overflows",
            dir.join("suite.yaml").display()
        )],
    );
}

// ---- 9: paths that are not UTF-8 -------------------------------------------

#[test]
fn paths_that_are_not_utf8_are_shown_lossily_or_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let bad = |prefix: &str| {
        let mut name = OsString::from(prefix);
        name.push(OsStr::from_bytes(b"\xff"));
        name
    };
    // A suite directory named with byte 0xff.
    let suites = t.join("suites");
    let suite = suites.join(bad("bad"));
    write(&suite, "suite.yaml", std::fs::read(DEMO_YAML).unwrap());
    for args in [vec![os("list")], vec![os("list"), os("--json")]] {
        let r = run(
            "list: a suite directory not in UTF-8",
            &args,
            &[("VSDK_SUITES_PATH", suites.as_os_str())],
        );
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(r.stdout.contains("bad\u{FFFD}"), "{}", r.stdout);
        assert!(
            r.stderr.contains("warning:") && r.stderr.contains("not UTF-8"),
            "{}",
            r.stderr
        );
    }
    // A provider directory named with 0xff, holding the CPU provider.
    let lib = test_dir().join("libvsdk_provider_cpu.so");
    let dir = t.join(bad("providers"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&lib, dir.join("libvsdk_provider_cpu.so")).unwrap();
    for args in [vec![os("providers")], vec![os("providers"), os("--json")]] {
        let r = run(
            "providers: a search path entry not in UTF-8",
            &args,
            &[("VSDK_PROVIDER_PATH", dir.as_os_str())],
        );
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(
            r.stdout
                .contains("providers\u{FFFD}/libvsdk_provider_cpu.so"),
            "{}",
            r.stdout
        );
        assert!(r.stderr.contains("warning:"), "{}", r.stderr);
    }
    // A provider file named with 0xff: skipped, with a warning.
    let dir = t.join("odd");
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = OsString::from("libvsdk_provider_");
    file.push(OsStr::from_bytes(b"\xff"));
    file.push(".so");
    std::fs::copy(&lib, dir.join(file)).unwrap();
    let r = run(
        "providers: a file name not in UTF-8",
        &[os("providers")],
        &[("VSDK_PROVIDER_PATH", dir.as_os_str())],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: skipping") && r.stderr.contains("the file name is not UTF-8"),
        "{}",
        r.stderr
    );
}
