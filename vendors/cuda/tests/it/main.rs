//! The CUDA provider's tests, one test program (each file a module, its tests
//! named `<module>::<test>`).

mod identity;
mod kernels_compile;
mod no_device;
