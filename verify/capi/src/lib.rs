//! `include/vips_sdk/verify.h`: the embedded verifier for firmware. No
//! allocation, no libc beyond what the compiler emits for copies
//! (`memcpy`, `memset`, `memmove`, `memcmp`, which the firmware provides),
//! the state and the frame buffer in one caller-given buffer. Panics abort
//! through the caller's hook (`vsdk_verify_set_panic_hook`).
#![no_std]

use core::ffi::c_char;
use core::sync::atomic::{AtomicPtr, Ordering};
use vips_verify_core::format::{Name, RANK};
use vips_verify_core::{Error, Frame, Replay, Verdict};

/// `vsdk_verify_status`.
pub const VSDK_VERIFY_OK: u32 = 0;
/// The output just fed completed a verdict: `vsdk_verify_finish` gives it.
pub const VSDK_VERIFY_VERDICT: u32 = 1;
pub const VSDK_VERIFY_ERR_ARGUMENT: u32 = 2;
pub const VSDK_VERIFY_ERR_BUFFER: u32 = 3;
pub const VSDK_VERIFY_ERR_MAGIC: u32 = 4;
pub const VSDK_VERIFY_ERR_VERSION: u32 = 5;
pub const VSDK_VERIFY_ERR_FRAME: u32 = 6;
pub const VSDK_VERIFY_ERR_ORDER: u32 = 7;
pub const VSDK_VERIFY_ERR_SIZE: u32 = 8;
pub const VSDK_VERIFY_ERR_CHECKSUM: u32 = 9;
pub const VSDK_VERIFY_ERR_UNSUPPORTED: u32 = 10;
pub const VSDK_VERIFY_ERR_NO_VERDICT: u32 = 11;

/// `vsdk_verify_event_kind`.
pub const VSDK_VERIFY_EVENT_NONE: u32 = 0;
pub const VSDK_VERIFY_EVENT_PACK: u32 = 1;
pub const VSDK_VERIFY_EVENT_STAGE: u32 = 2;
pub const VSDK_VERIFY_EVENT_INPUT: u32 = 3;
pub const VSDK_VERIFY_EVENT_OUTPUT: u32 = 4;
pub const VSDK_VERIFY_EVENT_EXPECTED: u32 = 5;
pub const VSDK_VERIFY_EVENT_END: u32 = 6;

fn status(e: Error) -> u32 {
    match e {
        Error::Magic => VSDK_VERIFY_ERR_MAGIC,
        Error::Version(_) => VSDK_VERIFY_ERR_VERSION,
        Error::FrameTooLong { .. } | Error::Decode => VSDK_VERIFY_ERR_FRAME,
        Error::Order(_) | Error::TooMuchOutput | Error::Incomplete => VSDK_VERIFY_ERR_ORDER,
        Error::Size(_) => VSDK_VERIFY_ERR_SIZE,
        Error::Checksum => VSDK_VERIFY_ERR_CHECKSUM,
        Error::Buffer { .. } => VSDK_VERIFY_ERR_BUFFER,
        Error::Unsupported(_) => VSDK_VERIFY_ERR_UNSUPPORTED,
    }
}

/// `vsdk_verify_event`: what the last frame asks of the device. Pointers
/// stay valid until the next `vsdk_verify_feed`.
#[repr(C)]
pub struct Event {
    pub kind: u32,
    /// INPUT, OUTPUT: `VSDK_VERIFY_DTYPE_*` (the core's `DType` values).
    pub dtype: u32,
    /// PACK: the suite; STAGE, INPUT, OUTPUT: the stage's or tensor's name.
    pub name: *const c_char,
    pub name_len: usize,
    /// PACK: the tier.
    pub tier: *const c_char,
    pub tier_len: usize,
    pub rank: u32,
    pub shape: [u64; RANK],
    /// INPUT: where `bytes` go in the input; EXPECTED: the first element due.
    pub offset: u64,
    /// INPUT: a chunk of the input's bytes.
    pub bytes: *const u8,
    pub len: usize,
    /// OUTPUT: the output's elements; EXPECTED: the elements now due.
    pub elements: u64,
    /// EXPECTED: the device's output bytes now due (`vsdk_verify_output`).
    pub output_bytes: usize,
}

/// The verifier's state, at the start of the caller's buffer (`vsdk_verify`,
/// opaque to C).
pub struct State {
    replay: Replay,
    /// Names of the last frame, kept for the event's pointers.
    name: Name,
    tier: Name,
    /// Output bytes of the pending Expected frame.
    dtype_size: usize,
    verdict: Option<Verdict>,
    /// The frame buffer: the rest of the caller's buffer.
    frame: *mut u8,
    frame_len: usize,
}

/// Bytes the state takes before the frame buffer (alignment included).
#[no_mangle]
pub extern "C" fn vsdk_verify_state_size() -> usize {
    core::mem::size_of::<State>() + core::mem::align_of::<State>()
}

/// Places the verifier in `buffer` (`size` bytes: the state plus a frame
/// buffer of the pack's largest frame + 4). Returns NULL if it does not fit.
///
/// # Safety
/// `buffer` is valid for writes of `size` bytes and outlives the verifier;
/// nothing else uses it meanwhile.
#[no_mangle]
pub unsafe extern "C" fn vsdk_verify_init(buffer: *mut u8, size: usize) -> *mut State {
    if buffer.is_null() {
        return core::ptr::null_mut();
    }
    let align = core::mem::align_of::<State>();
    let pad = buffer.align_offset(align);
    let state = core::mem::size_of::<State>();
    if pad == usize::MAX || size < pad + state {
        return core::ptr::null_mut();
    }
    // SAFETY: pad + state <= size, so the aligned state lies inside the
    // caller's buffer, which the caller gives to us alone.
    unsafe {
        let at = buffer.add(pad).cast::<State>();
        at.write(State {
            replay: Replay::new(),
            name: Name::new(),
            tier: Name::new(),
            dtype_size: 0,
            verdict: None,
            frame: buffer.add(pad + state),
            frame_len: size - pad - state,
        });
        at
    }
}

/// Feeds pack bytes: consumes `chunk` up to the end of the next frame and
/// says how much (`*consumed`); when a frame completed, `*event` describes
/// it (else its kind is NONE). After an EXPECTED event the device's output
/// bytes are due before more pack bytes.
///
/// # Safety
/// `v` came from `vsdk_verify_init`; `chunk` is valid for `len` bytes and
/// does not overlap the verifier's buffer; `consumed` and `event` are valid
/// for writes.
#[no_mangle]
pub unsafe extern "C" fn vsdk_verify_feed(
    v: *mut State,
    chunk: *const u8,
    len: usize,
    consumed: *mut usize,
    event: *mut Event,
) -> u32 {
    if v.is_null() || (chunk.is_null() && len > 0) || consumed.is_null() || event.is_null() {
        return VSDK_VERIFY_ERR_ARGUMENT;
    }
    // SAFETY: the caller's contract above; the frame buffer is the rest of
    // the buffer `vsdk_verify_init` was given, disjoint from the state.
    let (s, chunk, frame) = unsafe {
        let s = &mut *v;
        let chunk = if len == 0 {
            &[][..]
        } else {
            core::slice::from_raw_parts(chunk, len)
        };
        let frame = core::slice::from_raw_parts_mut(s.frame, s.frame_len);
        (s, chunk, frame)
    };
    let mut e = Event {
        kind: VSDK_VERIFY_EVENT_NONE,
        dtype: 0,
        name: core::ptr::null(),
        name_len: 0,
        tier: core::ptr::null(),
        tier_len: 0,
        rank: 0,
        shape: [0; RANK],
        offset: 0,
        bytes: core::ptr::null(),
        len: 0,
        elements: 0,
        output_bytes: 0,
    };
    let result = s.replay.feed(frame, chunk);
    let code = match result {
        Ok((used, frame)) => {
            // SAFETY: `consumed` is valid for writes (checked non-null).
            unsafe { consumed.write(used) };
            if let Some(f) = frame {
                describe(s, f, &mut e);
            }
            VSDK_VERIFY_OK
        }
        Err(err) => {
            // SAFETY: as above.
            unsafe { consumed.write(0) };
            status(err)
        }
    };
    if code == VSDK_VERIFY_OK && e.kind != VSDK_VERIFY_EVENT_NONE {
        fix_names(s, &mut e);
    }
    // SAFETY: `event` is valid for writes (checked non-null).
    unsafe { event.write(e) };
    code
}

fn shape_of(shape: &[u64], e: &mut Event) {
    e.rank = shape.len() as u32;
    e.shape[..shape.len()].copy_from_slice(shape);
}

fn describe(s: &mut State, f: Frame, e: &mut Event) {
    match f {
        Frame::Pack { suite, tier, .. } => {
            e.kind = VSDK_VERIFY_EVENT_PACK;
            s.name = suite;
            s.tier = tier;
        }
        Frame::Stage { name, .. } => {
            e.kind = VSDK_VERIFY_EVENT_STAGE;
            s.name = name;
        }
        Frame::Input {
            name,
            dtype,
            shape,
            offset,
            bytes,
        } => {
            e.kind = VSDK_VERIFY_EVENT_INPUT;
            s.name = name;
            e.dtype = dtype as u32;
            shape_of(&shape, e);
            e.offset = offset;
            e.bytes = bytes.as_ptr();
            e.len = bytes.len();
        }
        Frame::Output {
            name, dtype, shape, ..
        } => {
            e.kind = VSDK_VERIFY_EVENT_OUTPUT;
            s.name = name;
            e.dtype = dtype as u32;
            s.dtype_size = dtype.size();
            shape_of(&shape, e);
            e.elements = vips_verify_core::format::elements(&shape).unwrap_or(0);
        }
        Frame::Expected { first, values } => {
            e.kind = VSDK_VERIFY_EVENT_EXPECTED;
            let k = values.len() / vips_verify_core::format::EXPECTED_STRIDE;
            e.offset = first;
            e.elements = k as u64;
            e.output_bytes = k * s.dtype_size;
        }
        Frame::End { .. } => e.kind = VSDK_VERIFY_EVENT_END,
    }
}

/// Points the event's names at the state's copies (they outlive the call).
fn fix_names(s: &State, e: &mut Event) {
    if matches!(
        e.kind,
        VSDK_VERIFY_EVENT_PACK
            | VSDK_VERIFY_EVENT_STAGE
            | VSDK_VERIFY_EVENT_INPUT
            | VSDK_VERIFY_EVENT_OUTPUT
    ) {
        e.name = s.name.as_ptr().cast();
        e.name_len = s.name.len();
    }
    if e.kind == VSDK_VERIFY_EVENT_PACK {
        e.tier = s.tier.as_ptr().cast();
        e.tier_len = s.tier.len();
    }
}

/// The device's output bytes for the elements the last EXPECTED event made
/// due (whole elements, any number of calls). Returns VSDK_VERIFY_VERDICT
/// when they completed an output.
///
/// # Safety
/// `v` came from `vsdk_verify_init`; `bytes` is valid for `len` bytes and
/// does not overlap the verifier's buffer.
#[no_mangle]
pub unsafe extern "C" fn vsdk_verify_output(v: *mut State, bytes: *const u8, len: usize) -> u32 {
    if v.is_null() || (bytes.is_null() && len > 0) {
        return VSDK_VERIFY_ERR_ARGUMENT;
    }
    // SAFETY: the caller's contract; the frame buffer as in vsdk_verify_feed.
    let (s, bytes, frame) = unsafe {
        let s = &mut *v;
        let bytes = if len == 0 {
            &[][..]
        } else {
            core::slice::from_raw_parts(bytes, len)
        };
        let frame = core::slice::from_raw_parts(s.frame, s.frame_len);
        (s, bytes, frame)
    };
    match s.replay.output(frame, bytes) {
        Ok(Some(verdict)) => {
            s.verdict = Some(verdict);
            VSDK_VERIFY_VERDICT
        }
        Ok(None) => VSDK_VERIFY_OK,
        Err(e) => status(e),
    }
}

/// The verdict of the output just completed (VSDK_VERIFY_VERDICT), once.
///
/// # Safety
/// `v` came from `vsdk_verify_init`; `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn vsdk_verify_finish(v: *mut State, out: *mut Verdict) -> u32 {
    if v.is_null() || out.is_null() {
        return VSDK_VERIFY_ERR_ARGUMENT;
    }
    // SAFETY: the caller's contract.
    let s = unsafe { &mut *v };
    match s.verdict.take() {
        Some(verdict) => {
            // SAFETY: `out` is valid for writes (checked non-null).
            unsafe { out.write(verdict) };
            VSDK_VERIFY_OK
        }
        None => VSDK_VERIFY_ERR_NO_VERDICT,
    }
}

/// Whether the pack ended and its SHA-256 checked out (1) or not (0).
///
/// # Safety
/// `v` came from `vsdk_verify_init`.
#[no_mangle]
pub unsafe extern "C" fn vsdk_verify_done(v: *const State) -> u32 {
    // SAFETY: the caller's contract (NULL answers 0).
    unsafe { v.as_ref() }.map_or(0, |s| u32::from(s.replay.done()))
}

/// `void (*)(const char *message, size_t len)`: called on a panic (a bug
/// in the verifier); it should not return (reset, halt). If it does, the
/// verifier spins.
pub type PanicHook = unsafe extern "C" fn(*const c_char, usize);

static PANIC_HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

#[no_mangle]
pub extern "C" fn vsdk_verify_set_panic_hook(hook: Option<PanicHook>) {
    PANIC_HOOK.store(
        hook.map_or(core::ptr::null_mut(), |h| h as *mut ()),
        Ordering::SeqCst,
    );
}

#[cfg(feature = "panic-handler")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    const MESSAGE: &[u8] = b"vips-verify: internal error (panic)";
    let hook = PANIC_HOOK.load(Ordering::SeqCst);
    if !hook.is_null() {
        // SAFETY: only `vsdk_verify_set_panic_hook` stores here, and only a
        // `PanicHook`; the message is a static string.
        unsafe {
            let hook: PanicHook = core::mem::transmute::<*mut (), PanicHook>(hook);
            hook(MESSAGE.as_ptr().cast(), MESSAGE.len());
        }
    }
    loop {
        core::hint::spin_loop();
    }
}
