/*
 * vips_sdk/vips_sdk.h: the VIPS SDK engine API (libvips_sdk), version 0.1.
 *
 * What an inference engine written in C or C++ calls: open provider
 * libraries and list their devices; open a suite (a VIPS document and its
 * golden vectors) and list its stages and tensors; run a suite on a provider
 * and read every stage's result and margin; check tensors the engine computed
 * itself against a stage's golden outputs with the same error model as the
 * `vips-conformance` CLI; and verify a signed certification report before
 * trusting a driver. docs/c-api.md is the guide, with a quick start.
 *
 * Rules (the provider header's, vips_sdk/provider.h, which this one includes):
 *  - Every struct passed in or out starts with `struct_size`, set by the caller
 *    to sizeof() as it knows it. Structs only grow at the end; the library
 *    reads and writes only fields that fit, and refuses a struct_size smaller
 *    than the first version of the struct (VSDK_STATUS_INVALID_ARGUMENT).
 *  - Errors are objects: a function returning `vsdk_error_t*` returns NULL on
 *    success; otherwise the caller owns the error (TRANSFERRED), reads it with
 *    vsdk_error_code / vsdk_error_message and frees it with vsdk_error_free.
 *    Out-parameters are written only on success.
 *  - Nothing unwinds out of the library: a panic inside becomes an error with
 *    VSDK_STATUS_INTERNAL.
 *  - Ownership is written next to every pointer: BORROWED (valid for the call),
 *    OWNED BY <object> (valid until that object is freed), TRANSFERRED (the
 *    receiver frees it with the named function). `*_free(NULL)` does nothing.
 *  - A NULL argument or a handle of the wrong kind gives
 *    VSDK_STATUS_INVALID_ARGUMENT, never a crash. A freed handle is
 *    recognised only while its memory is not reused: never use one.
 *  - Threads: every function may be called from any thread. Different objects
 *    may be used concurrently; one object may be read (functions taking a
 *    `const` handle) from several threads at once, but must not be freed while
 *    another thread uses it. Each function says where it differs.
 *
 * Names: `vsdk_` / `VSDK_` (libvips owns `vips_`; both link into one program).
 */
#ifndef VSDK_VIPS_SDK_H
#define VSDK_VIPS_SDK_H

#include <stddef.h>
#include <stdint.h>

#include "vips_sdk/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Version                                                                   */
/* ------------------------------------------------------------------------- */

/* The SDK version this header belongs to (semver; the Cargo version). */
#define VSDK_SDK_VERSION_MAJOR 0
#define VSDK_SDK_VERSION_MINOR 1
#define VSDK_SDK_VERSION_PATCH 0
#define VSDK_SDK_VERSION_STRING "0.1.0"
/* major * 10000 + minor * 100 + patch */
#define VSDK_SDK_VERSION_NUMBER \
  (VSDK_SDK_VERSION_MAJOR * 10000 + VSDK_SDK_VERSION_MINOR * 100 + VSDK_SDK_VERSION_PATCH)

#if defined(_WIN32)
#define VSDK_API __declspec(dllimport)
#else
#define VSDK_API __attribute__((visibility("default")))
#endif

/* The library's version, to compare with the header's at run time:
 * VSDK_SDK_VERSION_NUMBER form. */
VSDK_API uint32_t vsdk_sdk_version_number(void);
/* "major.minor.patch", OWNED BY the library (static). */
VSDK_API const char* vsdk_sdk_version(void);

/* ------------------------------------------------------------------------- */
/* Errors                                                                    */
/* ------------------------------------------------------------------------- */

/* Status codes beyond provider.h's (VSDK_STATUS_INVALID_ARGUMENT ...
 * VSDK_STATUS_INTERNAL keep their meaning). */
#define VSDK_STATUS_NOT_FOUND 16     /* no such provider, suite, stage, tensor */
#define VSDK_STATUS_INVALID_FILE 17  /* a file is unreadable, corrupt or beyond a limit */
#define VSDK_STATUS_NOT_VERIFIED 18  /* a report's signature or subjects do not verify */

typedef struct vsdk_error vsdk_error_t;

/* The error's code. NULL: VSDK_STATUS_OK. */
VSDK_API vsdk_status_code_t vsdk_error_code(const vsdk_error_t* error);
/* One line, UTF-8, naming what was wrong and where. OWNED BY `error`. NULL:
 * "". */
VSDK_API const char* vsdk_error_message(const vsdk_error_t* error);
VSDK_API void vsdk_error_free(vsdk_error_t* error);

/* ------------------------------------------------------------------------- */
/* Providers                                                                 */
/* ------------------------------------------------------------------------- */

/* A loaded provider library (its instance lives as long as the handle; the
 * library is unloaded when nothing made from it is left). */
typedef struct vsdk_host_provider vsdk_host_provider_t;

/* Opens a provider: a library path (an argument containing '/' or ending in
 * ".so"), or a name (e.g. "cpu") looked up as libvsdk_provider_<name>.so in,
 * in order: the directories of VSDK_PROVIDER_PATH;
 * <program dir>/../lib/vips-sdk/providers; the program's directory and its
 * parent; vips-sdk/providers beside libvips_sdk.so
 * (<prefix>/lib/vips-sdk/providers); lib/vips-sdk/providers of the prefix
 * tools/install recorded into the library (a statically linked program
 * finds its installation so); /usr/local/lib/vips-sdk/providers;
 * /usr/lib/vips-sdk/providers (docs/c-api.md, "Names and paths"). The reference provider "cpu" that
 * vsdk_run and vsdk_check judge against is found the same way.
 * `path_or_name` BORROWED. `*out` TRANSFERRED: vsdk_provider_free. */
VSDK_API vsdk_error_t* vsdk_provider_open(const char* path_or_name, vsdk_host_provider_t** out);
VSDK_API void vsdk_provider_free(vsdk_host_provider_t* provider);

/* What the provider says it is; strings OWNED BY `provider`. The library
 * path is where it was loaded from. */
typedef struct vsdk_host_provider_info {
  size_t struct_size;
  const char* name;
  const char* vendor;
  const char* version;
  const char* library;
  uint32_t abi_version;
  uint32_t device_count;
} vsdk_host_provider_info_t;

VSDK_API vsdk_error_t* vsdk_provider_info(const vsdk_host_provider_t* provider,
                                          vsdk_host_provider_info_t* out);

/* Device `index` (< device_count) as provider.h's vsdk_device_info_t; its
 * strings OWNED BY `provider`. */
VSDK_API vsdk_error_t* vsdk_provider_device_info(const vsdk_host_provider_t* provider,
                                                 uint32_t index, vsdk_device_info_t* out);

/* ------------------------------------------------------------------------- */
/* Suites                                                                    */
/* ------------------------------------------------------------------------- */

/* A suite: a VIPS document and its golden file, checked against each other. */
typedef struct vsdk_suite vsdk_suite_t;

/* Opens a suite: a path (an argument containing '/' or ending in ".yaml": a
 * suite directory, or a document with its .golden beside it), else a name
 * looked up in VSDK_SUITES_PATH, then share/vips-sdk/suites of the
 * library's prefix, of the prefix tools/install recorded, of /usr/local and
 * /usr (docs/c-api.md, "Names and paths"). `path_or_name` BORROWED; `*out` TRANSFERRED:
 * vsdk_suite_free. */
VSDK_API vsdk_error_t* vsdk_suite_open(const char* path_or_name, vsdk_suite_t** out);
VSDK_API void vsdk_suite_free(vsdk_suite_t* suite);

/* Strings OWNED BY the suite. */
typedef struct vsdk_suite_info {
  size_t struct_size;
  const char* component;       /* component id, e.g. "dinov2-vits14" */
  const char* version;         /* its semver */
  const char* document_sha256; /* hex */
  const char* golden_sha256;   /* hex, of the whole golden file */
  size_t stage_count;
  size_t tensor_count;         /* tensors the document declares */
} vsdk_suite_info_t;

VSDK_API vsdk_error_t* vsdk_suite_info(const vsdk_suite_t* suite, vsdk_suite_info_t* out);

/* Stage `index` (< stage_count), in execution order. Everything OWNED BY the
 * suite; `inputs` and `outputs` are arrays of tensor names. */
typedef struct vsdk_stage_info {
  size_t struct_size;
  const char* name;
  const char* algorithm;
  size_t input_count;
  const char* const* inputs;
  size_t output_count;
  const char* const* outputs;
} vsdk_stage_info_t;

VSDK_API vsdk_error_t* vsdk_suite_stage(const vsdk_suite_t* suite, size_t index,
                                        vsdk_stage_info_t* out);

/* A tensor's name, dtype and shape (as stored: the tier decides the dtype a
 * stage runs at). `name` and `shape` OWNED BY the suite. */
typedef struct vsdk_tensor_info {
  size_t struct_size;
  const char* name;
  vsdk_dtype_t dtype;
  int32_t ndim;
  const int64_t* shape;
} vsdk_tensor_info_t;

/* The tensor named `name` (BORROWED). */
VSDK_API vsdk_error_t* vsdk_suite_tensor(const vsdk_suite_t* suite, const char* name,
                                         vsdk_tensor_info_t* out);
/* Tensor `index` (< tensor_count), in the document's order. */
VSDK_API vsdk_error_t* vsdk_suite_tensor_at(const vsdk_suite_t* suite, size_t index,
                                            vsdk_tensor_info_t* out);

/* Copies tensor `name` (an input, a weight or a golden output; seeded
 * tensors are generated) converted to float32, row-major, into `dst`, which
 * holds `count` elements: exactly the tensor's element count. `name`
 * BORROWED; `dst` written on success only. Thread-safe on one suite. */
VSDK_API vsdk_error_t* vsdk_suite_read_f32(const vsdk_suite_t* suite, const char* name,
                                           float* dst, size_t count);

/* ------------------------------------------------------------------------- */
/* Results                                                                   */
/* ------------------------------------------------------------------------- */

/* The results of a run or a check: one record per stage, tier and round. */
typedef struct vsdk_results vsdk_results_t;
VSDK_API void vsdk_results_free(vsdk_results_t* results);

/* Stage statuses (docs/runner.md). */
typedef int32_t vsdk_stage_status_t;
#define VSDK_STAGE_PASS 0
#define VSDK_STAGE_FAIL 1
#define VSDK_STAGE_NOT_SUPPORTED 2
#define VSDK_STAGE_ERROR 3
#define VSDK_STAGE_CRASHED 4
#define VSDK_STAGE_TIMEOUT 5
#define VSDK_STAGE_MISSING 6
#define VSDK_STAGE_OUT_OF_BOUNDS 7
#define VSDK_STAGE_UNWRITTEN 8
#define VSDK_STAGE_FLAKY 9
#define VSDK_STAGE_EXPECTED_FAIL 10
#define VSDK_STAGE_UNEXPECTED_PASS 11
#define VSDK_STAGE_MEMORY_LIMIT 12   /* the worker was killed at its memory limit */
#define VSDK_STAGE_PROCESSES_LEFT 13 /* the driver left processes running */
#define VSDK_STAGE_NOT_CAPTURED 14   /* vsdk_check: none of the stage's outputs was
                                        given; not judged, not a failure */

/* Summary: every selected stage passed at every tier in every round, and
 * every end-to-end comparison of a chained run or check passed.
 * Grown structs: fields after an "appended" comment came later; a caller
 * built against an older header passes its smaller struct_size and gets
 * (or gives) the fields it knows, the others read as 0. */
typedef struct vsdk_results_info {
  size_t struct_size;
  int32_t passed;        /* 1 or 0 */
  size_t record_count;   /* stage records, main rounds first, tier by tier */
  /* appended: */
  size_t end_to_end_count; /* chained mode: vsdk_results_end_to_end records */
} vsdk_results_info_t;

VSDK_API vsdk_error_t* vsdk_results_info(const vsdk_results_t* results,
                                         vsdk_results_info_t* out);

/* Record `index` (< record_count). Strings OWNED BY `results`; `reason` NULL
 * only for PASS: every other status says why (how far, which element, which
 * operator). The margin is 1 - max_e over the stage's outputs (the
 * normalised error, docs/error-model.md: |e| <= 1 passes); NaN when the stage
 * produced no judged output. */
typedef struct vsdk_stage_record {
  size_t struct_size;
  const char* stage;
  const char* tier;      /* "fp32", "fp16", "bf16", "exact" */
  const char* round;     /* "main", "differential" or "contract" */
  vsdk_stage_status_t status;
  int32_t reserved;      /* 0 */
  const char* status_label; /* "PASS", "FAIL", ... */
  const char* execution; /* "fused", "decomposed", "captured", or "" */
  const char* reason;
  double max_e;
  double margin;
  double seconds;
  size_t output_count;
} vsdk_stage_record_t;

VSDK_API vsdk_error_t* vsdk_results_record(const vsdk_results_t* results, size_t index,
                                           vsdk_stage_record_t* out);

/* Output `output` (< output_count) of record `index`: the error model's
 * metrics (against the float64 reference from the stage's own inputs) and
 * the drift from the golden value. `tensor` OWNED BY `results`. */
typedef struct vsdk_output_record {
  size_t struct_size;
  const char* tensor;
  int32_t passed;
  int32_t reserved;        /* 0 */
  uint64_t elements;
  uint64_t over_bound;     /* elements outside their bound */
  double max_e;
  double margin;           /* 1 - max_e */
  double p50_e;
  double p99_e;
  double max_abs_error;    /* against the reference */
  double golden_max_abs_error;
  double golden_rel_l2_error;
  double golden_cosine_similarity;
  /* appended: */
  uint64_t worst_index;    /* row-major index of the element with the largest
                              |e|; UINT64_MAX when there is none */
  double worst_actual;     /* its value, the reference's, and its bound */
  double worst_reference;
  double worst_bound;
  double rms_t;            /* rms of error/sigma (pass: <= rms_factor); NaN: not tested */
  double tolerance_factor; /* the least factor on the bound that would pass;
                              NaN when none would (a bias) */
} vsdk_output_record_t;

VSDK_API vsdk_error_t* vsdk_results_output(const vsdk_results_t* results, size_t index,
                                           size_t output, vsdk_output_record_t* out);

/* Chained mode: a component output (one no later stage consumes) computed
 * end to end, against its golden value, with the criterion of the stage
 * that produces it. `tensor` and `tier` OWNED BY `results`. */
typedef struct vsdk_end_to_end_record {
  size_t struct_size;
  const char* tensor;
  const char* tier;
  int32_t passed;
  int32_t reserved;          /* 0 */
  double rel_l2_error;
  double cosine_similarity;
  double max_abs_error;
  uint64_t nonfinite_mismatches;
  double max_rel_l2_error;   /* the criterion */
  double min_cosine_similarity;
} vsdk_end_to_end_record_t;

/* End-to-end record `index` (< end_to_end_count). */
VSDK_API vsdk_error_t* vsdk_results_end_to_end(const vsdk_results_t* results, size_t index,
                                               vsdk_end_to_end_record_t* out);

/* ------------------------------------------------------------------------- */
/* Running a suite on a provider                                             */
/* ------------------------------------------------------------------------- */

/* Options; BORROWED for the call. Zero-initialise, set struct_size, then
 * what you need: NULL / 0 fields take the defaults. */
typedef struct vsdk_run_options {
  size_t struct_size;
  const char* const* tiers; /* tier names; NULL: {"fp32"} */
  size_t tier_count;
  const char* stage_glob;   /* only stages matching; NULL: all */
  int32_t chained;          /* 1: the provider's own outputs flow on */
  uint32_t device;          /* device index */
  int32_t no_differential;  /* 1: skip the differential round */
  int32_t in_process;       /* 1: call the provider in this process (debugging);
                               0: in the sandboxed worker, as the CLI does */
  uint64_t seed;            /* 0: fresh */
} vsdk_run_options_t;

/* Runs `suite` on device `options->device` of `provider`, judged against the
 * SDK's CPU reference provider (found like "cpu"). By default the provider's
 * library runs in the SDK's sandboxed worker program (vips-sdk-worker, found
 * through $VSDK_WORKER, beside libvips_sdk or in <prefix>/libexec/vips-sdk),
 * the very worker the CLI uses: the same process name, environment and
 * sandbox, so a driver cannot tell an engine's run from a certification
 * (docs/runner.md). A failing stage is a result, not an error. `*out`
 * TRANSFERRED: vsdk_results_free. With `in_process` = 1 the provider handle is
 * called in this process: concurrent runs on one provider are then as safe as
 * the provider's declared concurrency (the SDK serialises a provider
 * declaring VSDK_CONCURRENCY_SERIAL). */
VSDK_API vsdk_error_t* vsdk_run(const vsdk_suite_t* suite, const vsdk_host_provider_t* provider,
                                const vsdk_run_options_t* options, vsdk_results_t** out);

/* ------------------------------------------------------------------------- */
/* Checking an engine's own tensors                                          */
/* ------------------------------------------------------------------------- */

/* Named host tensors an engine computed (stage outputs, stage inputs as it
 * fed them, named INPUT@STAGE, and intermediates of a stage's graph, named
 * NODE@STAGE, which locate a failing stage's operator), to check. A set only
 * grows; names are unique. Use one set from one thread at a time while
 * adding. */
typedef struct vsdk_tensors vsdk_tensors_t;

/* An empty set. `*out` TRANSFERRED: vsdk_tensors_free. */
VSDK_API vsdk_error_t* vsdk_tensors_new(vsdk_tensors_t** out);
/* A set read from a capture file, as `vips-conformance check --tensors`
 * reads it: .npy (one tensor named after the file), .npz or .safetensors
 * (named tensors); sizes are checked before anything is allocated. `path`
 * BORROWED; `*out` TRANSFERRED: vsdk_tensors_free. */
VSDK_API vsdk_error_t* vsdk_tensors_open(const char* path, vsdk_tensors_t** out);
/* Adds a file's tensors to the set (a name already there is an error). */
VSDK_API vsdk_error_t* vsdk_tensors_read(vsdk_tensors_t* tensors, const char* path);
/* Adds a copy of `tensor` (host memory, any catalog dtype, strided or not,
 * as vsdk_check's outputs; read during the call) as `name`. BORROWED. */
VSDK_API vsdk_error_t* vsdk_tensors_add(vsdk_tensors_t* tensors, const char* name,
                                        const vsdk_tensor_t* tensor);
VSDK_API vsdk_error_t* vsdk_tensors_count(const vsdk_tensors_t* tensors, size_t* out);
/* Tensor `index` (< count), in the order added; `name` and `shape` OWNED
 * BY the set until vsdk_tensors_free. */
VSDK_API vsdk_error_t* vsdk_tensors_at(const vsdk_tensors_t* tensors, size_t index,
                                       vsdk_tensor_info_t* out);
VSDK_API void vsdk_tensors_free(vsdk_tensors_t* tensors);

/* Outputs of one stage computed by the engine, judged like a provider's:
 * against the float64 reference recomputed from the stage's golden inputs,
 * within the error model's bound at `tier`, with margins.
 * `outputs[i]` is the stage output named `names[i]` (with `stage` set, every
 * output of the stage), given directly or in `tensors`. Each tensor is a DLPack-compatible descriptor in host
 * memory (device_type VSDK_DEVICE_CPU), of the output's declared shape, any
 * catalog dtype (converted to the tier's), strided or not: `strides` NULL
 * means compact row-major; strides are in elements and not negative. Data is
 * read during the call only. Everything BORROWED. */
typedef struct vsdk_check_args {
  size_t struct_size;
  const char* stage;       /* one stage; NULL: every stage (with `tensors`) */
  const char* tier;        /* NULL: "fp32" */
  size_t output_count;     /* `outputs` of `stage`, named `names`; 0: none */
  const char* const* names;
  const vsdk_tensor_t* outputs;
  /* appended: */
  const vsdk_tensors_t* tensors; /* NULL, or the engine's tensors by name */
  int32_t chained;         /* 1: chained, 0: isolated, VSDK_CHECK_AUTO: as below */
  int32_t reserved;        /* 0 */
} vsdk_check_args_t;

/* `vsdk_check_args_t.chained`: chained where the tensors hold what fed a
 * judged stage (an earlier stage's output it reads, or an INPUT@STAGE), else
 * isolated: what `vips-conformance check` does without --mode. */
#define VSDK_CHECK_AUTO (-1)

/* Everything the CLI's `check` does (docs/runner.md, "Judging outputs
 * computed elsewhere"), on `outputs` and/or `tensors`:
 * - isolated (chained = 0): each stage's reference is computed from its golden
 *   inputs, or from an input given as INPUT@STAGE (as the engine fed it);
 * - a failing stage whose intermediates were given as NODE@STAGE: its
 *   record's reason names the first of them that fails against the
 *   reference fed that node's own inputs;
 * - chained (chained = 1): each stage's inputs are the engine's own tensors of
 *   those names where given (one wider than the tier, float32 at bf16, as
 *   given), else the golden values (the record's notes say so); a stage that
 *   only moves data (slices, reshapes) whose input was not given is judged
 *   through the stage that produced it; component outputs are also compared
 *   end to end (vsdk_results_end_to_end);
 * - VSDK_CHECK_AUTO: chained for tensors computed end to end, as the CLI.
 * A stage none of whose outputs is given is VSDK_STAGE_NOT_CAPTURED (so an
 * engine that starts at any stage is judged from there); one with some of
 * them is ERROR. Element bounds, rms and bias are tested as for a provider.
 * `*out` TRANSFERRED: vsdk_results_free; one main-round record per stage:
 * PASS, FAIL (the reason and margins say how far), NOT CAPTURED, or ERROR
 * when the reference could not compute the stage. No stage given at all is
 * VSDK_STATUS_INVALID_ARGUMENT. */
VSDK_API vsdk_error_t* vsdk_check(const vsdk_suite_t* suite, const vsdk_check_args_t* args,
                                  vsdk_results_t** out);

/* ------------------------------------------------------------------------- */
/* Certification reports                                                     */
/* ------------------------------------------------------------------------- */

/* What a verified report says; strings OWNED BY the report object. */
typedef struct vsdk_report vsdk_report_t;
VSDK_API void vsdk_report_free(vsdk_report_t* report);

typedef struct vsdk_report_info {
  size_t struct_size;
  int32_t certified;         /* 1: the verdict is CERTIFIED */
  int32_t reserved;          /* 0 */
  const char* verdict;       /* "CERTIFIED" or "NOT CERTIFIED" */
  const char* reasons;       /* why not, one per line; "" when certified */
  const char* component;
  const char* component_version;
  const char* tier;
  const char* provider;      /* the provider's claimed name */
  const char* provider_sha256;
  const char* device;
  const char* finished;      /* RFC 3339 */
} vsdk_report_info_t;

/* Files and keys to verify a report with; BORROWED. */
typedef struct vsdk_verify_args {
  size_t struct_size;
  const char* report;     /* the report file (a DSSE envelope) */
  const char* public_key; /* SPKI PEM file of the trusted key */
  const char* provider;   /* NULL, or the provider library that must be the certified one */
  const char* golden;     /* NULL, or the golden file that must be the certified one */
} vsdk_verify_args_t;

/* Verifies the report's Ed25519 signature with the key, that it is a VIPS
 * certification whose verdict follows from its records, and that the given
 * files are the certified ones (docs/report-format.md). A report that does
 * not verify is VSDK_STATUS_NOT_VERIFIED with the reason; one that verifies
 * but says NOT CERTIFIED is a success whose info says so (`certified` 0):
 * refuse the driver then. `*out` TRANSFERRED: vsdk_report_free. */
VSDK_API vsdk_error_t* vsdk_verify_report(const vsdk_verify_args_t* args, vsdk_report_t** out);
VSDK_API vsdk_error_t* vsdk_report_info(const vsdk_report_t* report, vsdk_report_info_t* out);

#ifdef __cplusplus
}
#endif

#endif /* VSDK_VIPS_SDK_H */
