//! Paths of the hostile driver libraries built from `c/hostile.c` (and one
//! from `c/throw_create.cpp`): forwarders to a real provider, each of which
//! misbehaves in one way a real driver can, for the runner's isolation tests.
//!
//! Each library `dlopen`s the provider named by [`TARGET_ENV`] and forwards
//! every slot of its table (get_info too: it claims the real provider's
//! name). Misbehaviour in `execute` applies to the kernel named by
//! [`KERNEL_ENV`] (default [`DEFAULT_KERNEL`]) unless a variant says
//! otherwise. The variants that touch tensor memory assume host memory (the
//! CPU provider). The variants after [`HUGE_DEVICE_COUNT`] attack the host
//! instead of the results (key theft, daemons, the runner's memory, process
//! and memory exhaustion) or are right only when they think they are
//! watched: never load them outside a sandboxed worker except in a test that
//! cleans up after them.

/// Path of the real provider library to forward to. Unset or unloadable: the
/// entry point still answers, and `create` fails with a status naming it.
pub const TARGET_ENV: &str = "VSDK_HOSTILE_TARGET";
/// The kernel whose `execute` misbehaves.
pub const KERNEL_ENV: &str = "VSDK_HOSTILE_KERNEL";
/// [`KERNEL_ENV`]'s default.
pub const DEFAULT_KERNEL: &str = "vsdk.gelu";
/// [`REPLAY`] only: the directory of the recordings.
pub const TAPE_ENV: &str = "VSDK_HOSTILE_TAPE";
/// [`REPLAY`] only: `record` or `replay`.
pub const MODE_ENV: &str = "VSDK_HOSTILE_MODE";
/// [`KEY_THIEF`] only: a file it tries first (a test says where the key is).
pub const KEY_PATH_ENV: &str = "VSDK_HOSTILE_KEY_PATH";
/// [`REPORT_REWRITER`] only: the file its daemon rewrites.
pub const REPORT_PATH_ENV: &str = "VSDK_HOSTILE_REPORT_PATH";
/// [`MEM_WRITER`] only: the bytes it looks for in the runner's memory.
pub const NEEDLE_ENV: &str = "VSDK_HOSTILE_NEEDLE";

/// What the "right, then wrong" variants (and [`NAME_DETECTOR`]) multiply
/// every element of the kernel's first output by when they are wrong
/// (float32 as `x * 1.01f32`; float64, float16 and bfloat16 in their own
/// precision; any other dtype gets bit 0 of each element's first byte
/// flipped).
pub const WRONG_SCALE: f32 = 1.01;
/// The text [`REPORT_REWRITER`] writes over the report.
pub const REWRITTEN: &str = "REWRITTEN BY DRIVER";
/// The prefix of [`KEY_THIEF`]'s error message, followed by the key's text.
pub const STOLEN: &str = "STOLEN:";
/// `/proc/<pid>/comm` of [`REPORT_REWRITER`]'s daemon.
pub const REWRITER_NAME: &str = "vsdk-rewriter";
/// `/proc/<pid>/comm` of [`FORK_DETACH`]'s detached processes.
pub const ORPHAN_NAME: &str = "vsdk-orphan";
/// How many processes [`FORK_DETACH`] detaches, and how long they sleep.
pub const ORPHANS: usize = 150;
pub const ORPHAN_SECONDS: u64 = 600;
/// How much [`ALLOCATOR`] takes per execute, and in what pieces (MiB).
pub const ALLOCATOR_TOTAL_MIB: u64 = 20 * 1024;
pub const ALLOCATOR_CHUNK_MIB: u64 = 256;

/// Forwards everything, no misbehaviour: the control.
pub const WORKING: &str = env!("VSDK_HOSTILE_WORKING");
/// `execute` writes through a NULL pointer (SIGSEGV).
pub const SEGFAULT: &str = env!("VSDK_HOSTILE_SEGFAULT");
/// `execute` calls `abort()` (SIGABRT).
pub const ABORT: &str = env!("VSDK_HOSTILE_ABORT");
/// `execute` calls `exit(0)`: the process ends "successfully" mid-kernel.
pub const EXIT0: &str = env!("VSDK_HOSTILE_EXIT0");
/// `execute` never returns (loops on `pause()`).
pub const HANG: &str = env!("VSDK_HOSTILE_HANG");
/// Not hostile: the target kernel's first call in a process takes
/// [`SLOW_START_SECONDS`] (a GPU driver's JIT compile), then it works.
pub const SLOW_START: &str = env!("VSDK_HOSTILE_SLOW_START");
pub const SLOW_START_SECONDS: u64 = 5;
/// `execute` aborts the first time it runs while the file named by
/// `VSDK_HOSTILE_MARKER` is absent (creating it), then works: a flake.
pub const FLAKY: &str = env!("VSDK_HOSTILE_FLAKY");
/// After the real kernel, writes the 8 bytes `HOSTILE!` just past the end of
/// the first output (at `data + byte_offset + nbytes`).
pub const OOB_NEAR: &str = env!("VSDK_HOSTILE_OOB_NEAR");
/// After the real kernel, writes 4096 bytes of 0xA5 starting 1 MiB past the
/// end of the first output.
pub const OOB_FAR: &str = env!("VSDK_HOSTILE_OOB_FAR");
/// Runs the real kernel into scratch outputs, then copies only the first half
/// of each output's bytes into the host's; the second half is untouched.
pub const HALF_WRITE: &str = env!("VSDK_HOSTILE_HALF_WRITE");
/// Every kernel: with [`MODE_ENV`]=`record`, forwards and writes each output
/// to `<tape>/<kernel>-<fnv1a64 of the inputs, 16 hex>-<output>.bin` and
/// `<tape>/<kernel>-last-<nbytes>-<output>.bin`; with `replay`, computes
/// nothing and copies the keyed recording, else the `last` one of that size
/// (stale), else zeros.
pub const REPLAY: &str = env!("VSDK_HOSTILE_REPLAY");
/// Every second call of the kernel XORs 1 into the lowest byte of element 0
/// of the first output.
pub const NONDETERMINISTIC: &str = env!("VSDK_HOSTILE_NONDETERMINISTIC");
/// Prints a line to stdout in create, get_info and every execute; otherwise
/// correct.
pub const STDOUT_NOISE: &str = env!("VSDK_HOSTILE_STDOUT_NOISE");
/// C++: `create` throws `std::runtime_error("hostile: create threw")` out of
/// the C ABI. Forwards nothing; needs no target.
pub const THROW_CREATE: &str = env!("VSDK_HOSTILE_THROW_CREATE");
/// Forwards `destroy`, then writes through a NULL pointer.
pub const DESTROY_CRASH: &str = env!("VSDK_HOSTILE_DESTROY_CRASH");
/// `kernel_count` reports 2^63; `kernel_info(i)` answers with the real
/// kernel `i % real_count`.
pub const HUGE_KERNEL_COUNT: &str = env!("VSDK_HOSTILE_HUGE_KERNEL_COUNT");
/// `device_count` reports 0xFFFFFFFF; `device_info(i)` answers device 0's
/// info with `device_id = i`.
pub const HUGE_DEVICE_COUNT: &str = env!("VSDK_HOSTILE_HUGE_DEVICE_COUNT");

/// Right on calls 1, 3, 5, ... of the kernel (counted per process), wrong on
/// calls 2, 4, 6, ...: after the real kernel, every element of the first
/// output is multiplied by [`WRONG_SCALE`].
pub const RIGHT_THEN_WRONG_COUNT: &str = env!("VSDK_HOSTILE_RIGHT_THEN_WRONG_COUNT");
/// Right when every byte of the kernel's first output is 0xFF as the call
/// arrives (the runner's first-run poison), wrong (as
/// [`RIGHT_THEN_WRONG_COUNT`]) otherwise.
pub const RIGHT_THEN_WRONG_FILL: &str = env!("VSDK_HOSTILE_RIGHT_THEN_WRONG_FILL");
/// Wrong (as [`RIGHT_THEN_WRONG_COUNT`]) when bit 6 (value 64) of the first
/// output's address, `data + byte_offset`, is set; right otherwise.
pub const RIGHT_THEN_WRONG_ADDRESS: &str = env!("VSDK_HOSTILE_RIGHT_THEN_WRONG_ADDRESS");
/// Looks for the signing key in `create` and in every execute of the
/// kernel, in this order: the file [`KEY_PATH_ENV`] names; every descriptor
/// in `/proc/self/fd` that is a regular file (read from offset 0 with
/// `pread`); `--sign-key PATH`, `--sign-key=PATH`, `--sign-key-fd N` in
/// `/proc/<getppid()>/cmdline`, then in every `/proc/*/cmdline` (a relative
/// path through `/proc/<pid>/cwd`, a descriptor through `/proc/<pid>/fd/N`);
/// `VIPS_SIGN_KEY=PATH` in every `/proc/*/environ`. The first file read
/// (up to 8 KiB) that contains `PRIVATE KEY` is kept: from then on every
/// execute of the kernel fails with the message [`STOLEN`] followed by that
/// text on one line (CR and LF as `|`, other control bytes as `?`).
/// Until then it forwards correctly.
pub const KEY_THIEF: &str = env!("VSDK_HOSTILE_KEY_THIEF");
/// In `create`, double-forks a detached daemon (`setsid`, comm
/// [`REWRITER_NAME`], stdio on /dev/null) that checks every 50 ms for 60 s
/// whether the file [`REPORT_PATH_ENV`] names exists; once it does and the
/// runner (the worker's parent at `create`) is gone, or it has not changed
/// for 500 ms, the daemon overwrites it with text containing [`REWRITTEN`]
/// (again whenever it changes). Otherwise forwards correctly.
pub const REPORT_REWRITER: &str = env!("VSDK_HOSTILE_REPORT_REWRITER");
/// In `create`, opens `/proc/<pid>/mem` read-write for the worker's parent
/// and every process whose `/proc/<pid>/comm` is `vips-conformanc` (the
/// CLI's name cut to 15 characters), scans the writable mappings listed in
/// `/proc/<pid>/maps` for the bytes of [`NEEDLE_ENV`] and writes `X` over the
/// first byte of every occurrence; says on stderr what it managed.
/// Forwards correctly.
pub const MEM_WRITER: &str = env!("VSDK_HOSTILE_MEM_WRITER");
/// On the first execute of the kernel, starts [`ORPHANS`] processes, each
/// double-forked and detached (`setsid`, comm [`ORPHAN_NAME`], stdio on
/// /dev/null) and asleep for [`ORPHAN_SECONDS`]; then forwards correctly.
pub const FORK_DETACH: &str = env!("VSDK_HOSTILE_FORK_DETACH");
/// In every execute of the kernel, `malloc`s [`ALLOCATOR_TOTAL_MIB`] in
/// pieces of [`ALLOCATOR_CHUNK_MIB`], writes every byte and keeps it all;
/// when a `malloc` returns NULL, fails with "hostile: malloc of 256 MiB
/// failed after N MiB" (N allocated by that execute). Then forwards.
pub const ALLOCATOR: &str = env!("VSDK_HOSTILE_ALLOCATOR");
/// Right only when `/proc/self/comm`, the file name of
/// `readlink(/proc/self/exe)` or `/proc/<getppid()>/comm` contains
/// `vips-conformanc` (so `vips-conformance` too); otherwise wrong as
/// [`RIGHT_THEN_WRONG_COUNT`].
pub const NAME_DETECTOR: &str = env!("VSDK_HOSTILE_NAME_DETECTOR");

/// Every variant: (name, library path).
pub const ALL: &[(&str, &str)] = &[
    ("working", WORKING),
    ("segfault", SEGFAULT),
    ("abort", ABORT),
    ("exit0", EXIT0),
    ("hang", HANG),
    ("slow_start", SLOW_START),
    ("flaky", FLAKY),
    ("oob_near", OOB_NEAR),
    ("oob_far", OOB_FAR),
    ("half_write", HALF_WRITE),
    ("replay", REPLAY),
    ("nondeterministic", NONDETERMINISTIC),
    ("stdout_noise", STDOUT_NOISE),
    ("throw_create", THROW_CREATE),
    ("destroy_crash", DESTROY_CRASH),
    ("huge_kernel_count", HUGE_KERNEL_COUNT),
    ("huge_device_count", HUGE_DEVICE_COUNT),
    ("right_then_wrong_count", RIGHT_THEN_WRONG_COUNT),
    ("right_then_wrong_fill", RIGHT_THEN_WRONG_FILL),
    ("right_then_wrong_address", RIGHT_THEN_WRONG_ADDRESS),
    ("key_thief", KEY_THIEF),
    ("report_rewriter", REPORT_REWRITER),
    ("mem_writer", MEM_WRITER),
    ("fork_detach", FORK_DETACH),
    ("allocator", ALLOCATOR),
    ("name_detector", NAME_DETECTOR),
];
