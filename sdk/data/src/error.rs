use std::path::PathBuf;

/// Everything that can go wrong between the SDK and a provider. Each message
/// names the provider library and the cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot load provider library {}: {reason}", library.display())]
    Open { library: PathBuf, reason: String },

    #[error("{} is not a VIPS provider: it does not export the entry symbol `vsdk_get_provider_api`", library.display())]
    NotAProvider { library: PathBuf },

    #[error("{}: ABI version mismatch: this host speaks provider ABI v{host}, the provider answered v{provider}", library.display())]
    AbiMismatch {
        library: PathBuf,
        host: u32,
        provider: u32,
    },

    #[error("{}: invalid function table: {reason}", library.display())]
    BadTable { library: PathBuf, reason: String },

    #[error("{}: required slot `{slot}` of the function table is NULL", library.display())]
    NullRequiredSlot {
        library: PathBuf,
        slot: &'static str,
    },

    #[error("{}: {call} failed: {} ({code}): {message}", library.display(), status_code_name(*code))]
    Provider {
        library: PathBuf,
        call: String,
        code: i32,
        message: String,
    },

    #[error("{}: {message}", library.display())]
    Misuse { library: PathBuf, message: String },

    #[error("{}: {source}", library.display())]
    Catalog {
        library: PathBuf,
        #[source]
        source: vsdk_catalog::CatalogError,
    },

    #[error("no provider named `{name}` (read as a name: looked for {file} in: {}){}", searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "), if *in_working_dir { format!("; `{name}` in the working directory is not used: write `./{name}` to load it as a path") } else { String::new() })]
    NotFound {
        name: String,
        file: String,
        searched: Vec<PathBuf>,
        /// The working directory holds a file of that name (not used).
        in_working_dir: bool,
    },

    /// A provider argument read as a path (docs/c-api.md, "Names and
    /// paths") where no file is.
    #[error("no provider library at `{}`: read as a path ({reason}), and no file is there", library.display())]
    Missing {
        library: PathBuf,
        reason: &'static str,
    },

    #[error("{0}")]
    Tensor(String),
}

/// Whether `message` is this host's report of an `execute` that returned
/// `VSDK_STATUS_UNSUPPORTED` (the wording of [`Error::Provider`], which is
/// all that crosses the worker protocol).
pub fn is_unsupported_execute(message: &str) -> bool {
    message
        .split_once(": execute(")
        .and_then(|(_, rest)| rest.split_once(") failed: "))
        .is_some_and(|(_, status)| status.starts_with("UNSUPPORTED ("))
}

/// The symbolic name of a `VSDK_STATUS_*` code.
pub fn status_code_name(code: i32) -> &'static str {
    match code {
        vsdk_ffi::VSDK_STATUS_OK => "OK",
        vsdk_ffi::VSDK_STATUS_INVALID_ARGUMENT => "INVALID_ARGUMENT",
        vsdk_ffi::VSDK_STATUS_UNSUPPORTED => "UNSUPPORTED",
        vsdk_ffi::VSDK_STATUS_OUT_OF_MEMORY => "OUT_OF_MEMORY",
        vsdk_ffi::VSDK_STATUS_DEVICE_ERROR => "DEVICE_ERROR",
        vsdk_ffi::VSDK_STATUS_INTERNAL => "INTERNAL",
        _ => "UNKNOWN_STATUS",
    }
}
