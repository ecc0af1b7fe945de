//! The VIPS SDK: loads provider libraries through the C ABI of
//! `include/vips_sdk/provider.h` and drives them.
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

mod error;
mod loader;
mod tensor;

pub use error::{is_unsupported_execute, status_code_name, Error};
pub use install::{dirs_from_env, sdk_binary_dir};
pub use loader::search::{discover, library_file_name, search_path, Discovered, PROVIDER_PATH_ENV};
pub use loader::{Device, DeviceInfo, DeviceTensor, KernelId, Provider, ProviderInfo};
pub use tensor::{Element, HostTensor};
pub mod allocator;
pub mod capture;
pub mod certify;
pub mod compare;
pub mod contract;
pub mod document;
pub mod error_map;
pub mod error_model;
pub mod execution;
pub mod generate;
pub mod golden;
pub mod install;
pub mod isolation;
mod json_float;
pub mod limits;
pub mod pack;
pub mod reference_cache;
pub mod replay;
pub mod runner;
pub mod sandbox;
pub mod suite;
pub mod weights;
pub use vsdk_catalog::{AttrValue, Attrs, DType, Node, Op, TensorSpec};

/// The provider ABI version this SDK speaks.
pub const ABI_VERSION: u32 = vsdk_ffi::VSDK_ABI_VERSION;
