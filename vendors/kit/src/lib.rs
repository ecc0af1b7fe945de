//! The C boundary for providers written in Rust: status objects, the panic
//! guard, and safe views of what the host passes (tensors, attributes, kernel
//! calls, out-structs with `struct_size`). A provider crate supplies the
//! kernels; this crate makes sure nothing unwinds into the host and that every
//! pointer it is given is checked before use.

mod boundary;
mod call;
mod provider;
mod status;

pub use boundary::{guard, negotiate, non_null, write_field};
pub use call::{attrs_of, KernelCall, TensorArg};
pub use provider::{table, DeviceDescription, Provider};
pub use status::{status_code, status_destroy, status_message, ProviderError};
pub use vsdk_ffi as ffi;
