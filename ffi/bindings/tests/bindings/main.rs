//! The bindings' tests, one test program (each file a module, its tests named
//! `<module>::<test>`). Named `bindings`, not `it` as in the other crates: the
//! generated src/bindings.rs and src/engine.rs say to regenerate them with
//! `VSDK_BLESS=1 cargo test -p vsdk-ffi --test bindings`.

mod bindings;
mod header_compiles;
mod layout;
