//! The SIMT emulation itself: barriers, shared memory and warp shuffles
//! behave as on a GPU, misuse is an error (never a hang), and its kernel
//! registry is exactly the list the GPU providers' host code launches.

use std::ffi::c_void;
use vsdk_gpu::{Backend, DevicePtr};
use vsdk_provider_simt::{registered_kernels, Simt};

fn device() -> Simt {
    Simt::open_all().unwrap().remove(0)
}

fn zeroed(d: &Simt, bytes: usize) -> DevicePtr {
    let p = d.alloc(bytes).unwrap();
    d.copy_to_device(p, &vec![0; bytes]).unwrap();
    p
}

fn read<T: Copy + Default, const N: usize>(
    d: &Simt,
    p: DevicePtr,
    n: usize,
    from: fn([u8; N]) -> T,
) -> Vec<T> {
    let mut bytes = vec![0; n * N];
    d.copy_to_host(&mut bytes, p).unwrap();
    bytes
        .chunks_exact(N)
        .map(|c| from(c.try_into().unwrap()))
        .collect()
}

/// Launches a selftest kernel whose parameters are all device pointers.
fn launch(d: &Simt, kernel: &str, grid: u32, block: u32, ptrs: &[DevicePtr]) -> Result<(), String> {
    let mut values = ptrs.to_vec();
    let params: Vec<*mut c_void> = values
        .iter_mut()
        .map(|v| std::ptr::from_mut(v).cast())
        .collect();
    // SAFETY: every selftest kernel takes only pointers, each to a buffer
    // sized for grid × block elements of its type (allocated by the callers).
    let sizes = vec![std::mem::size_of::<DevicePtr>(); params.len()];
    unsafe { d.launch(kernel, [grid, 1, 1], [block, 1, 1], 0, &params, &sizes) }
        .map_err(|e| e.message)
}

#[test]
fn the_registry_holds_exactly_the_kernels_the_host_code_launches() {
    let mut registered: Vec<String> = registered_kernels()
        .into_iter()
        .filter(|k| !k.starts_with("vips_selftest_"))
        .collect();
    let mut launched = vsdk_gpu::kernel_names();
    registered.sort();
    launched.sort();
    assert_eq!(registered, launched);
}

#[test]
fn block_reductions_see_every_thread_through_shuffles_and_shared_memory() {
    let d = device();
    for block in [32, 96, 256] {
        let grid = 5;
        let (out, bad) = (zeroed(&d, 4 * grid), zeroed(&d, 4 * grid));
        launch(
            &d,
            "vips_selftest_block_sum",
            grid as u32,
            block,
            &[out, bad],
        )
        .unwrap();
        let want = (block * (block - 1) / 2) as f32;
        assert_eq!(
            read(&d, out, grid, f32::from_ne_bytes),
            vec![want; grid],
            "{block} threads"
        );
        assert_eq!(
            read(&d, bad, grid, i32::from_ne_bytes),
            vec![0; grid],
            "{block} threads"
        );
    }
}

#[test]
fn a_barrier_orders_shared_memory_between_threads() {
    let d = device();
    let (grid, block) = (3usize, 256usize);
    let out = zeroed(&d, 4 * grid * block);
    launch(
        &d,
        "vips_selftest_neighbour",
        grid as u32,
        block as u32,
        &[out],
    )
    .unwrap();
    let got = read(&d, out, grid * block, i32::from_ne_bytes);
    for b in 0..grid {
        for t in 0..block {
            let want = ((t + 1) % block * 3 + b) as i32;
            assert_eq!(got[b * block + t], want, "block {b} thread {t}");
        }
    }
}

#[test]
fn one_warp_may_shuffle_while_the_others_have_returned() {
    let d = device();
    let out = zeroed(&d, 4 * 2);
    launch(&d, "vips_selftest_first_warp_only", 2, 128, &[out]).unwrap();
    assert_eq!(read(&d, out, 2, f32::from_ne_bytes), vec![496.0; 2]);
}

#[test]
fn a_barrier_some_threads_never_reach_is_an_error_naming_the_kernel() {
    let d = device();
    let out = zeroed(&d, 4 * 64);
    let err = launch(&d, "vips_selftest_divergent_barrier", 1, 64, &[out]).unwrap_err();
    assert!(
        err.contains("vips_selftest_divergent_barrier") && err.contains("can never complete"),
        "{err}"
    );
}

#[test]
fn a_thread_that_overflows_its_fiber_stack_is_an_error_naming_the_kernel() {
    let d = device();
    let out = zeroed(&d, 4);
    let err = launch(&d, "vips_selftest_stack_overflow", 1, 64, &[out]).unwrap_err();
    assert!(
        err.contains("vips_selftest_stack_overflow") && err.contains("overflowed its 64 KiB"),
        "{err}"
    );
}

#[test]
fn launches_the_source_does_not_define_or_with_the_wrong_parameters_are_refused() {
    let d = device();
    let out = zeroed(&d, 64);
    let err = launch(&d, "vips_no_such_kernel", 1, 32, &[out]).unwrap_err();
    assert!(err.contains("no kernel named"), "{err}");
    let err = launch(&d, "vips_selftest_neighbour", 1, 32, &[out, out]).unwrap_err();
    assert!(err.contains("takes 1 parameters, got 2"), "{err}");
    let err = launch(&d, "vips_selftest_neighbour", 1, 2048, &[out]).unwrap_err();
    assert!(err.contains("threads per block"), "{err}");
    // An int where the kernel takes a pointer: on a GPU, a wild address.
    let mut narrow = 0i32;
    let params = [std::ptr::from_mut(&mut narrow).cast::<c_void>()];
    // SAFETY: refused before any kernel runs (the size check is the point).
    let err = unsafe {
        d.launch(
            "vips_selftest_neighbour",
            [1; 3],
            [32, 1, 1],
            0,
            &params,
            &[4],
        )
    }
    .unwrap_err()
    .message;
    assert!(
        err.contains("parameter 0 is 8 bytes in the kernel source, the launch passes 4"),
        "{err}"
    );
}
