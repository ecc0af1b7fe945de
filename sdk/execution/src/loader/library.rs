//! Opening a provider library: the entry symbol, version negotiation and the
//! validation of its function table. Nothing here calls a provider slot.

use std::path::{Path, PathBuf};
use vips_data::Error;
use vsdk_ffi::{vsdk_get_provider_api_fn, vsdk_provider_api_t, VSDK_ABI_VERSION};

/// A negotiated provider library and its table, copied into host memory with
/// every field past the provider's `struct_size` at its default (NULL).
pub struct Library {
    pub path: PathBuf,
    pub api: vsdk_provider_api_t,
    pub abi_version: u32,
    // Declared last: dropped (unloaded) after everything else in this struct.
    _lib: libloading::Library,
}

/// Opens with RTLD_NOW so a missing symbol of the provider fails here, with a
/// message, rather than at the first call.
fn dlopen(path: &Path) -> Result<libloading::Library, libloading::Error> {
    #[cfg(unix)]
    {
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: loading a library runs its initialisers; that is the contract
        // of a plugin host, and the user chose this file.
        unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map(Into::into)
    }
    #[cfg(not(unix))]
    {
        // SAFETY: as above.
        unsafe { libloading::Library::new(path) }
    }
}

/// The slots a v1 provider must fill, with their names for error messages.
macro_rules! required_slots {
    ($api:expr, $($slot:ident),* $(,)?) => {
        [$((stringify!($slot), $api.$slot.is_some(), std::mem::offset_of!(vsdk_provider_api_t, $slot))),*]
    };
}

impl Library {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let library = path.to_path_buf();
        let lib = dlopen(path).map_err(|e| Error::Open {
            library: library.clone(),
            reason: e.to_string(),
        })?;
        // SAFETY: the symbol's type is fixed by provider.h; a library exporting
        // this name with another type breaks the ABI contract it claims.
        let entry: vsdk_get_provider_api_fn =
            match unsafe { lib.get::<vsdk_get_provider_api_fn>(vsdk_ffi::VSDK_ENTRY_SYMBOL) } {
                Ok(sym) => *sym,
                Err(_) => return Err(Error::NotAProvider { library }),
            };
        let entry = entry.ok_or_else(|| Error::NotAProvider {
            library: library.clone(),
        })?;
        let mut provider_version = 0u32;
        // SAFETY: the entry point's contract: it writes one u32 and returns a
        // static table or NULL.
        let table = unsafe { entry(VSDK_ABI_VERSION, &mut provider_version) };
        if provider_version != VSDK_ABI_VERSION {
            return Err(Error::AbiMismatch {
                library,
                host: VSDK_ABI_VERSION,
                provider: provider_version,
            });
        }
        if table.is_null() {
            return Err(Error::BadTable {
                library,
                reason: format!(
                    "the entry point answered ABI v{provider_version} but returned no table"
                ),
            });
        }
        // SAFETY: non-NULL table, static while the library is loaded; its first
        // member is its size.
        let struct_size = unsafe { table.cast::<usize>().read() };
        let header = std::mem::offset_of!(vsdk_provider_api_t, status_code);
        if struct_size < header {
            return Err(Error::BadTable {
                library,
                reason: format!(
                    "struct_size {struct_size} is smaller than the table header ({header} bytes)"
                ),
            });
        }
        let mut api = vsdk_provider_api_t::default();
        let n = struct_size.min(std::mem::size_of::<vsdk_provider_api_t>());
        // SAFETY: the provider's table holds `struct_size` readable bytes; we copy
        // at most our own size into a zeroed table, so later slots read NULL.
        unsafe {
            std::ptr::copy_nonoverlapping(
                table.cast::<u8>(),
                (&mut api as *mut vsdk_provider_api_t).cast::<u8>(),
                n,
            )
        };
        if api.abi_version != provider_version {
            return Err(Error::BadTable {
                library,
                reason: format!(
                    "table says ABI v{} but the entry point answered v{provider_version}",
                    api.abi_version
                ),
            });
        }
        let slots = required_slots!(
            api,
            status_code,
            status_message,
            status_destroy,
            create,
            destroy,
            get_info,
            device_count,
            device_info,
            kernel_count,
            kernel_info,
            kernel_supports,
            alloc,
            free,
            copy_to_device,
            copy_to_host,
            synchronize,
            execute,
        );
        for (slot, present, offset) in slots {
            if offset >= n {
                return Err(Error::BadTable {
                    library,
                    reason: format!("struct_size {struct_size} ends before required slot `{slot}`"),
                });
            }
            if !present {
                return Err(Error::NullRequiredSlot { library, slot });
            }
        }
        Ok(Library {
            path: library,
            api,
            abi_version: provider_version,
            _lib: lib,
        })
    }
}
