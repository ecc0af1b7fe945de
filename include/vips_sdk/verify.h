/*
 * vips_sdk/verify.h: the embedded verifier, version 1 (libvips_verify.a).
 *
 * Firmware (bring-up code on an accelerator's controller, a test harness with
 * no operating system) judges its own outputs against a VIPS stage: it
 * streams a replay pack (`vips-conformance pack-replay`, docs/golden-format.md
 * "Replay packs") through the verifier, hands each stage's inputs to the
 * device as they come, feeds the device's output bytes back, and reads a
 * verdict with the same margins the host's `vips-conformance run` gives for
 * the same bytes, and the output's SHA-256. docs/embedded.md is the guide.
 *
 * Rules:
 *  - No allocation: the state and one frame buffer live in the caller's
 *    buffer (vsdk_verify_state_size() + the pack's largest frame + 4 bytes;
 *    the header's bytes 12..16 give the largest frame, the host writes
 *    frames of at most 24 KiB + 160 bytes).
 *  - No libc but memcpy, memset, memmove and memcmp, which the firmware
 *    provides (the compiler's own copies call them).
 *  - Not thread-safe: one verifier is used by one thread at a time. Several
 *    verifiers in separate buffers are independent.
 *  - A bug inside (a panic) calls the hook set by vsdk_verify_set_panic_hook,
 *    which should not return; if it does, or none is set, the verifier spins.
 *  - Pointers in a vsdk_verify_event are BORROWED: valid until the next
 *    vsdk_verify_feed on the same verifier.
 *  - A verdict before the END event is provisional: END checks the pack's
 *    SHA-256 (vsdk_verify_done() then answers 1).
 *  - After any error the verifier refuses every later call (start again).
 *  - Chunks passed in must not overlap the buffer given to vsdk_verify_init
 *    (copy an event's bytes out before feeding them back, if ever).
 *
 * Names: `vsdk_verify_` / `VSDK_VERIFY_`.
 */
#ifndef VSDK_VERIFY_H
#define VSDK_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VSDK_VERIFY_FORMAT_VERSION 1

/* Returned by every function. */
typedef uint32_t vsdk_verify_status;
#define VSDK_VERIFY_OK 0
#define VSDK_VERIFY_VERDICT 1 /* vsdk_verify_output completed an output: vsdk_verify_finish */
#define VSDK_VERIFY_ERR_ARGUMENT 2 /* a NULL pointer */
#define VSDK_VERIFY_ERR_BUFFER 3 /* the buffer is smaller than the pack's frames need */
#define VSDK_VERIFY_ERR_MAGIC 4 /* not a replay pack */
#define VSDK_VERIFY_ERR_VERSION 5 /* a format version this verifier does not read */
#define VSDK_VERIFY_ERR_FRAME 6 /* a frame too long or that does not decode */
#define VSDK_VERIFY_ERR_ORDER 7 /* a frame or output bytes out of order, more output than due,
                                  or any call after an error */
#define VSDK_VERIFY_ERR_SIZE 8 /* sizes disagree (shape, chunk, output bytes) */
#define VSDK_VERIFY_ERR_CHECKSUM 9 /* the pack's SHA-256 does not match */
#define VSDK_VERIFY_ERR_UNSUPPORTED 10 /* a rule a device cannot apply in fixed memory */
#define VSDK_VERIFY_ERR_NO_VERDICT 11 /* vsdk_verify_finish without a completed output */

/* Element types (little-endian). */
#define VSDK_VERIFY_DTYPE_F16 0
#define VSDK_VERIFY_DTYPE_BF16 1
#define VSDK_VERIFY_DTYPE_F32 2
#define VSDK_VERIFY_DTYPE_F64 3
#define VSDK_VERIFY_DTYPE_U8 4
#define VSDK_VERIFY_DTYPE_I32 5
#define VSDK_VERIFY_DTYPE_I64 6

/* What a frame of the pack asks of the device. */
#define VSDK_VERIFY_EVENT_NONE 0 /* the frame is not complete yet: feed more */
#define VSDK_VERIFY_EVENT_PACK 1 /* name: the suite, tier: the tier */
#define VSDK_VERIFY_EVENT_STAGE 2 /* name: the stage; its inputs, then its outputs follow */
#define VSDK_VERIFY_EVENT_INPUT 3 /* bytes[0..len] go to input `name` at byte `offset` */
#define VSDK_VERIFY_EVENT_OUTPUT 4 /* output `name` (elements, dtype, shape) is judged next: run the stage */
#define VSDK_VERIFY_EVENT_EXPECTED 5 /* output_bytes of the device's output (elements from `offset`) are due */
#define VSDK_VERIFY_EVENT_END 6 /* the pack ended and its SHA-256 checked out */

#define VSDK_VERIFY_MAX_RANK 8

typedef struct vsdk_verify_event {
    uint32_t kind;           /* VSDK_VERIFY_EVENT_* */
    uint32_t dtype;          /* INPUT, OUTPUT: VSDK_VERIFY_DTYPE_* */
    const char *name;        /* BORROWED; not NUL-terminated */
    size_t name_len;
    const char *tier;        /* PACK: BORROWED; not NUL-terminated */
    size_t tier_len;
    uint32_t rank;           /* INPUT, OUTPUT */
    uint64_t shape[VSDK_VERIFY_MAX_RANK];
    uint64_t offset;         /* INPUT: byte offset of `bytes`; EXPECTED: first element due */
    const uint8_t *bytes;    /* INPUT: BORROWED, a chunk of the input (the tier's dtype) */
    size_t len;
    uint64_t elements;       /* OUTPUT: the output's elements; EXPECTED: the elements due */
    size_t output_bytes;     /* EXPECTED: the device's output bytes due */
} vsdk_verify_event;

/* Which criteria failed (vsdk_verdict.failed). */
#define VSDK_VERIFY_FAILED_ELEMENTS 1u /* more elements past their bound than allowed */
#define VSDK_VERIFY_FAILED_RMS 2u /* the error's rms over a correct implementation's */
#define VSDK_VERIFY_FAILED_BIAS 4u /* a systematic bias */

/* One output's verdict: the host's judgement (docs/error-model.md, section 3)
 * less its percentiles. NaN marks what was not tested. */
typedef struct vsdk_verdict {
    uint64_t elements;
    uint64_t over_bound;       /* elements with |e| > 1 (NaN/Inf mismatches included) */
    double max_e;              /* the largest |e|: below 1 passes; margin 1 - max_e */
    uint64_t worst_index;      /* flat index of the first largest |e| (UINT64_MAX: none) */
    uint64_t nonfinite_index;  /* first NaN/Inf differing from the reference (UINT64_MAX: none) */
    double rms_e;              /* sqrt(mean e^2) */
    double rms_t;              /* sqrt(mean t^2), t = error / sigma (NaN: not tested) */
    double bias_z;             /* sum t / sqrt(sum t^2) (NaN: not tested) */
    double bias_ratio;         /* mean t / rms t (NaN: not tested) */
    double max_abs_error;      /* largest |actual - reference| */
    double rel_l2_error;       /* ||actual - reference|| / ||reference|| */
    double tolerance_factor;   /* failed: least factor on bound and sigma that passes
                                  (NaN: passed, or a bias; inf: a NaN) */
    uint32_t failed;           /* VSDK_VERIFY_FAILED_* */
    uint32_t passed;           /* 1 passed, 0 failed */
    uint8_t sha256[32];        /* of the output bytes fed */
} vsdk_verdict;

typedef struct vsdk_verify vsdk_verify;

/* Bytes of state before the frame buffer (alignment included). */
size_t vsdk_verify_state_size(void);

/* Places a verifier in `buffer` (`size` bytes, BORROWED for the verifier's
 * life). NULL if the state does not fit. */
vsdk_verify *vsdk_verify_init(void *buffer, size_t size);

/* Feeds pack bytes in any chunking: consumes `chunk` up to the end of the
 * next frame (*consumed says how much; call again with the rest) and, when a
 * frame completed, describes it in *event (else kind NONE). After an EXPECTED
 * event, the device's output bytes are due before more pack bytes. */
vsdk_verify_status vsdk_verify_feed(vsdk_verify *v, const uint8_t *chunk, size_t len,
                                    size_t *consumed, vsdk_verify_event *event);

/* The device's output bytes for the elements the last EXPECTED event made
 * due: whole elements, in order, in one or more calls. Returns
 * VSDK_VERIFY_VERDICT when they completed an output. */
vsdk_verify_status vsdk_verify_output(vsdk_verify *v, const uint8_t *bytes, size_t len);

/* Writes the verdict of the output just completed (once per output). */
vsdk_verify_status vsdk_verify_finish(vsdk_verify *v, vsdk_verdict *out);

/* 1 once the END event came (the pack's SHA-256 checked out), else 0. */
uint32_t vsdk_verify_done(const vsdk_verify *v);

/* Called on a panic inside the verifier; should not return. NULL: none. */
typedef void (*vsdk_verify_panic_hook)(const char *message, size_t len);
void vsdk_verify_set_panic_hook(vsdk_verify_panic_hook hook);

#ifdef __cplusplus
}
#endif

#endif /* VSDK_VERIFY_H */
