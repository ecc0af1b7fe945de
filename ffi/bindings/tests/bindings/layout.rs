//! Pins the ABI layout: sizes and offsets of every struct in provider.h on
//! 64-bit targets. A change here is an ABI break: bump VSDK_ABI_VERSION or, for
//! an append-only growth of a table, update the pinned size deliberately.
#![cfg(target_pointer_width = "64")]

use core::mem::{offset_of, size_of};
use vsdk_ffi::*;

#[test]
fn dlpack_compatible_tensor_layout() {
    // DLDevice {int32, int32}, DLDataType {u8, u8, u16}, DLTensor: 48 bytes.
    assert_eq!(size_of::<vsdk_device_t>(), 8);
    assert_eq!(size_of::<vsdk_dtype_t>(), 4);
    assert_eq!(offset_of!(vsdk_dtype_t, bits), 1);
    assert_eq!(offset_of!(vsdk_dtype_t, lanes), 2);
    assert_eq!(size_of::<vsdk_tensor_t>(), 48);
    assert_eq!(offset_of!(vsdk_tensor_t, data), 0);
    assert_eq!(offset_of!(vsdk_tensor_t, device), 8);
    assert_eq!(offset_of!(vsdk_tensor_t, ndim), 16);
    assert_eq!(offset_of!(vsdk_tensor_t, dtype), 20);
    assert_eq!(offset_of!(vsdk_tensor_t, shape), 24);
    assert_eq!(offset_of!(vsdk_tensor_t, strides), 32);
    assert_eq!(offset_of!(vsdk_tensor_t, byte_offset), 40);
}

#[test]
fn attribute_layout() {
    assert_eq!(size_of::<vsdk_int_list_t>(), 16);
    assert_eq!(size_of::<vsdk_float_list_t>(), 16);
    assert_eq!(size_of::<vsdk_attr_value_t>(), 16);
    assert_eq!(size_of::<vsdk_attr_t>(), 32);
    assert_eq!(offset_of!(vsdk_attr_t, kind), 8);
    assert_eq!(offset_of!(vsdk_attr_t, value), 16);
}

#[test]
fn call_and_info_layout() {
    assert_eq!(size_of::<vsdk_kernel_call_t>(), 72);
    assert_eq!(offset_of!(vsdk_kernel_call_t, kernel), 8);
    assert_eq!(offset_of!(vsdk_kernel_call_t, version), 16);
    assert_eq!(offset_of!(vsdk_kernel_call_t, device_index), 20);
    assert_eq!(offset_of!(vsdk_kernel_call_t, attrs), 24);
    assert_eq!(offset_of!(vsdk_kernel_call_t, num_attrs), 32);
    assert_eq!(offset_of!(vsdk_kernel_call_t, inputs), 40);
    assert_eq!(offset_of!(vsdk_kernel_call_t, num_inputs), 48);
    assert_eq!(offset_of!(vsdk_kernel_call_t, outputs), 56);
    assert_eq!(offset_of!(vsdk_kernel_call_t, num_outputs), 64);

    assert_eq!(size_of::<vsdk_provider_info_t>(), 40);
    assert_eq!(offset_of!(vsdk_provider_info_t, description), 32);
    assert_eq!(size_of::<vsdk_device_info_t>(), 48);
    assert_eq!(offset_of!(vsdk_device_info_t, device), 8);
    assert_eq!(offset_of!(vsdk_device_info_t, name), 16);
    assert_eq!(offset_of!(vsdk_device_info_t, memory_bytes), 40);
    assert_eq!(size_of::<vsdk_kernel_info_t>(), 24);
    assert_eq!(offset_of!(vsdk_kernel_info_t, version), 16);
    assert_eq!(size_of::<vsdk_create_options_t>(), 16);
}

#[test]
fn function_table_layout() {
    // Slots are append-only: each keeps its offset forever.
    let slots = [
        (offset_of!(vsdk_provider_api_t, status_code), 16),
        (offset_of!(vsdk_provider_api_t, status_message), 24),
        (offset_of!(vsdk_provider_api_t, status_destroy), 32),
        (offset_of!(vsdk_provider_api_t, create), 40),
        (offset_of!(vsdk_provider_api_t, destroy), 48),
        (offset_of!(vsdk_provider_api_t, get_info), 56),
        (offset_of!(vsdk_provider_api_t, device_count), 64),
        (offset_of!(vsdk_provider_api_t, device_info), 72),
        (offset_of!(vsdk_provider_api_t, kernel_count), 80),
        (offset_of!(vsdk_provider_api_t, kernel_info), 88),
        (offset_of!(vsdk_provider_api_t, kernel_supports), 96),
        (offset_of!(vsdk_provider_api_t, alloc), 104),
        (offset_of!(vsdk_provider_api_t, free), 112),
        (offset_of!(vsdk_provider_api_t, copy_to_device), 120),
        (offset_of!(vsdk_provider_api_t, copy_to_host), 128),
        (offset_of!(vsdk_provider_api_t, synchronize), 136),
        (offset_of!(vsdk_provider_api_t, execute), 144),
        (offset_of!(vsdk_provider_api_t, copy_on_device), 152),
    ];
    for (i, (got, want)) in slots.iter().enumerate() {
        assert_eq!(got, want, "slot #{i} moved");
    }
    assert_eq!(size_of::<vsdk_provider_api_t>(), 160);
}

/// The engine API's structs (vips_sdk.h): sizes and the offsets of the
/// fields after struct_size. Growth at the end only, deliberately.
#[test]
fn engine_struct_layout() {
    use vsdk_ffi::engine::*;
    assert_eq!(size_of::<vsdk_host_provider_info_t>(), 48);
    assert_eq!(offset_of!(vsdk_host_provider_info_t, abi_version), 40);
    assert_eq!(size_of::<vsdk_suite_info_t>(), 56);
    assert_eq!(offset_of!(vsdk_suite_info_t, stage_count), 40);
    assert_eq!(offset_of!(vsdk_suite_info_t, tensor_count), 48);
    assert_eq!(size_of::<vsdk_stage_info_t>(), 56);
    assert_eq!(offset_of!(vsdk_stage_info_t, outputs), 48);
    assert_eq!(size_of::<vsdk_tensor_info_t>(), 32);
    assert_eq!(offset_of!(vsdk_tensor_info_t, dtype), 16);
    assert_eq!(offset_of!(vsdk_tensor_info_t, ndim), 20);
    assert_eq!(offset_of!(vsdk_tensor_info_t, shape), 24);
    // Grown structs: the appended fields start where the first version ended
    // (the smallest struct_size the library accepts).
    assert_eq!(offset_of!(vsdk_results_info_t, end_to_end_count), 24);
    assert_eq!(size_of::<vsdk_results_info_t>(), 32);
    assert_eq!(size_of::<vsdk_stage_record_t>(), 96);
    assert_eq!(offset_of!(vsdk_stage_record_t, status), 32);
    assert_eq!(offset_of!(vsdk_stage_record_t, max_e), 64);
    assert_eq!(offset_of!(vsdk_stage_record_t, output_count), 88);
    assert_eq!(offset_of!(vsdk_output_record_t, worst_index), 104);
    assert_eq!(offset_of!(vsdk_output_record_t, tolerance_factor), 144);
    assert_eq!(size_of::<vsdk_output_record_t>(), 152);
    assert_eq!(offset_of!(vsdk_output_record_t, elements), 24);
    assert_eq!(
        offset_of!(vsdk_output_record_t, golden_cosine_similarity),
        96
    );
    assert_eq!(size_of::<vsdk_run_options_t>(), 56);
    assert_eq!(offset_of!(vsdk_run_options_t, chained), 32);
    assert_eq!(offset_of!(vsdk_run_options_t, seed), 48);
    assert_eq!(offset_of!(vsdk_check_args_t, tensors), 48);
    assert_eq!(offset_of!(vsdk_check_args_t, chained), 56);
    assert_eq!(size_of::<vsdk_check_args_t>(), 64);
    assert_eq!(size_of::<vsdk_end_to_end_record_t>(), 80);
    assert_eq!(offset_of!(vsdk_end_to_end_record_t, rel_l2_error), 32);
    assert_eq!(
        offset_of!(vsdk_end_to_end_record_t, min_cosine_similarity),
        72
    );
    assert_eq!(offset_of!(vsdk_check_args_t, outputs), 40);
    assert_eq!(size_of::<vsdk_report_info_t>(), 88);
    assert_eq!(offset_of!(vsdk_report_info_t, finished), 80);
    assert_eq!(size_of::<vsdk_verify_args_t>(), 40);
    assert_eq!(offset_of!(vsdk_verify_args_t, golden), 32);
}
