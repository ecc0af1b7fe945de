//! The provider loader: a [`Provider`] owns one loaded library and one
//! provider instance; [`Device`] and [`DeviceTensor`] keep it alive, so a
//! library is never unloaded while anything from it lives.

mod call;
mod layout;
mod library;
pub mod search;

pub use layout::Layout;

use library::Library;
use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use vips_data::{Error, HostTensor};
use vsdk_catalog::{Attrs, DType, Node, Op, TensorSpec};
use vsdk_ffi::*;

/// What a provider says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProviderInfo {
    pub name: String,
    pub vendor: String,
    pub version: String,
    pub description: String,
    pub abi_version: u32,
    pub library: PathBuf,
    /// The table declares `VSDK_CONCURRENCY_THREAD_SAFE`.
    #[serde(default)]
    pub thread_safe: bool,
}

/// What a provider says about one of its devices.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    pub index: u32,
    pub device_type: i32,
    pub name: String,
    pub driver_version: String,
    pub stable_id: String,
    pub memory_bytes: u64,
}

/// The most devices a provider may report: more is a broken count, not hardware.
pub const MAX_DEVICES: u32 = 4096;
/// The most kernels a provider may list.
pub const MAX_KERNELS: u64 = 1 << 16;

/// A kernel a provider implements: catalog name and version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelId {
    pub name: String,
    pub version: u32,
}

/// The loaded library plus its instance. Field order matters: the instance is
/// destroyed (in `Drop`) before `lib` unloads the code.
struct Loaded {
    instance: *mut vsdk_provider_t,
    /// Held around every call when the provider declares itself SERIAL.
    serial: Option<Mutex<()>>,
    info: ProviderInfo,
    lib: Library,
}

// SAFETY: the instance pointer is only used through the provider's table; a
// SERIAL provider is only entered under `serial`, a THREAD_SAFE one promises
// that any call may come from any thread concurrently.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _guard = self.enter();
        if let Some(destroy) = self.lib.api.destroy {
            // SAFETY: the instance came from `create`; every Device and buffer
            // holds an Arc to us, so none is alive now.
            unsafe { destroy(self.instance) };
        }
    }
}

fn c_string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: provider strings are NUL-terminated and owned by the live instance.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Loaded {
    fn enter(&self) -> Option<MutexGuard<'_, ()>> {
        self.serial
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn library(&self) -> PathBuf {
        self.lib.path.clone()
    }

    /// Turns a status into a Result, freeing the status.
    fn check(
        &self,
        call: impl FnOnce() -> String,
        status: *mut vsdk_status_t,
    ) -> Result<(), Error> {
        if status.is_null() {
            return Ok(());
        }
        let api = &self.lib.api;
        // SAFETY: a non-NULL status from this provider, read then destroyed once
        // with its own table; slots validated non-NULL at load.
        let (code, message) = unsafe {
            let code = api.status_code.map_or(VSDK_STATUS_INTERNAL, |f| f(status));
            let message = c_string(api.status_message.map_or(std::ptr::null(), |f| f(status)));
            if let Some(destroy) = api.status_destroy {
                destroy(status);
            }
            (code, message)
        };
        Err(Error::Provider {
            library: self.library(),
            call: call(),
            code,
            message,
        })
    }
}

/// Calls a required slot (validated non-NULL at load) under the provider's
/// concurrency rule and checks its status.
macro_rules! call {
    ($loaded:expr, $slot:ident, $what:expr $(, $arg:expr)* $(,)?) => {{
        let loaded: &Loaded = &$loaded;
        let _guard = loaded.enter();
        let f = loaded.lib.api.$slot.expect(concat!("required slot ", stringify!($slot), " validated at load"));
        // SAFETY: a validated slot of a live instance; the arguments follow provider.h.
        let status = unsafe { f(loaded.instance $(, $arg)*) };
        loaded.check(|| $what, status)
    }};
}

impl Loaded {
    fn device_info(&self, index: u32) -> Result<DeviceInfo, Error> {
        let mut raw = vsdk_device_info_t {
            struct_size: std::mem::size_of::<vsdk_device_info_t>(),
            ..Default::default()
        };
        call!(
            *self,
            device_info,
            format!("device_info({index})"),
            index,
            &mut raw
        )?;
        Ok(DeviceInfo {
            index,
            device_type: raw.device.device_type,
            name: c_string(raw.name),
            driver_version: c_string(raw.driver_version),
            stable_id: c_string(raw.stable_id),
            memory_bytes: raw.memory_bytes,
        })
    }
}

/// Reports name certification reports and search paths rely on: a short id
/// and a semantic version.
fn check_identity(info: &ProviderInfo) -> Result<(), Error> {
    let misuse = |message: String| Error::Misuse {
        library: info.library.clone(),
        message,
    };
    let id_chars = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    if info.name.is_empty() || !info.name.chars().all(id_chars) {
        return Err(misuse(format!(
            "get_info: name {:?} is not a short id ([a-z0-9_-]+)",
            info.name
        )));
    }
    semver::Version::parse(&info.version).map_err(|e| {
        misuse(format!(
            "get_info: version {:?} is not a semantic version: {e}",
            info.version
        ))
    })?;
    Ok(())
}

/// A loaded provider library with one instance.
#[derive(Clone)]
pub struct Provider {
    inner: Arc<Loaded>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("info", &self.inner.info)
            .finish()
    }
}

impl Provider {
    /// Loads the provider library at `path`, negotiates, validates its table
    /// and creates an instance.
    pub fn open(path: impl AsRef<Path>) -> Result<Provider, Error> {
        let lib = Library::open(path.as_ref())?;
        let options = vsdk_create_options_t {
            struct_size: std::mem::size_of::<vsdk_create_options_t>(),
            host_abi_version: lib.abi_version,
            reserved: 0,
        };
        let mut instance = std::ptr::null_mut();
        let create = lib
            .api
            .create
            .expect("required slot create validated at load");
        // SAFETY: validated slot; options and out pointer valid for the call.
        let status = unsafe { create(&options, &mut instance) };
        let mut loaded = Loaded {
            instance,
            serial: (lib.api.concurrency != VSDK_CONCURRENCY_THREAD_SAFE).then(|| Mutex::new(())),
            info: ProviderInfo {
                name: String::new(),
                vendor: String::new(),
                version: String::new(),
                description: String::new(),
                abi_version: lib.abi_version,
                library: lib.path.clone(),
                thread_safe: lib.api.concurrency == VSDK_CONCURRENCY_THREAD_SAFE,
            },
            lib,
        };
        if let Err(e) = loaded.check(|| "create".into(), status) {
            loaded.instance = std::ptr::null_mut(); // destroy(NULL) is a no-op
            return Err(e);
        }
        if loaded.instance.is_null() {
            return Err(Error::Misuse {
                library: loaded.library(),
                message: "create succeeded but returned a NULL instance".into(),
            });
        }
        let mut raw = vsdk_provider_info_t {
            struct_size: std::mem::size_of::<vsdk_provider_info_t>(),
            ..Default::default()
        };
        call!(loaded, get_info, "get_info".into(), &mut raw)?;
        loaded.info.name = c_string(raw.name);
        loaded.info.vendor = c_string(raw.vendor);
        loaded.info.version = c_string(raw.version);
        loaded.info.description = c_string(raw.description);
        check_identity(&loaded.info)?;
        Ok(Provider {
            inner: Arc::new(loaded),
        })
    }

    /// Loads a provider by name from the search path (see [`search::search_path`]),
    /// or by path when [`search::path_reason`] says the argument is one.
    pub fn open_by_name(name: &str) -> Result<Provider, Error> {
        Provider::open(Provider::locate(name)?)
    }

    /// The library [`Provider::open_by_name`] would load: a path when the
    /// argument contains `/` or ends in `.so` (it must be a file), else a
    /// name looked up on the search path.
    pub fn locate(name: &str) -> Result<PathBuf, Error> {
        if let Some(reason) = search::path_reason(name) {
            // `x.so` alone is the file in the working directory (dlopen
            // would search the library path for it).
            let path = if name.contains('/') || name.contains(std::path::MAIN_SEPARATOR) {
                PathBuf::from(name)
            } else {
                Path::new(".").join(name)
            };
            if !path.is_file() {
                return Err(Error::Missing {
                    library: path,
                    reason,
                });
            }
            return Ok(path);
        }
        search::find(name).map_err(|(file, searched)| Error::NotFound {
            name: name.to_string(),
            file,
            searched,
            in_working_dir: !name.is_empty() && Path::new(name).exists(),
        })
    }

    pub fn info(&self) -> &ProviderInfo {
        &self.inner.info
    }

    pub fn device_count(&self) -> Result<u32, Error> {
        let mut n = 0u32;
        call!(self.inner, device_count, "device_count".into(), &mut n)?;
        if n > MAX_DEVICES {
            return Err(Error::Misuse {
                library: self.inner.library(),
                message: format!(
                    "device_count reported {n} devices, more than the {MAX_DEVICES} this host accepts"
                ),
            });
        }
        Ok(n)
    }

    pub fn device_info(&self, index: u32) -> Result<DeviceInfo, Error> {
        self.inner.device_info(index)
    }

    pub fn devices(&self) -> Result<Vec<DeviceInfo>, Error> {
        (0..self.device_count()?)
            .map(|i| self.device_info(i))
            .collect()
    }

    /// The kernels the provider lists, sorted.
    pub fn kernels(&self) -> Result<Vec<KernelId>, Error> {
        let mut n = 0u64;
        call!(self.inner, kernel_count, "kernel_count".into(), &mut n)?;
        if n > MAX_KERNELS {
            return Err(Error::Misuse {
                library: self.inner.library(),
                message: format!(
                    "kernel_count reported {n} kernels, more than the {MAX_KERNELS} this host accepts"
                ),
            });
        }
        let mut out = (0..n)
            .map(|i| {
                let mut raw = vsdk_kernel_info_t {
                    struct_size: std::mem::size_of::<vsdk_kernel_info_t>(),
                    ..Default::default()
                };
                call!(
                    self.inner,
                    kernel_info,
                    format!("kernel_info({i})"),
                    i,
                    &mut raw
                )?;
                Ok(KernelId {
                    name: c_string(raw.name),
                    version: raw.version,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        out.sort();
        Ok(out)
    }

    /// A handle on device `index`, checked to exist.
    pub fn device(&self, index: u32) -> Result<Device, Error> {
        let count = self.device_count()?;
        if index >= count {
            return Err(Error::Misuse {
                library: self.inner.library(),
                message: format!("device {index} does not exist (the provider has {count})"),
            });
        }
        let info = self.device_info(index)?;
        Ok(Device {
            inner: self.inner.clone(),
            index,
            device: vsdk_device_t {
                device_type: info.device_type,
                device_id: index as i32,
            },
            name: info.name,
        })
    }
}

/// One device of a provider.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Loaded>,
    index: u32,
    device: vsdk_device_t,
    name: String,
}

/// A tensor in a buffer on a device; frees the buffer when dropped. The
/// tensor starts `offset` bytes into its buffer (after a guard region, when
/// allocated with [`Device::alloc_guarded`]).
pub struct DeviceTensor {
    inner: Arc<Loaded>,
    device_index: u32,
    ptr: *mut std::ffi::c_void,
    offset: u64,
    buffer_bytes: u64,
    /// A view (see [`Device::alloc_view`]); `None`: compact row-major.
    view: Option<View>,
    pub spec: TensorSpec,
}

/// A non-compact tensor: element strides, the first element's element
/// offset from the tensor's start, and the bytes the view spans.
struct View {
    strides: Vec<i64>,
    offset: u64,
    extent: u64,
}

impl DeviceTensor {
    /// Where the tensor starts in its buffer, and the buffer's size.
    pub fn layout(&self) -> (u64, u64) {
        (self.offset, self.buffer_bytes)
    }

    /// The bytes from the tensor's start that it spans: its size when
    /// compact, a view's extent otherwise.
    pub fn extent(&self) -> u64 {
        self.view
            .as_ref()
            .map_or(self.spec.size_bytes() as u64, |v| v.extent)
    }

    /// What a kernel call says about the tensor: its element strides and
    /// its `byte_offset` in the buffer.
    pub(crate) fn strides_and_offset(&self) -> (Vec<i64>, u64) {
        match &self.view {
            Some(v) => (
                v.strides.clone(),
                self.offset + v.offset * self.spec.dtype.size_bytes() as u64,
            ),
            None => {
                let shape = &self.spec.shape;
                let mut strides = vec![1i64; shape.len()];
                for i in (0..shape.len().saturating_sub(1)).rev() {
                    strides[i] = strides[i + 1] * shape[i + 1] as i64;
                }
                (strides, self.offset)
            }
        }
    }
}

// SAFETY: the pointer is a device address only passed back to its provider,
// which is entered under its concurrency rule (see `Loaded`).
unsafe impl Send for DeviceTensor {}
// SAFETY: as above; &DeviceTensor gives no access to the memory.
unsafe impl Sync for DeviceTensor {}

impl Drop for DeviceTensor {
    fn drop(&mut self) {
        let _guard = self.inner.enter();
        if let Some(free) = self.inner.lib.api.free {
            // SAFETY: the pointer came from this provider's `alloc` on this device
            // and is freed once.
            unsafe { free(self.inner.instance, self.device_index, self.ptr) };
        }
    }
}

impl Device {
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The device's name, as the provider reported it.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn provider_info(&self) -> &ProviderInfo {
        &self.inner.info
    }

    /// What the provider says about this device now.
    pub fn info(&self) -> Result<DeviceInfo, Error> {
        self.inner.device_info(self.index)
    }

    fn misuse(&self, message: String) -> Error {
        Error::Misuse {
            library: self.inner.library(),
            message,
        }
    }

    /// Allocates an uninitialised tensor.
    pub fn alloc(&self, spec: TensorSpec) -> Result<DeviceTensor, Error> {
        self.alloc_guarded(spec, 0)
    }

    /// Allocates a tensor with `guard` spare bytes before and after it in
    /// the same buffer (a multiple of 64, so the tensor stays aligned):
    /// what a kernel writes there is visible to [`Device::read_buffer`].
    pub fn alloc_guarded(&self, spec: TensorSpec, guard: u64) -> Result<DeviceTensor, Error> {
        let bytes = spec.size_bytes() as u64;
        self.alloc_buffer(spec, guard, bytes, None)
    }

    /// Allocates a view of `spec`: element `i` at element `offset + Σ i_k ·
    /// strides[k]` of a region of `span` elements, with `guard` bytes on
    /// either side (see [`Device::alloc_guarded`]).
    pub fn alloc_view(
        &self,
        spec: TensorSpec,
        layout: &Layout,
        guard: u64,
    ) -> Result<DeviceTensor, Error> {
        let span = layout.span(&spec).map_err(|m| self.misuse(m))?;
        let strides = layout
            .strides
            .iter()
            .map(|&s| i64::try_from(s).map_err(|_| self.misuse(format!("stride {s} overflows"))))
            .collect::<Result<Vec<_>, _>>()?;
        let extent = span * spec.dtype.size_bytes() as u64;
        let view = View {
            strides,
            offset: layout.offset,
            extent,
        };
        self.alloc_buffer(spec, guard, extent, Some(view))
    }

    fn alloc_buffer(
        &self,
        spec: TensorSpec,
        guard: u64,
        tensor_bytes: u64,
        view: Option<View>,
    ) -> Result<DeviceTensor, Error> {
        let mut ptr = std::ptr::null_mut();
        let bytes = guard
            .checked_mul(2)
            .and_then(|g| g.checked_add(tensor_bytes))
            .filter(|_| guard.is_multiple_of(64))
            .ok_or_else(|| self.misuse(format!("guard of {guard} bytes is not valid")))?;
        let what = || format!("alloc({bytes} bytes on device {})", self.index);
        call!(self.inner, alloc, what(), self.index, bytes, 64, &mut ptr)?;
        if ptr.is_null() {
            return Err(self.misuse(format!("{} succeeded but returned NULL", what())));
        }
        Ok(DeviceTensor {
            inner: self.inner.clone(),
            device_index: self.index,
            ptr,
            offset: guard,
            buffer_bytes: bytes,
            view,
            spec,
        })
    }

    pub fn upload(&self, host: &HostTensor) -> Result<DeviceTensor, Error> {
        self.upload_guarded(host, 0)
    }

    /// [`Device::upload`] into a buffer with guard regions (see
    /// [`Device::alloc_guarded`]); the guards are left unwritten.
    pub fn upload_guarded(&self, host: &HostTensor, guard: u64) -> Result<DeviceTensor, Error> {
        let t = self.alloc_guarded(host.spec.clone(), guard)?;
        self.write_buffer(&t, t.offset, &host.bytes)?;
        Ok(t)
    }

    pub fn download(&self, t: &DeviceTensor) -> Result<HostTensor, Error> {
        if t.view.is_some() {
            return Err(self.misuse("download of a view: read its buffer instead".into()));
        }
        let bytes = self.read_buffer(t, t.offset, t.spec.size_bytes() as u64)?;
        HostTensor::from_bytes(t.spec.clone(), bytes)
    }

    /// Writes `bytes` at `offset` of the tensor's whole buffer (guards included).
    pub fn write_buffer(&self, t: &DeviceTensor, offset: u64, bytes: &[u8]) -> Result<(), Error> {
        self.own(t)?;
        let n = bytes.len() as u64;
        if offset.checked_add(n).is_none_or(|end| end > t.buffer_bytes) {
            return Err(self.misuse(format!(
                "write of {n} bytes at {offset} past a {}-byte buffer",
                t.buffer_bytes
            )));
        }
        call!(
            self.inner,
            copy_to_device,
            format!("copy_to_device({n} bytes)"),
            self.index,
            t.ptr,
            offset,
            bytes.as_ptr().cast(),
            n
        )
    }

    /// Reads `len` bytes at `offset` of the tensor's whole buffer.
    pub fn read_buffer(&self, t: &DeviceTensor, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        self.own(t)?;
        if offset
            .checked_add(len)
            .is_none_or(|end| end > t.buffer_bytes)
        {
            return Err(self.misuse(format!(
                "read of {len} bytes at {offset} past a {}-byte buffer",
                t.buffer_bytes
            )));
        }
        let mut bytes = vec![0u8; len as usize];
        call!(
            self.inner,
            copy_to_host,
            format!("copy_to_host({len} bytes)"),
            self.index,
            bytes.as_mut_ptr().cast(),
            t.ptr,
            offset,
            len
        )?;
        Ok(bytes)
    }

    pub fn synchronize(&self) -> Result<(), Error> {
        call!(self.inner, synchronize, "synchronize".into(), self.index)
    }

    /// Whether the provider runs `kernel`@`version` on this device for `dtype`.
    pub fn supports(&self, kernel: &str, version: u32, dtype: DType) -> Result<bool, Error> {
        let name = CString::new(kernel)
            .map_err(|_| self.misuse(format!("kernel name {kernel:?} contains NUL")))?;
        let (code, bits) = dtype.dlpack();
        let mut out = 0i32;
        call!(
            self.inner,
            kernel_supports,
            format!("kernel_supports({kernel}@{version}, {dtype})"),
            self.index,
            name.as_ptr(),
            version,
            vsdk_dtype_t {
                code,
                bits,
                lanes: 1
            },
            &mut out
        )?;
        Ok(out != 0)
    }

    fn own(&self, t: &DeviceTensor) -> Result<(), Error> {
        if Arc::ptr_eq(&t.inner, &self.inner) && t.device_index == self.index {
            Ok(())
        } else {
            Err(self.misuse("tensor belongs to another provider or device".into()))
        }
    }

    /// Runs one catalog kernel: checks the call against the catalog and the
    /// provider's support query, allocates the outputs, executes.
    pub fn execute(
        &self,
        kernel: &str,
        version: u32,
        attrs: &Attrs,
        inputs: &[&DeviceTensor],
    ) -> Result<Vec<DeviceTensor>, Error> {
        let catalog = |source| Error::Catalog {
            library: self.inner.library(),
            source,
        };
        let op = Op::lookup(kernel, version).map_err(catalog)?;
        let specs: Vec<TensorSpec> = inputs.iter().map(|t| t.spec.clone()).collect();
        let (_, out_specs) = Node::infer(op, attrs, &specs).map_err(catalog)?;
        self.execute_kernel(kernel, version, attrs, inputs, out_specs)
    }

    /// Runs any kernel the provider lists, catalog or not (a fused stage
    /// kernel, say), with outputs of the given specs. Asks `kernel_supports`
    /// first, for the dtype of the first input.
    pub fn execute_kernel(
        &self,
        kernel: &str,
        version: u32,
        attrs: &Attrs,
        inputs: &[&DeviceTensor],
        out_specs: Vec<TensorSpec>,
    ) -> Result<Vec<DeviceTensor>, Error> {
        for t in inputs {
            self.own(t)?;
        }
        let Some(dtype) = inputs.first().map(|t| t.spec.dtype) else {
            return Err(self.misuse(format!("{kernel}@{version}: a kernel call needs inputs")));
        };
        if !self.supports(kernel, version, dtype)? {
            return Err(Error::Provider {
                library: self.inner.library(),
                call: format!("{kernel}@{version}"),
                code: VSDK_STATUS_UNSUPPORTED,
                message: format!(
                    "the provider does not support this kernel for {dtype} on device {}",
                    self.index
                ),
            });
        }
        let outputs = out_specs
            .into_iter()
            .map(|s| self.alloc(s))
            .collect::<Result<Vec<_>, _>>()?;
        self.execute_into(kernel, version, attrs, inputs, &outputs)?;
        Ok(outputs)
    }

    /// Runs a kernel the provider supports into outputs the caller
    /// allocated (poisoned, guarded: see `execution`). Asks nothing first.
    pub fn execute_into(
        &self,
        kernel: &str,
        version: u32,
        attrs: &Attrs,
        inputs: &[&DeviceTensor],
        outputs: &[DeviceTensor],
    ) -> Result<(), Error> {
        for t in inputs.iter().copied().chain(outputs) {
            self.own(t)?;
        }
        let marshalled = call::Marshalled::new(self.device, attrs, inputs, outputs)?;
        let raw = marshalled.call(kernel, version, self.index)?;
        call!(
            self.inner,
            execute,
            format!("execute({kernel}@{version})"),
            &raw.raw
        )
    }
}
