/*
 * A hostile driver: a provider library that forwards every call to a real
 * provider and misbehaves in exactly one way, chosen by a -D flag at build time
 * (see build.rs; with no flag it is the well-behaved control, "working").
 *
 * Environment (read by the library, not by the host):
 *   VSDK_HOSTILE_TARGET  path of the real provider library to forward to.
 *                        Unset or unloadable: vsdk_get_provider_api still
 *                        answers, and `create` fails with a status naming it.
 *   VSDK_HOSTILE_KERNEL  the kernel whose `execute` misbehaves (default
 *                        vsdk.gelu); other kernels are forwarded untouched.
 *   VSDK_HOSTILE_TAPE    HOSTILE_REPLAY only: directory of the recordings.
 *   VSDK_HOSTILE_MODE    HOSTILE_REPLAY only: "record" or "replay".
 *   VSDK_HOSTILE_MARKER  HOSTILE_FLAKY only: a file; aborts once while it is absent.
 *
 * Forwarding: the instance pointer is the real provider's, passed through.
 * Every status the library returns is its own object, either wrapping the real
 * provider's status (code and message are asked of the real table, and
 * status_destroy frees it there) or made here. The table mirrors the real one:
 * its struct_size, abi_version and concurrency, and NULL wherever the real
 * table has NULL or ends early (so a host judges the pair as it would judge
 * the real provider). get_info is forwarded as-is: a hostile driver claims the
 * real provider's name, on purpose.
 *
 * The variants that touch tensor memory themselves (everything after the
 * forwarded `execute`) read and write it directly: they assume a device whose
 * memory is host memory, as the CPU provider's is.
 *
 * C99 plus POSIX (dlopen, pthreads).
 */
#define _POSIX_C_SOURCE 200809L
#include <vips_sdk/provider.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TARGET_ENV "VSDK_HOSTILE_TARGET"
#define KERNEL_ENV "VSDK_HOSTILE_KERNEL"
#define TAPE_ENV "VSDK_HOSTILE_TAPE"
#define MODE_ENV "VSDK_HOSTILE_MODE"
#define DEFAULT_KERNEL "vsdk.gelu"

#if defined(__GNUC__)
#define MAYBE_UNUSED __attribute__((unused))
#else
#define MAYBE_UNUSED
#endif

/* ------------------------------------------------------------------------- */
/* The real provider                                                         */
/* ------------------------------------------------------------------------- */

static pthread_mutex_t LOAD_LOCK = PTHREAD_MUTEX_INITIALIZER;
static int LOAD_TRIED;                     /* under LOAD_LOCK */
static vsdk_get_provider_api_fn REAL_ENTRY; /* NULL: the target did not load */
static char LOAD_ERROR[1024];              /* why, when REAL_ENTRY is NULL */
/* The real table, set once under LOAD_LOCK before TABLE is handed out. */
static const vsdk_provider_api_t* REAL;
static vsdk_provider_api_t TABLE;
static int TABLE_FILLED;

static void load_target(void) {
  const char* path = getenv(TARGET_ENV);
  void* lib;
  void* entry;
  if (path == NULL || path[0] == '\0') {
    snprintf(LOAD_ERROR, sizeof LOAD_ERROR,
             "%s is not set: set it to the path of the provider library to forward to", TARGET_ENV);
    return;
  }
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* why = dlerror();
    snprintf(LOAD_ERROR, sizeof LOAD_ERROR, "cannot load %s=%s: %s", TARGET_ENV, path,
             why != NULL ? why : "unknown error");
    return;
  }
  entry = dlsym(lib, VSDK_ENTRY_SYMBOL);
  if (entry == NULL) {
    snprintf(LOAD_ERROR, sizeof LOAD_ERROR, "%s=%s exports no %s", TARGET_ENV, path, VSDK_ENTRY_SYMBOL);
    return;
  }
  if ((vsdk_get_provider_api_fn)entry == vsdk_get_provider_api) {
    snprintf(LOAD_ERROR, sizeof LOAD_ERROR, "%s=%s is this hostile library itself", TARGET_ENV, path);
    return;
  }
  /* The handle is never closed: the real table must outlive every caller. */
  REAL_ENTRY = (vsdk_get_provider_api_fn)entry;
}

/* ------------------------------------------------------------------------- */
/* Status objects                                                            */
/* ------------------------------------------------------------------------- */

struct vsdk_status {
  vsdk_status_code_t code; /* when made here */
  char* message;           /* when made here; malloc'd */
  vsdk_status_t* real;     /* when wrapping the real provider's status */
};

static vsdk_status_t* new_status(void) {
  vsdk_status_t* s = (vsdk_status_t*)calloc(1, sizeof *s);
  if (s == NULL) abort(); /* no way to report anything without memory */
  return s;
}

/* A status made here, printf-style message prefixed with "hostile: ". */
static vsdk_status_t* fail(vsdk_status_code_t code, const char* format, ...) {
  vsdk_status_t* s = new_status();
  va_list args;
  char text[2048];
  size_t n;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  n = strlen("hostile: ") + strlen(text) + 1;
  s->code = code;
  s->message = (char*)malloc(n);
  if (s->message == NULL) abort();
  snprintf(s->message, n, "hostile: %s", text);
  return s;
}

/* The real provider's status in one of ours (NULL stays NULL). */
static vsdk_status_t* wrap(vsdk_status_t* real) {
  vsdk_status_t* s;
  if (real == NULL) return NULL;
  s = new_status();
  s->real = real;
  return s;
}

static vsdk_status_code_t status_code(const vsdk_status_t* s) {
  return s->real != NULL ? REAL->status_code(s->real) : s->code;
}
static const char* status_message(const vsdk_status_t* s) {
  return s->real != NULL ? REAL->status_message(s->real) : s->message;
}
static void status_destroy(vsdk_status_t* s) {
  if (s == NULL) return;
  if (s->real != NULL) REAL->status_destroy(s->real);
  free(s->message);
  free(s);
}

/* ------------------------------------------------------------------------- */
/* Helpers for the variants                                                  */
/* ------------------------------------------------------------------------- */

/* Is this the call the variant misbehaves on? */
static MAYBE_UNUSED int is_target(const vsdk_kernel_call_t* c) {
  const char* target = getenv(KERNEL_ENV);
  if (target == NULL || target[0] == '\0') target = DEFAULT_KERNEL;
  return c->kernel != NULL && strcmp(c->kernel, target) == 0;
}

/* product(shape) * bits/8 (a scalar, ndim 0, is one element). */
static MAYBE_UNUSED uint64_t tensor_bytes(const vsdk_tensor_t* t) {
  uint64_t n = 1;
  int32_t k;
  for (k = 0; k < t->ndim; k++) n *= t->shape[k] > 0 ? (uint64_t)t->shape[k] : 0;
  return n * t->dtype.bits / 8;
}

/* Where element 0 of a tensor lives (on a host-memory device). */
static MAYBE_UNUSED unsigned char* tensor_start(const vsdk_tensor_t* t) {
  return (unsigned char*)t->data + t->byte_offset;
}

/* Writes through a NULL pointer: both the pointer and the store are volatile,
 * so the compiler can neither see that it is NULL nor drop the store. */
static MAYBE_UNUSED void crash_null(void) {
  volatile int* volatile nowhere = NULL;
  *nowhere = 42;
}

/* Serialises the variants' static counters. */
static MAYBE_UNUSED pthread_mutex_t COUNTER_LOCK = PTHREAD_MUTEX_INITIALIZER;

static MAYBE_UNUSED uint64_t next_count(uint64_t* counter) {
  uint64_t n;
  pthread_mutex_lock(&COUNTER_LOCK);
  n = ++*counter;
  pthread_mutex_unlock(&COUNTER_LOCK);
  return n;
}

/* Prints one line to stdout, where a host may be writing its own output. */
static MAYBE_UNUSED void noise(const char* where) {
  printf("hostile stdout_noise: %s\n", where);
  fflush(stdout);
}

/* ------------------------------------------------------------------------- */
/* HOSTILE_HALF_WRITE: a driver whose kernel writes only part of its output  */
/* (a grid sized for half the elements, a missing tail loop): the rest keeps */
/* whatever the buffer held before.                                          */
/* ------------------------------------------------------------------------- */
#ifdef HOSTILE_HALF_WRITE
static vsdk_status_t* half_write_execute(vsdk_provider_t* p, const vsdk_kernel_call_t* c) {
  vsdk_kernel_call_t call;
  vsdk_tensor_t* scratch;
  vsdk_status_t* st = NULL;
  uint64_t i, allocated = 0;
  scratch = (vsdk_tensor_t*)calloc(c->num_outputs ? c->num_outputs : 1, sizeof *scratch);
  if (scratch == NULL) return fail(VSDK_STATUS_OUT_OF_MEMORY, "no memory for %llu output descriptors",
                                   (unsigned long long)c->num_outputs);
  for (i = 0; i < c->num_outputs && st == NULL; i++) {
    scratch[i] = c->outputs[i];
    scratch[i].byte_offset = 0;
    st = wrap(REAL->alloc(p, c->device_index, tensor_bytes(&c->outputs[i]), 64, &scratch[i].data));
    if (st == NULL) allocated++;
  }
  if (st == NULL) {
    /* The host's call, with the outputs swapped for the scratch ones (as much
     * of it as both sides know: a larger host struct is cut to ours). */
    memset(&call, 0, sizeof call);
    memcpy(&call, c, c->struct_size < sizeof call ? c->struct_size : sizeof call);
    if (call.struct_size > sizeof call) call.struct_size = sizeof call;
    call.outputs = scratch;
    st = wrap(REAL->execute(p, &call));
    if (st == NULL) st = wrap(REAL->synchronize(p, c->device_index));
  }
  if (st == NULL) {
    for (i = 0; i < c->num_outputs; i++) {
      memcpy(tensor_start(&c->outputs[i]), scratch[i].data, tensor_bytes(&c->outputs[i]) / 2);
    }
  }
  for (i = 0; i < allocated; i++) REAL->free(p, c->device_index, scratch[i].data);
  free(scratch);
  return st;
}
#endif

/* ------------------------------------------------------------------------- */
/* HOSTILE_REPLAY: a driver that memorises results instead of computing them */
/* (a benchmark-gaming driver, a cache keyed too loosely): it answers from a */
/* tape, and when the tape has nothing for these inputs it replays the last  */
/* recording of the same size (stale) or zeros. Applies to every kernel.     */
/* ------------------------------------------------------------------------- */
#ifdef HOSTILE_REPLAY
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* FNV-1a-64 over the elements of one input in row-major order (the bytes a
 * compact copy of it holds; strides are honoured). */
static uint64_t hash_tensor(uint64_t h, const vsdk_tensor_t* t) {
  uint64_t elem = t->dtype.bits / 8, n = 1, e, b;
  int64_t* index;
  int32_t k;
  for (k = 0; k < t->ndim; k++) n *= t->shape[k] > 0 ? (uint64_t)t->shape[k] : 0;
  if (n == 0 || elem == 0) return h;
  index = (int64_t*)calloc(t->ndim > 0 ? (size_t)t->ndim : 1, sizeof *index);
  if (index == NULL) abort();
  for (e = 0; e < n; e++) {
    uint64_t offset = 0;
    const unsigned char* at;
    for (k = 0; k < t->ndim; k++) offset += (uint64_t)index[k] * (uint64_t)t->strides[k];
    at = tensor_start(t) + offset * elem;
    for (b = 0; b < elem; b++) {
      h ^= at[b];
      h *= FNV_PRIME;
    }
    for (k = t->ndim - 1; k >= 0; k--) { /* next row-major index */
      if (++index[k] < t->shape[k]) break;
      index[k] = 0;
    }
  }
  free(index);
  return h;
}

/* "<tape>/<kernel>-<middle>-<output>.bin", malloc'd. '/' in a kernel name
 * becomes '_' so that every recording stays inside the tape directory. */
static char* tape_path(const char* tape, const char* kernel, const char* middle, uint64_t output) {
  int n = snprintf(NULL, 0, "%s/%s-%s-%llu.bin", tape, kernel, middle, (unsigned long long)output);
  char* path = (char*)malloc((size_t)n + 1);
  char* c;
  if (path == NULL) abort();
  snprintf(path, (size_t)n + 1, "%s/%s-%s-%llu.bin", tape, kernel, middle, (unsigned long long)output);
  for (c = path + strlen(tape) + 1; *c != '\0'; c++) {
    if (*c == '/') *c = '_';
  }
  return path;
}

/* Writes the file whole or not at all (a temporary file, then rename). */
static vsdk_status_t* write_recording(const char* path, const unsigned char* bytes, uint64_t n) {
  static uint64_t temporaries;
  char* tmp;
  FILE* f;
  int len, ok;
  uint64_t serial = next_count(&temporaries);
  len = snprintf(NULL, 0, "%s.tmp.%ld.%llu", path, (long)getpid(), (unsigned long long)serial);
  tmp = (char*)malloc((size_t)len + 1);
  if (tmp == NULL) abort();
  snprintf(tmp, (size_t)len + 1, "%s.tmp.%ld.%llu", path, (long)getpid(), (unsigned long long)serial);
  f = fopen(tmp, "wb");
  if (f == NULL) {
    vsdk_status_t* st = fail(VSDK_STATUS_INTERNAL, "cannot create %s: %s", tmp, strerror(errno));
    free(tmp);
    return st;
  }
  ok = fwrite(bytes, 1, (size_t)n, f) == (size_t)n;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    vsdk_status_t* st = fail(VSDK_STATUS_INTERNAL, "cannot write %s: %s", path, strerror(errno));
    remove(tmp);
    free(tmp);
    return st;
  }
  free(tmp);
  return NULL;
}

/* Reads a recording of exactly n bytes into `into`. *found = 0 when there is
 * no such file, or it holds another number of bytes (not this output). */
static vsdk_status_t* read_recording(const char* path, unsigned char* into, uint64_t n, int* found) {
  FILE* f = fopen(path, "rb");
  long size;
  *found = 0;
  if (f == NULL) {
    if (errno == ENOENT) return NULL;
    return fail(VSDK_STATUS_INTERNAL, "cannot open %s: %s", path, strerror(errno));
  }
  if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    vsdk_status_t* st = fail(VSDK_STATUS_INTERNAL, "cannot read %s: %s", path, strerror(errno));
    fclose(f);
    return st;
  }
  if ((uint64_t)size != n) {
    fclose(f);
    return NULL;
  }
  if (fread(into, 1, (size_t)n, f) != (size_t)n) {
    vsdk_status_t* st = fail(VSDK_STATUS_INTERNAL, "short read from %s", path);
    fclose(f);
    return st;
  }
  fclose(f);
  *found = 1;
  return NULL;
}

static vsdk_status_t* replay_execute(vsdk_provider_t* p, const vsdk_kernel_call_t* c) {
  const char* tape = getenv(TAPE_ENV);
  const char* mode = getenv(MODE_ENV);
  int recording;
  uint64_t key = FNV_OFFSET, i;
  char key_hex[17];
  struct stat tape_stat;
  vsdk_status_t* st = NULL;
  if (tape == NULL || tape[0] == '\0')
    return fail(VSDK_STATUS_INVALID_ARGUMENT, "%s is not set: set it to the tape directory", TAPE_ENV);
  if (mode == NULL || (strcmp(mode, "record") != 0 && strcmp(mode, "replay") != 0))
    return fail(VSDK_STATUS_INVALID_ARGUMENT, "%s must be \"record\" or \"replay\", not %s%s%s", MODE_ENV,
                mode ? "\"" : "", mode ? mode : "unset", mode ? "\"" : "");
  if (c->kernel == NULL) return fail(VSDK_STATUS_INVALID_ARGUMENT, "a call without a kernel name");
  recording = strcmp(mode, "record") == 0;
  if (stat(tape, &tape_stat) != 0 || !S_ISDIR(tape_stat.st_mode))
    return fail(VSDK_STATUS_INVALID_ARGUMENT, "%s=%s is not a directory", TAPE_ENV, tape);
  for (i = 0; i < c->num_inputs; i++) key = hash_tensor(key, &c->inputs[i]);
  snprintf(key_hex, sizeof key_hex, "%016llx", (unsigned long long)key);

  if (recording) {
    st = wrap(REAL->execute(p, c));
    if (st == NULL) st = wrap(REAL->synchronize(p, c->device_index));
  }
  for (i = 0; i < c->num_outputs && st == NULL; i++) {
    const vsdk_tensor_t* out = &c->outputs[i];
    uint64_t n = tensor_bytes(out);
    char last[64];
    char* keyed;
    char* stale;
    int found = 0;
    snprintf(last, sizeof last, "last-%llu", (unsigned long long)n);
    keyed = tape_path(tape, c->kernel, key_hex, i);
    stale = tape_path(tape, c->kernel, last, i);
    if (recording) {
      st = write_recording(keyed, tensor_start(out), n);
      if (st == NULL) st = write_recording(stale, tensor_start(out), n);
    } else {
      /* Never computes: the recording for these inputs, else the last one of
       * this size, else zeros. */
      st = read_recording(keyed, tensor_start(out), n, &found);
      if (st == NULL && !found) st = read_recording(stale, tensor_start(out), n, &found);
      if (st == NULL && !found) memset(tensor_start(out), 0, (size_t)n);
    }
    free(keyed);
    free(stale);
  }
  return st;
}
#endif

/* ------------------------------------------------------------------------- */
/* The forwarding table                                                      */
/* ------------------------------------------------------------------------- */

static vsdk_status_t* f_create(const vsdk_create_options_t* o, vsdk_provider_t** out) {
#ifdef HOSTILE_STDOUT_NOISE
  noise("create");
#endif
  if (REAL == NULL) return fail(VSDK_STATUS_DEVICE_ERROR, "%s", LOAD_ERROR);
  return wrap(REAL->create(o, out));
}

static void f_destroy(vsdk_provider_t* p) {
  if (REAL != NULL) REAL->destroy(p);
#ifdef HOSTILE_DESTROY_CRASH
  /* A driver whose teardown crashes (a double free, a context already gone):
   * the work was right, the process dies on the way out. */
  crash_null();
#endif
}

static vsdk_status_t* f_get_info(vsdk_provider_t* p, vsdk_provider_info_t* out) {
#ifdef HOSTILE_STDOUT_NOISE
  noise("get_info");
#endif
  return wrap(REAL->get_info(p, out));
}

static vsdk_status_t* f_device_count(vsdk_provider_t* p, uint32_t* out) {
  vsdk_status_t* st = wrap(REAL->device_count(p, out));
#ifdef HOSTILE_HUGE_DEVICE_COUNT
  /* A driver reporting an uninitialised or (uint32_t)-1 device count: a host
   * that loops over devices, or allocates per device, must not trust it. */
  if (st == NULL) *out = 0xFFFFFFFFu;
#endif
  return st;
}

static vsdk_status_t* f_device_info(vsdk_provider_t* p, uint32_t i, vsdk_device_info_t* out) {
#ifdef HOSTILE_HUGE_DEVICE_COUNT
  /* Any index answers: device 0's info, renumbered. */
  vsdk_status_t* st = wrap(REAL->device_info(p, 0, out));
  if (st == NULL && out->struct_size >= offsetof(vsdk_device_info_t, device) + sizeof out->device)
    out->device.device_id = (int32_t)i;
  return st;
#else
  return wrap(REAL->device_info(p, i, out));
#endif
}

static vsdk_status_t* f_kernel_count(vsdk_provider_t* p, uint64_t* out) {
  vsdk_status_t* st = wrap(REAL->kernel_count(p, out));
#ifdef HOSTILE_HUGE_KERNEL_COUNT
  /* A driver whose kernel count is garbage (2^63): a host that lists every
   * kernel, or reserves room for them, must not trust it. */
  if (st == NULL) *out = (uint64_t)1 << 63;
#endif
  return st;
}

static vsdk_status_t* f_kernel_info(vsdk_provider_t* p, uint64_t i, vsdk_kernel_info_t* out) {
#ifdef HOSTILE_HUGE_KERNEL_COUNT
  /* Any index answers, cycling through the real list. */
  uint64_t real_count = 0;
  vsdk_status_t* st = wrap(REAL->kernel_count(p, &real_count));
  if (st != NULL) return st;
  if (real_count == 0) return fail(VSDK_STATUS_INVALID_ARGUMENT, "the real provider has no kernels");
  return wrap(REAL->kernel_info(p, i % real_count, out));
#else
  return wrap(REAL->kernel_info(p, i, out));
#endif
}

static vsdk_status_t* f_kernel_supports(vsdk_provider_t* p, uint32_t d, const char* k, uint32_t v, vsdk_dtype_t t,
                                        int32_t* out) {
  return wrap(REAL->kernel_supports(p, d, k, v, t, out));
}

static vsdk_status_t* f_alloc(vsdk_provider_t* p, uint32_t d, uint64_t n, uint64_t a, void** out) {
  return wrap(REAL->alloc(p, d, n, a, out));
}

static void f_free(vsdk_provider_t* p, uint32_t d, void* ptr) { REAL->free(p, d, ptr); }

static vsdk_status_t* f_copy_to_device(vsdk_provider_t* p, uint32_t d, void* dst, uint64_t off, const void* src,
                                       uint64_t n) {
  return wrap(REAL->copy_to_device(p, d, dst, off, src, n));
}

static vsdk_status_t* f_copy_to_host(vsdk_provider_t* p, uint32_t d, void* dst, const void* src, uint64_t off,
                                     uint64_t n) {
  return wrap(REAL->copy_to_host(p, d, dst, src, off, n));
}

static vsdk_status_t* f_synchronize(vsdk_provider_t* p, uint32_t d) { return wrap(REAL->synchronize(p, d)); }

static vsdk_status_t* f_copy_on_device(vsdk_provider_t* p, uint32_t d, void* dst, uint64_t dst_off, const void* src,
                                       uint64_t src_off, uint64_t n) {
  return wrap(REAL->copy_on_device(p, d, dst, dst_off, src, src_off, n));
}

static vsdk_status_t* f_execute(vsdk_provider_t* p, const vsdk_kernel_call_t* c) {
  vsdk_status_t* st;
#ifdef HOSTILE_STDOUT_NOISE
  /* A driver that logs to stdout (debug prints left in, a chatty runtime):
   * a host that talks to a worker over stdout must not be confused by it. */
  noise(c->kernel != NULL ? c->kernel : "execute");
#endif
#ifdef HOSTILE_REPLAY
  return replay_execute(p, c);
#endif
#ifdef HOSTILE_HALF_WRITE
  if (is_target(c)) return half_write_execute(p, c);
#endif
#ifdef HOSTILE_SEGFAULT
  /* A driver that dereferences a bad pointer (an unchecked NULL handle). */
  if (is_target(c)) crash_null();
#endif
#ifdef HOSTILE_ABORT
  /* A driver that fails an internal assert(). */
  if (is_target(c)) abort();
#endif
#ifdef HOSTILE_EXIT0
  /* A driver that calls exit(0) on an error path: the process ends "successfully"
   * in the middle of a kernel, with no result. */
  if (is_target(c)) exit(0);
#endif
#ifdef HOSTILE_FLAKY
  /* A driver with a race that strikes once: it aborts the first time the
   * kernel runs (per marker file, VSDK_HOSTILE_MARKER, so across processes)
   * and works ever after. */
  if (is_target(c)) {
    const char* marker = getenv("VSDK_HOSTILE_MARKER");
    if (marker != NULL && access(marker, F_OK) != 0) {
      FILE* f = fopen(marker, "w");
      if (f != NULL) fclose(f);
      abort();
    }
  }
#endif
#ifdef HOSTILE_HANG
  /* A driver that deadlocks or waits forever on a device that never answers. */
  if (is_target(c)) {
    for (;;) pause();
  }
#endif

  st = wrap(REAL->execute(p, c));
  if (st != NULL || !is_target(c) || c->num_outputs == 0) return st;

#if defined(HOSTILE_OOB_NEAR) || defined(HOSTILE_OOB_FAR) || defined(HOSTILE_NONDETERMINISTIC)
  st = wrap(REAL->synchronize(p, c->device_index)); /* the kernel's writes have landed */
  if (st != NULL) return st;
#endif
#ifdef HOSTILE_OOB_NEAR
  /* A kernel whose last block writes a little past the end of its output
   * (an off-by-one in the bounds check): 8 bytes, "HOSTILE!". */
  memcpy(tensor_start(&c->outputs[0]) + tensor_bytes(&c->outputs[0]), "HOSTILE!", 8);
#endif
#ifdef HOSTILE_OOB_FAR
  /* A kernel writing through a wrong base or stride: 4096 bytes of 0xA5,
   * 1 MiB past the end of its output. */
  memset(tensor_start(&c->outputs[0]) + tensor_bytes(&c->outputs[0]) + (1u << 20), 0xA5, 4096);
#endif
#ifdef HOSTILE_NONDETERMINISTIC
  /* A driver whose results vary between runs (racy reductions, atomics in a
   * different order): every second call flips the lowest bit of element 0. */
  {
    static uint64_t calls;
    if (next_count(&calls) % 2 == 0 && tensor_bytes(&c->outputs[0]) > 0) tensor_start(&c->outputs[0])[0] ^= 1;
  }
#endif
  return st;
}

/* Copies the real table's shape into TABLE: same struct_size (at most ours),
 * version and concurrency, and a forwarder in every slot the real table fills
 * (NULL where it is NULL or past its end). Under LOAD_LOCK. */
static void fill_table(void) {
  TABLE.struct_size = sizeof TABLE;
  TABLE.abi_version = VSDK_ABI_VERSION;
  TABLE.concurrency = VSDK_CONCURRENCY_SERIAL;
  if (REAL != NULL) {
    if (REAL->struct_size < TABLE.struct_size) TABLE.struct_size = REAL->struct_size;
    TABLE.abi_version = REAL->abi_version;
    TABLE.concurrency = REAL->concurrency;
  }
#define REAL_HAS(slot)                                                                                       \
  (REAL->struct_size >= offsetof(vsdk_provider_api_t, slot) + sizeof REAL->slot && REAL->slot != NULL)
  /* Required slots: all forwarders when the target did not load (only create
   * and the status functions can be reached then). */
#define SLOT(slot, forwarder) TABLE.slot = (REAL == NULL || REAL_HAS(slot)) ? forwarder : NULL
  SLOT(status_code, status_code);
  SLOT(status_message, status_message);
  SLOT(status_destroy, status_destroy);
  SLOT(create, f_create);
  SLOT(destroy, f_destroy);
  SLOT(get_info, f_get_info);
  SLOT(device_count, f_device_count);
  SLOT(device_info, f_device_info);
  SLOT(kernel_count, f_kernel_count);
  SLOT(kernel_info, f_kernel_info);
  SLOT(kernel_supports, f_kernel_supports);
  SLOT(alloc, f_alloc);
  SLOT(free, f_free);
  SLOT(copy_to_device, f_copy_to_device);
  SLOT(copy_to_host, f_copy_to_host);
  SLOT(synchronize, f_synchronize);
  SLOT(execute, f_execute);
  /* Optional: only where the real table has it. */
  TABLE.copy_on_device = (REAL != NULL && REAL_HAS(copy_on_device)) ? f_copy_on_device : NULL;
#undef SLOT
#undef REAL_HAS
  TABLE_FILLED = 1;
}

/* Negotiation is the real provider's: its answer, its refusal. The first table
 * it hands out is the one forwarded to. */
VSDK_EXPORT const vsdk_provider_api_t* vsdk_get_provider_api(uint32_t host, uint32_t* answered) {
  const vsdk_provider_api_t* result = &TABLE;
  uint32_t ignored;
  if (answered == NULL) answered = &ignored;
  pthread_mutex_lock(&LOAD_LOCK);
  if (!LOAD_TRIED) {
    load_target();
    LOAD_TRIED = 1;
  }
  if (REAL_ENTRY != NULL) {
    const vsdk_provider_api_t* real = REAL_ENTRY(host, answered);
    if (real == NULL) {
      result = NULL;
    } else if (REAL == NULL) {
      REAL = real;
      fill_table();
    }
  } else {
    /* No target: a table anyway, whose create says why. */
    *answered = VSDK_ABI_VERSION;
    if (host < VSDK_ABI_VERSION) {
      result = NULL;
    } else if (!TABLE_FILLED) {
      fill_table();
    }
  }
  pthread_mutex_unlock(&LOAD_LOCK);
  return result;
}
