//! The C boundary: error objects, the panic guard every entry point runs
//! in, tagged handles (a handle of the wrong kind is an error, not a crash),
//! C strings, and struct_size-checked reads and writes of the header's
//! structs.

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use vsdk_ffi::engine::vsdk_error_t;
use vsdk_ffi::{vsdk_status_code_t, VSDK_STATUS_INTERNAL, VSDK_STATUS_INVALID_ARGUMENT};

/// An error on its way to C: a status code and a message.
#[derive(Debug)]
pub struct Error {
    pub code: vsdk_status_code_t,
    pub message: String,
}

impl Error {
    pub fn new(code: vsdk_status_code_t, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(VSDK_STATUS_INVALID_ARGUMENT, message)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The object behind `vsdk_error_t*`.
#[repr(C)]
pub struct ErrorObject {
    magic: u64,
    pub code: vsdk_status_code_t,
    pub message: CString,
}

impl Tagged for ErrorObject {
    const MAGIC: u64 = 0x7673_646b_4572_7221; // "vsdkErr!"
    const KIND: &'static str = "error";
    fn kill(&mut self) {
        self.magic = 0;
    }
}

fn error_object(e: Error) -> *mut vsdk_error_t {
    let message = CString::new(e.message.replace('\0', "\\0")).unwrap_or_default();
    Box::into_raw(Box::new(ErrorObject {
        magic: ErrorObject::MAGIC,
        code: e.code,
        message,
    }))
    .cast()
}

/// Runs an entry point's body: its error, or a panic, becomes an error
/// object; success is NULL. Nothing unwinds into C.
pub fn guard(name: &str, body: impl FnOnce() -> Result<()>) -> *mut vsdk_error_t {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => error_object(e),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            error_object(Error::new(
                VSDK_STATUS_INTERNAL,
                format!("{name}: internal error (a bug in libvips_sdk): {what}"),
            ))
        }
    }
}

/// Runs a function that returns no error (frees, queries with a fallback):
/// a panic is swallowed into `fallback`.
pub fn quiet<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// A heap object handed to C. Every one starts with a magic number of its
/// kind (`#[repr(C)]`, first field), so a handle of another kind is told
/// apart before its fields are used.
pub trait Tagged: Sized {
    const MAGIC: u64;
    const KIND: &'static str;
    /// Clears the magic before the object is freed.
    fn kill(&mut self);
}

/// The first 8 bytes of any of our handles, whatever its kind.
///
/// # Safety
/// `ptr` is non-null and points to one of this library's handle objects
/// (each at least 8 bytes, starting with its magic).
unsafe fn magic_at(ptr: *const u8) -> u64 {
    // SAFETY: the caller's contract; read unaligned in case C passed a
    // misaligned pointer of some other kind.
    unsafe { std::ptr::read_unaligned(ptr.cast::<u64>()) }
}

/// Borrows a handle of kind `T` from C, checking it is not NULL and is of
/// that kind.
/// # Safety
/// `ptr` is NULL or points to at least 8 readable bytes; a live handle of
/// this library when it carries `T`'s magic.
pub unsafe fn borrow<'a, T: Tagged>(ptr: *const T, what: &str) -> Result<&'a T> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("`{what}` is NULL")));
    }
    // SAFETY: non-null; the header requires a handle made by this library,
    // and every such handle starts with its 8-byte magic.
    let magic = unsafe { magic_at(ptr.cast()) };
    if magic != T::MAGIC {
        return Err(Error::invalid(format!(
            "`{what}` is not a live {} handle (a handle of another kind, or one already freed)",
            T::KIND
        )));
    }
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::invalid(format!("`{what}` is misaligned")));
    }
    // SAFETY: the magic says this is a live T made by `into_handle`.
    Ok(unsafe { &*ptr })
}

/// Moves an object to C.
pub fn into_handle<T: Tagged>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees a handle from C: NULL and handles of another kind are ignored.
/// # Safety
/// `ptr` is NULL or a handle of this library that is not used afterwards.
pub unsafe fn free<T: Tagged>(ptr: *mut T) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: as in `borrow`: a handle of this library starts with its magic.
    let magic = unsafe { magic_at(ptr.cast()) };
    if magic != T::MAGIC || !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return;
    }
    // SAFETY: a live T made by `into_handle` (Box::into_raw); the caller
    // gives up its pointer. The magic is cleared first, so a second free of
    // the same pointer is refused while the memory is not reused.
    unsafe {
        (*ptr).kill();
        drop(Box::from_raw(ptr));
    }
}

/// A C string argument as UTF-8.
/// # Safety
/// `ptr` is NULL or a NUL-terminated string valid for `'a`.
pub unsafe fn str_arg<'a>(ptr: *const c_char, what: &str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("`{what}` is NULL")));
    }
    // SAFETY: non-null; the header requires a NUL-terminated string valid
    // for the call.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| Error::invalid(format!("`{what}` is not UTF-8")))
}

/// An optional C string argument (NULL: none).
/// # Safety
/// As [`str_arg`].
pub unsafe fn opt_str_arg<'a>(ptr: *const c_char, what: &str) -> Result<Option<&'a str>> {
    if ptr.is_null() {
        Ok(None)
    } else {
        str_arg(ptr, what).map(Some)
    }
}

/// A string kept alive by the object that hands out its pointer.
pub fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

/// The `struct_size` a caller set in the struct at `ptr` (its first field),
/// at least `min` bytes.
fn struct_size<T>(ptr: *const T, what: &str, min: usize) -> Result<usize> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("`{what}` is NULL")));
    }
    // SAFETY: non-null; every struct of the header starts with a size_t
    // struct_size that the caller sets.
    let size = unsafe { std::ptr::read_unaligned(ptr.cast::<usize>()) };
    if size < min {
        return Err(Error::invalid(format!(
            "`{what}->struct_size` is {size}, smaller than this library's {min} bytes: set it to sizeof() of the struct",
        )));
    }
    Ok(size)
}

/// Reads an input struct after checking its struct_size.
/// # Safety
/// `ptr` is NULL or points to `struct_size` readable bytes.
pub unsafe fn read_in<T>(ptr: *const T, what: &str) -> Result<T> {
    // SAFETY: the caller's contract.
    unsafe { read_in_grown(ptr, what, std::mem::size_of::<T>()) }
}

/// Reads an input struct that grew (the header's "appended" fields): a
/// caller's struct_size down to `first`, the size of its first version, is
/// accepted, and the fields it does not cover read as 0.
/// # Safety
/// `ptr` is NULL or points to `struct_size` readable bytes; `T` is a C
/// struct of integers and pointers (all zeros is a valid value).
pub unsafe fn read_in_grown<T>(ptr: *const T, what: &str, first: usize) -> Result<T> {
    let size = struct_size(ptr, what, first)?;
    // SAFETY: T is a plain C struct (the caller's contract): zeros are valid.
    let mut value: T = unsafe { std::mem::zeroed() };
    // SAFETY: non-null, `size` readable bytes (struct_size); at most
    // size_of::<T>() bytes are copied into `value`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            ptr.cast::<u8>(),
            (&mut value as *mut T).cast::<u8>(),
            size.min(std::mem::size_of::<T>()),
        )
    };
    Ok(value)
}

/// Writes an output struct (the fields this library knows), keeping the
/// caller's struct_size.
/// # Safety
/// `ptr` is NULL or points to `struct_size` writable bytes.
pub unsafe fn write_out<T>(ptr: *mut T, what: &str, value: T) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { write_out_grown(ptr, what, value, std::mem::size_of::<T>()) }
}

/// Writes an output struct that grew: as many of its bytes as the caller's
/// struct_size covers (at least `first`, its first version's size).
/// # Safety
/// `ptr` is NULL or points to `struct_size` writable bytes.
pub unsafe fn write_out_grown<T>(
    ptr: *mut T,
    what: &str,
    mut value: T,
    first: usize,
) -> Result<()> {
    let size = struct_size(ptr, what, first)?;
    // SAFETY: `value` is a T whose first field is a size_t (every struct of
    // the header); the caller's size goes back there.
    unsafe { std::ptr::write_unaligned((&mut value as *mut T).cast::<usize>(), size) };
    // SAFETY: non-null, `size` writable bytes (struct_size), and at most
    // size_of::<T>() bytes are read from `value`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&value as *const T).cast::<u8>(),
            ptr.cast::<u8>(),
            size.min(std::mem::size_of::<T>()),
        )
    };
    Ok(())
}

/// Writes a handle to an out-pointer.
/// # Safety
/// `out` is NULL or points to writable storage for a pointer.
pub unsafe fn write_handle<T>(out: *mut *mut T, what: &str, value: *mut T) -> Result<()> {
    if out.is_null() {
        return Err(Error::invalid(format!("`{what}` is NULL")));
    }
    // SAFETY: non-null; the caller passes a pointer to writable storage.
    unsafe { out.write_unaligned(value) };
    Ok(())
}

/// Checks an out-pointer before any work is done.
pub fn check_out<T>(out: *mut *mut T, what: &str) -> Result<()> {
    if out.is_null() {
        Err(Error::invalid(format!("`{what}` is NULL")))
    } else {
        Ok(())
    }
}
