//! The plain-C vendor template, `template.c`, built as a provider library.
//! Rust code only needs to know where that library is.

/// Absolute path of the built `libvsdk_provider_template_c` library.
pub const LIBRARY_PATH: &str = env!("VSDK_TEMPLATE_C_LIBRARY");
