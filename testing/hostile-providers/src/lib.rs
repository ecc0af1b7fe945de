//! Paths of the hostile driver libraries built from `c/hostile.c` (and one
//! from `c/throw_create.cpp`): forwarders to a real provider, each of which
//! misbehaves in one way a real driver can, for the runner's isolation tests.
//!
//! Each library `dlopen`s the provider named by [`TARGET_ENV`] and forwards
//! every slot of its table (get_info too: it claims the real provider's
//! name). Misbehaviour in `execute` applies to the kernel named by
//! [`KERNEL_ENV`] (default [`DEFAULT_KERNEL`]) unless a variant says
//! otherwise. The variants that touch tensor memory assume host memory (the
//! CPU provider).

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

/// Every variant: (name, library path).
pub const ALL: &[(&str, &str)] = &[
    ("working", WORKING),
    ("segfault", SEGFAULT),
    ("abort", ABORT),
    ("exit0", EXIT0),
    ("hang", HANG),
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
];
