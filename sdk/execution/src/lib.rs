//! The SDK's execution: provider libraries loaded through the C ABI of
//! `include/vips_sdk/provider.h` ([`loader`]), where providers and suites are
//! installed ([`install`]), stage programs run so that a driver cannot hide
//! what it did ([`execution`]: poisoned outputs, guard regions, two runs), the
//! worker process that runs them ([`isolation`], its wire format [`protocol`])
//! inside its sandbox ([`sandbox`]), and [`backend`], which drives either the
//! same way.
//!
//! Knows programs and tensors (`vips-data`), not suites, verdicts or reports:
//! the runner above decides what to run and judges what comes back.
//!
//! ```no_run
//! use vips_execution::Provider;
//! use vips_data::HostTensor;
//! use vsdk_catalog::Attrs;
//! let provider = Provider::open_by_name("cpu")?;
//! let device = provider.device(0)?;
//! let x = device.upload(&HostTensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 3.0, 0.5, 0.0, 7.0])?)?;
//! let y = device.execute("vsdk.gelu", 1, &Attrs::new(), &[&x])?;
//! let values: Vec<f32> = device.download(&y[0])?.to_vec()?;
//! # Ok::<(), vips_data::Error>(())
//! ```

pub mod allocator;
pub mod backend;
pub mod execution;
pub mod install;
pub mod isolation;
pub mod loader;
pub mod protocol;
pub mod sandbox;

pub use install::{dirs_from_env, sdk_binary_dir};
pub use loader::search::{discover, library_file_name, search_path, Discovered, PROVIDER_PATH_ENV};
pub use loader::{Device, DeviceInfo, DeviceTensor, KernelId, Provider, ProviderInfo};
