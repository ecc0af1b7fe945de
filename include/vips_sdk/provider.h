/*
 * vips_sdk/provider.h: the VIPS SDK provider ABI, version 1.
 *
 * A provider is a shared library that runs the operators of the VIPS operator
 * catalog (docs/operators.md) on one kind of device. The host (vips-conformance,
 * libvips_sdk) loads it, negotiates the ABI version, validates its function
 * table and calls it only through that table.
 *
 * This header is the source of truth: the Rust bindings (ffi/) are generated
 * from it and tests pin every size and offset. C99, also valid C++.
 *
 * Rules that hold for every declaration below:
 *  - Every struct that crosses the boundary starts with `struct_size`. The
 *    party that allocates the struct sets it to sizeof() as it knows it. Structs
 *    only grow at the end; a field past a struct's `struct_size` reads as its
 *    documented default (NULL / 0 unless stated).
 *  - Errors are status objects: a function returning `vsdk_status_t*` returns
 *    NULL on success. A non-NULL status is owned by the caller, who reads it with
 *    the table's `status_code` / `status_message` and frees it with the same
 *    table's `status_destroy`. Out-parameters are written only on success.
 *  - Nothing unwinds across the boundary: C++ providers catch every exception,
 *    Rust providers catch every panic, and turn them into a status.
 *  - Ownership is written next to every pointer: BORROWED (valid for the call
 *    only), OWNED BY <object> (valid until that object is destroyed), or
 *    TRANSFERRED (the receiver frees it with the named function).
 *  - `destroy`-like functions accept NULL and do nothing.
 */
#ifndef VSDK_PROVIDER_H
#define VSDK_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. Hosts offer the highest version they
 * speak; a provider answers with the version it will use. */
#define VSDK_ABI_VERSION 1u

/* Name of the one symbol a provider library exports (see vsdk_get_provider_api_fn). */
#define VSDK_ENTRY_SYMBOL "vsdk_get_provider_api"

#if defined(_WIN32)
#define VSDK_EXPORT __declspec(dllexport)
#else
#define VSDK_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------- */
/* Status codes                                                              */
/* ------------------------------------------------------------------------- */

typedef int32_t vsdk_status_code_t;
#define VSDK_STATUS_OK 0               /* never carried by a status object */
#define VSDK_STATUS_INVALID_ARGUMENT 1 /* bad shape, dtype, attribute, index */
#define VSDK_STATUS_UNSUPPORTED 2      /* kernel/dtype/feature not implemented */
#define VSDK_STATUS_OUT_OF_MEMORY 3
#define VSDK_STATUS_DEVICE_ERROR 4     /* the device or its driver failed */
#define VSDK_STATUS_INTERNAL 5         /* a bug in the provider (e.g. a caught panic) */

/* Opaque error object, allocated by the provider. */
typedef struct vsdk_status vsdk_status_t;

/* Opaque provider instance, allocated by `create`, freed by `destroy`. */
typedef struct vsdk_provider vsdk_provider_t;

/* ------------------------------------------------------------------------- */
/* Tensors: layout-compatible with DLPack's DLDevice, DLDataType, DLTensor    */
/* ------------------------------------------------------------------------- */

/* Device types, DLPack's DLDeviceType values. */
typedef int32_t vsdk_device_type_t;
#define VSDK_DEVICE_CPU 1
#define VSDK_DEVICE_CUDA 2
#define VSDK_DEVICE_ROCM 10
#define VSDK_DEVICE_EXT 12 /* any other accelerator */

/* Same layout as DLDevice. `device_id` is the provider's device index. */
typedef struct vsdk_device {
  vsdk_device_type_t device_type;
  int32_t device_id;
} vsdk_device_t;

/* Dtype codes, DLPack's DLDataTypeCode values. */
#define VSDK_DTYPE_INT 0u
#define VSDK_DTYPE_UINT 1u
#define VSDK_DTYPE_FLOAT 2u
#define VSDK_DTYPE_BFLOAT 4u

/* Same layout as DLDataType. Catalog v1 uses lanes == 1 and these
 * (code, bits): float 16/32/64, bfloat 16, uint 8, int 32/64. */
typedef struct vsdk_dtype {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} vsdk_dtype_t;

/* Same layout as DLTensor. Element (i0, ..., in-1) lives at byte address
 *   (char*)data + byte_offset + sum_k(i_k * strides[k]) * bits/8.
 * `data` is a device pointer from `alloc` (on VSDK_DEVICE_CPU, a host pointer).
 * The host never dereferences a device pointer: it only passes it back to
 * this provider's own functions (copy_to_device, copy_to_host,
 * copy_on_device, execute, free), so it may be any non-NULL value the
 * provider can map back to its memory (a device address, a handle).
 * `shape` and `strides` are BORROWED, `ndim` entries each; strides are in
 * elements, never negative, and required (non-NULL) whenever ndim > 0.
 * An input may be a view: any strides, 0 included (a broadcast axis), and
 * any byte_offset; bytes the view does not address may hold anything, NaN
 * included (docs/operators.md, "Conventions").
 * A tensor with ndim == 0 is a scalar holding one element. */
typedef struct vsdk_tensor {
  void* data;
  vsdk_device_t device;
  int32_t ndim;
  vsdk_dtype_t dtype;
  const int64_t* shape;
  const int64_t* strides;
  uint64_t byte_offset;
} vsdk_tensor_t;

/* ------------------------------------------------------------------------- */
/* Kernel attributes and calls                                               */
/* ------------------------------------------------------------------------- */

typedef int32_t vsdk_attr_kind_t;
#define VSDK_ATTR_INT 1
#define VSDK_ATTR_FLOAT 2
#define VSDK_ATTR_STRING 3 /* NUL-terminated UTF-8 */
#define VSDK_ATTR_INTS 4
#define VSDK_ATTR_FLOATS 5

/* A list attribute's elements. BORROWED for the call. */
typedef struct vsdk_int_list {
  const int64_t* data;
  uint64_t len;
} vsdk_int_list_t;

typedef struct vsdk_float_list {
  const double* data;
  uint64_t len;
} vsdk_float_list_t;

/* The value of an attribute; `kind` says which member is live. */
typedef union vsdk_attr_value {
  int64_t i;                  /* VSDK_ATTR_INT */
  double f;                   /* VSDK_ATTR_FLOAT */
  const char* s;              /* VSDK_ATTR_STRING */
  vsdk_int_list_t ints;       /* VSDK_ATTR_INTS */
  vsdk_float_list_t floats;   /* VSDK_ATTR_FLOATS */
} vsdk_attr_value_t;

/* One named, typed attribute. Every pointer is BORROWED for the call. */
typedef struct vsdk_attr {
  const char* name;
  vsdk_attr_kind_t kind;
  int32_t reserved; /* 0 */
  vsdk_attr_value_t value;
} vsdk_attr_t;

/* One kernel invocation. The host fills it; everything is BORROWED for the
 * call. Outputs are allocated by the host (through `alloc`), compact row-major,
 * with the shapes and dtypes the catalog's shape rules give: the provider
 * checks them and writes every element. Inputs and outputs never overlap. */
typedef struct vsdk_kernel_call {
  size_t struct_size;
  const char* kernel;      /* catalog name, e.g. "vsdk.layer_norm" */
  uint32_t version;        /* catalog version of that kernel, e.g. 1 */
  uint32_t device_index;
  const vsdk_attr_t* attrs;
  uint64_t num_attrs;
  const vsdk_tensor_t* inputs;
  uint64_t num_inputs;
  const vsdk_tensor_t* outputs;
  uint64_t num_outputs;
} vsdk_kernel_call_t;

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */
/* ------------------------------------------------------------------------- */

/* Filled by `get_info`. The host sets struct_size; the provider writes only
 * fields that fit (a field whose last byte lies within struct_size bytes of
 * the struct's start). Strings are OWNED BY the provider instance. */
typedef struct vsdk_provider_info {
  size_t struct_size;
  const char* name;        /* short id, e.g. "cpu"; [a-z0-9_-]+ */
  const char* vendor;      /* e.g. "VIPS SDK reference" */
  const char* version;     /* semver of the provider build, e.g. "0.1.0" */
  const char* description; /* one line, may be "" */
} vsdk_provider_info_t;

/* Filled by `device_info`. Same rules as vsdk_provider_info_t. */
typedef struct vsdk_device_info {
  size_t struct_size;
  vsdk_device_t device;        /* device_id == the index asked for */
  const char* name;            /* marketing / model name */
  const char* driver_version;  /* driver or runtime version string */
  const char* stable_id;       /* survives reboots: UUID, PCI bus id, ... */
  uint64_t memory_bytes;       /* total device memory */
} vsdk_device_info_t;

/* Filled by `kernel_info`: one entry of the provider's kernel list. */
typedef struct vsdk_kernel_info {
  size_t struct_size;
  const char* name;   /* OWNED BY the provider instance */
  uint32_t version;
  uint32_t reserved;  /* 0 */
} vsdk_kernel_info_t;

/* Passed to `create`. BORROWED for the call. */
typedef struct vsdk_create_options {
  size_t struct_size;
  uint32_t host_abi_version; /* the negotiated version */
  uint32_t reserved;         /* 0 */
} vsdk_create_options_t;

/* Concurrency a provider declares in its table (`concurrency`). */
#define VSDK_CONCURRENCY_SERIAL 0u      /* the host serialises every call on an instance */
#define VSDK_CONCURRENCY_THREAD_SAFE 1u /* any call from any thread, concurrently */
/* The conformance run tests the declaration: the kernel contract's
 * concurrency pass (docs/runner.md) calls `execute` from several threads at
 * once on a THREAD_SAFE provider, and must get the answers each call gives
 * alone; a SERIAL provider is driven from the same threads, but the host
 * serialises its calls, so it never sees two at once. */

/* ------------------------------------------------------------------------- */
/* The function table                                                        */
/* ------------------------------------------------------------------------- */

/* All slots are REQUIRED unless marked OPTIONAL; the host refuses a table with
 * a NULL required slot and never calls a NULL optional one. Thread safety of
 * each call follows the table's `concurrency`, except where stated. */
typedef struct vsdk_provider_api {
  size_t struct_size;     /* sizeof(vsdk_provider_api_t) as the provider was built */
  uint32_t abi_version;   /* the version this table implements */
  uint32_t concurrency;   /* VSDK_CONCURRENCY_*; the conformance run calls a
                             THREAD_SAFE provider from several threads at
                             once and serialises a SERIAL one */

  /* --- status objects (always thread safe) --- */
  /* A provider that cannot allocate a status object (it is out of memory)
   * still must not return NULL, which means success. The C template
   * (vendors/template-c/template.c) returns a preallocated static status
   * object with VSDK_STATUS_OUT_OF_MEMORY, which its `status_destroy` leaves
   * alone; the host reads and destroys it like any other, possibly from
   * several threads, so it must stay read-only. The Rust kit (vendors/kit)
   * has no such object: its status objects are heap allocations, and when
   * one fails Rust aborts the process (in the conformance worker: CRASHED). */
  vsdk_status_code_t (*status_code)(const vsdk_status_t* status);
  /* OWNED BY the status object; NUL-terminated UTF-8, never NULL. */
  const char* (*status_message)(const vsdk_status_t* status);
  void (*status_destroy)(vsdk_status_t* status);

  /* --- lifecycle --- */
  /* *out is TRANSFERRED to the host, freed with `destroy`. Thread safe: the
   * host may create several instances, from any thread. */
  vsdk_status_t* (*create)(const vsdk_create_options_t* options, vsdk_provider_t** out);
  /* Frees the instance. The host has freed every buffer first and makes no
   * other call on this instance while (or after) it runs. */
  void (*destroy)(vsdk_provider_t* provider);

  /* --- queries --- */
  vsdk_status_t* (*get_info)(vsdk_provider_t* provider, vsdk_provider_info_t* out);
  /* Zero devices is not an error; a provider explains why through get_info's
   * description when it can. */
  vsdk_status_t* (*device_count)(vsdk_provider_t* provider, uint32_t* out);
  vsdk_status_t* (*device_info)(vsdk_provider_t* provider, uint32_t device_index,
                                vsdk_device_info_t* out);
  vsdk_status_t* (*kernel_count)(vsdk_provider_t* provider, uint64_t* out);
  vsdk_status_t* (*kernel_info)(vsdk_provider_t* provider, uint64_t index,
                                vsdk_kernel_info_t* out);
  /* *out_supported = 1 if `kernel`@`version` runs on the device for calls
   * whose first input has this dtype, else 0. `dtype` is always the dtype of
   * the call's first input, which the host asks about before every call: for
   * vsdk.cast the source dtype (the target is an attribute and cannot be
   * named here; a provider that runs only some targets answers 1 and returns
   * VSDK_STATUS_UNSUPPORTED from `execute` for the others), for
   * vsdk.resize_pil_bicubic and vsdk.resize_pil_lanczos uint8. A kernel the
   * provider does not know, or knows at another version, is answered with
   * *out_supported = 0 and no status: not an error. `kernel` is BORROWED. */
  vsdk_status_t* (*kernel_supports)(vsdk_provider_t* provider, uint32_t device_index,
                                    const char* kernel, uint32_t version,
                                    vsdk_dtype_t dtype, int32_t* out_supported);

  /* --- memory --- */
  /* *out_ptr is a device pointer TRANSFERRED to the host, freed with `free`.
   * `alignment` is a power of two; size may be 0 (a unique, freeable pointer). */
  vsdk_status_t* (*alloc)(vsdk_provider_t* provider, uint32_t device_index,
                          uint64_t size_bytes, uint64_t alignment, void** out_ptr);
  void (*free)(vsdk_provider_t* provider, uint32_t device_index, void* ptr);
  /* Blocking copies: when they return, the bytes have arrived. They are ordered
   * after every earlier `execute` on the same device. `src`/`dst` host memory is
   * BORROWED. */
  vsdk_status_t* (*copy_to_device)(vsdk_provider_t* provider, uint32_t device_index,
                                   void* dst, uint64_t dst_offset, const void* src,
                                   uint64_t size_bytes);
  vsdk_status_t* (*copy_to_host)(vsdk_provider_t* provider, uint32_t device_index,
                                 void* dst, const void* src, uint64_t src_offset,
                                 uint64_t size_bytes);
  /* Waits for all work queued on the device. */
  vsdk_status_t* (*synchronize)(vsdk_provider_t* provider, uint32_t device_index);

  /* --- kernels --- */
  /* Runs one kernel. May return before the work finishes (queued in order on
   * the device); errors found later surface from `synchronize` or a copy.
   * `call` and all it points to are BORROWED: a provider that queues work
   * copies what it needs (descriptors, attributes) before returning. */
  vsdk_status_t* (*execute)(vsdk_provider_t* provider, const vsdk_kernel_call_t* call);

  /* --- OPTIONAL --- */
  /* Device-to-device copy; the host falls back to copy_to_host + copy_to_device. */
  vsdk_status_t* (*copy_on_device)(vsdk_provider_t* provider, uint32_t device_index,
                                   void* dst, uint64_t dst_offset, const void* src,
                                   uint64_t src_offset, uint64_t size_bytes);
} vsdk_provider_api_t;

/* The one exported entry point, named VSDK_ENTRY_SYMBOL.
 *
 * The host passes the highest ABI version it speaks. The provider writes the
 * version it will use to *provider_abi_version (always, also on refusal: that
 * is what the host quotes in its error) and returns its table, or NULL to
 * refuse. The table is OWNED BY the library: static, valid while it is loaded.
 * Thread safe; may be called more than once. */
typedef const vsdk_provider_api_t* (*vsdk_get_provider_api_fn)(uint32_t host_abi_version,
                                                                uint32_t* provider_abi_version);

/* What a provider defines (hosts never call it directly; they look it up by name). */
VSDK_EXPORT const vsdk_provider_api_t* vsdk_get_provider_api(uint32_t host_abi_version,
                                                             uint32_t* provider_abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VSDK_PROVIDER_H */
