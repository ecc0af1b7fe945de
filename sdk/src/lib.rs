//! The VIPS SDK: loads provider libraries through the C ABI of
//! `include/vips_sdk/provider.h`, runs suites on them and certifies the
//! results. This crate is the facade the CLI and the C library use: every
//! module is one of the layers' (ARCHITECTURE.md), under the path it has
//! always had.
//!
//! | layer | crate | modules |
//! |---|---|---|
//! | data | `vips-data` | `capture`, `document`, `golden`, `limits`, `tier`, `weights` |
//! | execution | `vips-execution` | the loader's types, `install`, `execution`, `isolation`, `sandbox`, `allocator` |
//! | verdicts | `vips-verdict` | `compare`, `error_map`, `error_model` |
//! | runner | `vips-runner` | `suite`, `runner`, `contract`, `generate`, `pack`, `reference_cache` |
//! | certification | `vips-certify` | `certify`, `replay` |
//!
//! Each depends only on the layers above it in this table.
//!
//! ```no_run
//! use vips_sdk::{Provider, HostTensor, Attrs};
//! let provider = Provider::open_by_name("cpu")?;
//! let device = provider.device(0)?;
//! let x = device.upload(&HostTensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 3.0, 0.5, 0.0, 7.0])?)?;
//! let y = device.execute("vsdk.gelu", 1, &Attrs::new(), &[&x])?;
//! let values: Vec<f32> = device.download(&y[0])?.to_vec()?;
//! # Ok::<(), vips_sdk::Error>(())
//! ```

pub use vips_data::{capture, document, golden, limits, tier, weights};
pub use vips_data::{is_unsupported_execute, status_code_name, Element, Error, HostTensor};
pub use vips_execution::{allocator, install, sandbox};
pub use vips_execution::{
    dirs_from_env, discover, library_file_name, sdk_binary_dir, search_path, Device, DeviceInfo,
    DeviceTensor, Discovered, KernelId, Provider, ProviderInfo, PROVIDER_PATH_ENV,
};
pub use vips_runner::run as runner;
pub use vips_runner::{contract, generate, pack, reference_cache, suite};
pub use vips_verdict::{compare, error_map, error_model};
pub use vsdk_catalog::{AttrValue, Attrs, DType, Node, Op, TensorSpec, ALL_OPS};

/// Running a stage's kernels on a provider so that it cannot hide what it
/// did, in this process or in a worker process ([`Backend`]).
pub mod execution {
    pub use vips_execution::backend::Backend;
    pub use vips_execution::execution::*;
}

/// The provider in a worker process, and the worker's wire format.
pub mod isolation {
    pub use vips_execution::isolation::*;
    pub use vips_execution::protocol;
}

pub use vips_certify as certify;
pub use vips_certify::replay;

/// The provider ABI version this SDK speaks.
pub const ABI_VERSION: u32 = vsdk_ffi::VSDK_ABI_VERSION;
