//! The SIMT provider's tests, one test program (each file a module, its tests
//! named `<module>::<test>`).

mod abi;
mod emulator;
mod source;
