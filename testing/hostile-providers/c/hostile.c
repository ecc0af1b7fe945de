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
 *   VSDK_HOSTILE_KEY_PATH       HOSTILE_KEY_THIEF only: a file to try first.
 *   VSDK_HOSTILE_REPORT_PATH    HOSTILE_REPORT_REWRITER only: the file to rewrite.
 *   VSDK_HOSTILE_NEEDLE         HOSTILE_MEM_WRITER only: the bytes to find and
 *                               overwrite in the runner's memory.
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
 * The variants that attack the host (the key thief, the report rewriter, the
 * memory writer, fork-and-detach, the allocator, the name detector) read /proc
 * and use prctl: Linux only, as the runner's sandbox is.
 *
 * C99 plus POSIX (dlopen, pthreads) and, for those, Linux's /proc and prctl.
 */
#define _POSIX_C_SOURCE 200809L
#include <vips_sdk/provider.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
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

/* A status made here whose message is `prefix` then `text`. */
static vsdk_status_t* made(vsdk_status_code_t code, const char* prefix, const char* text) {
  vsdk_status_t* s = new_status();
  size_t n = strlen(prefix) + strlen(text) + 1;
  s->code = code;
  s->message = (char*)malloc(n);
  if (s->message == NULL) abort();
  snprintf(s->message, n, "%s%s", prefix, text);
  return s;
}

/* A status made here, printf-style message prefixed with "hostile: ". */
static vsdk_status_t* fail(vsdk_status_code_t code, const char* format, ...) {
  va_list args;
  char text[2048];
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return made(code, "hostile: ", text);
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
/* Shared by the variants that attack the host: small files, /proc           */
/* ------------------------------------------------------------------------- */
#if defined(HOSTILE_KEY_THIEF) || defined(HOSTILE_MEM_WRITER) || defined(HOSTILE_NAME_DETECTOR)
/* Reads up to cap - 1 bytes of `path` into buf, NUL-terminated (the bytes
 * may hold NULs: /proc's cmdline and environ do). The count, or -1 when the
 * file cannot be opened or read. Opened non-blocking: a FIFO does not hang. */
static MAYBE_UNUSED long read_small(const char* path, char* buf, size_t cap) {
  size_t got = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -1;
  while (got + 1 < cap) {
    ssize_t n = read(fd, buf + got, cap - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (close(fd) != 0) { /* nothing more to do: the read failed already */
      }
      return -1;
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  buf[got] = '\0';
  if (close(fd) != 0) return -1;
  return (long)got;
}

/* The first occurrence of `needle` (n bytes, n > 0) in hay[0..len), or NULL. */
static MAYBE_UNUSED const char* find_bytes(const char* hay, size_t len, const char* needle, size_t n) {
  size_t i;
  if (n == 0 || len < n) return NULL;
  for (i = 0; i + n <= len; i++) {
    if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0) return hay + i;
  }
  return NULL;
}

/* Calls f(pid) for every process in /proc until one answers nonzero; that
 * answer, or 0. */
static MAYBE_UNUSED int for_each_process(int (*f)(long pid)) {
  DIR* proc = opendir("/proc");
  struct dirent* e;
  int found = 0;
  if (proc == NULL) return 0;
  while (!found && (e = readdir(proc)) != NULL) {
    char* end;
    long pid = strtol(e->d_name, &end, 10);
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end != '\0' || pid <= 0) continue;
    found = f(pid);
  }
  if (closedir(proc) != 0) return found;
  return found;
}
#endif

#if defined(HOSTILE_REPORT_REWRITER) || defined(HOSTILE_FORK_DETACH)
/* In a detached process: names it (what /proc/<pid>/comm shows) and points
 * its stdin, stdout and stderr at /dev/null (or closes them), so that it holds
 * no pipe of the worker's open. */
static void become_daemon(const char* name) {
  int null_fd;
  if (prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL) != 0) {
    /* keeps the worker's name: still detached, still hostile */
  }
  null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    int ok = dup2(null_fd, 0) >= 0 && dup2(null_fd, 1) >= 0 && dup2(null_fd, 2) >= 0;
    if (null_fd > 2 && close(null_fd) != 0) ok = 0;
    if (ok) return;
  }
  /* No /dev/null (a bare sandbox): just let go of the worker's pipes. */
  if (close(0) != 0 || close(1) != 0 || close(2) != 0) {
    /* already closed: nothing held */
  }
}

/* Sleeps `ms` milliseconds (through signals). */
static void sleep_ms(long ms) {
  struct timespec left;
  left.tv_sec = ms / 1000;
  left.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

/* Forks a child that starts a new session and forks again: the grandchild,
 * reparented away from the worker and in no process group of the runner's,
 * runs body(arg) and exits. The child is reaped here. 0 when the grandchild
 * was started, else the errno of the failed step (the child's exit status). */
static int double_fork(void (*body)(const void* arg), const void* arg) {
  int status;
  pid_t child = fork();
  if (child < 0) return errno;
  if (child == 0) {
    pid_t grandchild;
    if (setsid() < 0) _exit(errno & 0xFF);
    grandchild = fork();
    if (grandchild < 0) _exit(errno & 0xFF);
    if (grandchild > 0) _exit(0);
    body(arg);
    _exit(0);
  }
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return errno;
  }
  if (!WIFEXITED(status)) return ECHILD;
  return WEXITSTATUS(status);
}
#endif

/* ------------------------------------------------------------------------- */
/* Right, then wrong: drivers that are correct only some of the time, keyed  */
/* on something a runner controls (the call count, the fill of the output,   */
/* its address) or on whether the process looks like the conformance runner. */
/* When wrong, the first output of the kernel is scaled by 1.01.             */
/* ------------------------------------------------------------------------- */
#if defined(HOSTILE_RIGHT_THEN_WRONG_COUNT) || defined(HOSTILE_RIGHT_THEN_WRONG_FILL) || \
    defined(HOSTILE_RIGHT_THEN_WRONG_ADDRESS) || defined(HOSTILE_NAME_DETECTOR)
#define HOSTILE_SOMETIMES_WRONG
#define WRONG_SCALE 1.01

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits;
  float f;
  if (exp == 0) {
    f = (float)mant * (1.0f / 16777216.0f); /* zero or subnormal: mant * 2^-24, exact */
    return sign ? -f : f;
  }
  if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Round to nearest, ties to even; overflow to infinity; NaN stays NaN. */
static uint16_t float_to_half(float f) {
  uint32_t x, sign, e, m, hm, rem, halfway, shift;
  int32_t he;
  memcpy(&x, &f, sizeof x);
  sign = (x >> 16) & 0x8000u;
  e = (x >> 23) & 0xFFu;
  m = x & 0x7FFFFFu;
  if (e == 0xFF) return (uint16_t)(sign | 0x7C00u | (m != 0 ? 0x200u : 0u));
  he = (int32_t)e - 112;
  if (he >= 31) return (uint16_t)(sign | 0x7C00u);
  if (he <= 0) { /* a subnormal half, or zero */
    if (he < -10) return (uint16_t)sign;
    m |= 0x800000u;
    shift = (uint32_t)(14 - he); /* 14..24 */
    hm = m >> shift;
    rem = m & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (hm & 1u))) hm++;
    return (uint16_t)(sign | hm);
  }
  hm = m >> 13;
  rem = m & 0x1FFFu;
  x = sign | ((uint32_t)he << 10) | hm;
  if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u))) x++; /* a carry moves into the exponent: right */
  return (uint16_t)x;
}

static float bfloat_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t float_to_bfloat(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu) != 0) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* The visible error: every element of `t` (compact, host memory) times
 * WRONG_SCALE in its own dtype (float 16/32/64, bfloat 16); any other dtype
 * gets bit 0 of each element's first byte flipped. */
static void make_wrong(const vsdk_tensor_t* t) {
  unsigned char* at = tensor_start(t);
  uint64_t size = t->dtype.bits / 8, n, i;
  if (size == 0) return;
  n = tensor_bytes(t) / size;
  for (i = 0; i < n; i++, at += size) {
    if (t->dtype.code == VSDK_DTYPE_FLOAT && size == 4) {
      float f;
      memcpy(&f, at, 4);
      f *= (float)WRONG_SCALE;
      memcpy(at, &f, 4);
    } else if (t->dtype.code == VSDK_DTYPE_FLOAT && size == 8) {
      double d;
      memcpy(&d, at, 8);
      d *= WRONG_SCALE;
      memcpy(at, &d, 8);
    } else if ((t->dtype.code == VSDK_DTYPE_FLOAT || t->dtype.code == VSDK_DTYPE_BFLOAT) && size == 2) {
      uint16_t h;
      int bf = t->dtype.code == VSDK_DTYPE_BFLOAT;
      memcpy(&h, at, 2);
      h = bf ? float_to_bfloat(bfloat_to_float(h) * (float)WRONG_SCALE)
             : float_to_half(half_to_float(h) * (float)WRONG_SCALE);
      memcpy(at, &h, 2);
    } else {
      at[0] ^= 1u;
    }
  }
}
#endif

#ifdef HOSTILE_RIGHT_THEN_WRONG_FILL
/* Every byte of t is `value` (an empty tensor: yes). */
static int filled_with(const vsdk_tensor_t* t, unsigned char value) {
  const unsigned char* at = tensor_start(t);
  uint64_t n = tensor_bytes(t), i;
  for (i = 0; i < n; i++) {
    if (at[i] != value) return 0;
  }
  return 1;
}
#endif

#ifdef HOSTILE_NAME_DETECTOR
/* "vips-conformance", or its 15-character truncation in comm. */
static int runner_name(const char* s) { return strstr(s, "vips-conformanc") != NULL; }

/* This process, its program or its parent is called like the conformance
 * runner. */
static int looks_like_the_runner(void) {
  char buf[PATH_MAX + 1];
  char path[64];
  ssize_t n;
  pid_t parent = getppid();
  if (read_small("/proc/self/comm", buf, sizeof buf) >= 0 && runner_name(buf)) return 1;
  n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    const char* base;
    buf[n] = '\0';
    base = strrchr(buf, '/');
    if (runner_name(base != NULL ? base + 1 : buf)) return 1;
  }
  if (parent > 0) {
    snprintf(path, sizeof path, "/proc/%ld/comm", (long)parent);
    if (read_small(path, buf, sizeof buf) >= 0 && runner_name(buf)) return 1;
  }
  return 0;
}
#endif

#ifdef HOSTILE_SOMETIMES_WRONG
static vsdk_status_t* sometimes_wrong_execute(vsdk_provider_t* p, const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* out = &c->outputs[0];
  vsdk_status_t* st;
  int wrong;
#if defined(HOSTILE_RIGHT_THEN_WRONG_COUNT)
  /* A driver with a warm-up path and a steady-state path, only the first of
   * which is right (or one that counts calls to game a "run it twice" check):
   * calls 1, 3, 5, ... are right, 2, 4, 6, ... wrong. */
  static uint64_t calls;
  wrong = next_count(&calls) % 2 == 0;
#elif defined(HOSTILE_RIGHT_THEN_WRONG_FILL)
  /* A driver that recognises the runner's first-run poison (all 0xFF) and is
   * right only then: wrong whenever the output arrives holding anything else. */
  wrong = !filled_with(out, 0xFF);
#elif defined(HOSTILE_RIGHT_THEN_WRONG_ADDRESS)
  /* A driver right for some buffer placements only (an alignment-dependent
   * fast path): wrong when bit 6 (64) of the output's address is set. */
  wrong = ((uintptr_t)tensor_start(out) & (uintptr_t)64u) != 0;
#else
  /* A driver that behaves only when it sees it is being certified: right when
   * this process, its program or its parent is called vips-conformance. */
  wrong = !looks_like_the_runner();
#endif
  st = wrap(REAL->execute(p, c));
  if (st == NULL && wrong) {
    st = wrap(REAL->synchronize(p, c->device_index)); /* the kernel's writes have landed */
    if (st == NULL) make_wrong(out);
  }
  return st;
}
#endif

/* ------------------------------------------------------------------------- */
/* HOSTILE_KEY_THIEF: a driver that looks for the runner's signing key       */
/* wherever a same-user process could read it, and hands it out through the  */
/* one channel a worker has, its results: an error status "STOLEN:<key>".    */
/* ------------------------------------------------------------------------- */
#ifdef HOSTILE_KEY_THIEF
#define KEY_PATH_ENV "VSDK_HOSTILE_KEY_PATH"
#define LOOT_MAX 8192
#define ARGS_MAX (256 * 1024)

static pthread_mutex_t LOOT_LOCK = PTHREAD_MUTEX_INITIALIZER;
static char LOOT[LOOT_MAX]; /* the key's text ("" while none), under LOOT_LOCK */

/* Keeps `n` bytes as LOOT, one line: CR and LF become '|', other control
 * bytes and non-ASCII '?'. */
static void keep_loot(const char* bytes, size_t n) {
  size_t i;
  pthread_mutex_lock(&LOOT_LOCK);
  for (i = 0; i < n && i + 1 < sizeof LOOT; i++) {
    unsigned char b = (unsigned char)bytes[i];
    LOOT[i] = (b == '\n' || b == '\r') ? '|' : (b < 0x20 || b >= 0x7F) ? '?' : (char)b;
  }
  LOOT[i] = '\0';
  pthread_mutex_unlock(&LOOT_LOCK);
}

/* A regular file's first bytes, read from offset 0 with pread (an inherited
 * descriptor's offset is left alone; pipes and sockets refuse pread, so no
 * protocol byte is taken from them). Kept as LOOT when they hold a private
 * key: 1. */
static int loot_fd(int fd) {
  struct stat st;
  char buf[LOOT_MAX];
  size_t got = 0;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  while (got + 1 < sizeof buf) {
    ssize_t n = pread(fd, buf + got, sizeof buf - 1 - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (find_bytes(buf, got, "PRIVATE KEY", 11) == NULL) return 0;
  keep_loot(buf, got);
  return 1;
}

static int loot_path(const char* path) {
  int found, fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return 0;
  found = loot_fd(fd);
  if (close(fd) != 0) return found;
  return found;
}

/* A path as process `pid` named it: absolute, or relative to its working
 * directory (seen through /proc/<pid>/cwd), or to ours. */
static int loot_named(long pid, const char* path) {
  char full[PATH_MAX + 64];
  int n;
  if (path[0] == '\0') return 0;
  if (path[0] == '/') return loot_path(path);
  n = snprintf(full, sizeof full, "/proc/%ld/cwd/%s", pid, path);
  if (n > 0 && (size_t)n < sizeof full && loot_path(full)) return 1;
  return loot_path(path);
}

/* --sign-key PATH, --sign-key=PATH, --sign-key-fd N, --sign-key-fd=N in a
 * process's arguments: the file, or the descriptor reopened through /proc. */
static int loot_cmdline(long pid) {
  char path[64];
  char* args = (char*)malloc(ARGS_MAX);
  long n;
  size_t i, next;
  int found = 0;
  if (args == NULL) return 0;
  snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
  n = read_small(path, args, ARGS_MAX);
  for (i = 0; n > 0 && i < (size_t)n && !found; i = next) {
    const char* arg = args + i;
    const char* value = NULL;
    int fd_form = 0;
    next = i + strlen(arg) + 1;
    if (strcmp(arg, "--sign-key") == 0 || strcmp(arg, "--sign-key-fd") == 0) {
      fd_form = arg[10] != '\0';
      if (next < (size_t)n) value = args + next;
    } else if (strncmp(arg, "--sign-key=", 11) == 0) {
      value = arg + 11;
    } else if (strncmp(arg, "--sign-key-fd=", 14) == 0) {
      value = arg + 14;
      fd_form = 1;
    }
    if (value == NULL) continue;
    if (fd_form) {
      char fd_path[96];
      snprintf(fd_path, sizeof fd_path, "/proc/%ld/fd/%.20s", pid, value);
      found = loot_path(fd_path);
    } else {
      found = loot_named(pid, value);
    }
  }
  free(args);
  return found;
}

/* VIPS_SIGN_KEY=PATH in a process's environment. */
static int loot_environ(long pid) {
  char path[64];
  char* env = (char*)malloc(ARGS_MAX);
  long n;
  size_t i;
  int found = 0;
  if (env == NULL) return 0;
  snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  n = read_small(path, env, ARGS_MAX);
  for (i = 0; n > 0 && i < (size_t)n && !found; i += strlen(env + i) + 1) {
    if (strncmp(env + i, "VIPS_SIGN_KEY=", 14) == 0) found = loot_named(pid, env + i + 14);
  }
  free(env);
  return found;
}

/* Every descriptor this process inherited or holds. */
static int loot_own_fds(void) {
  DIR* fds = opendir("/proc/self/fd");
  struct dirent* e;
  int found = 0, own;
  if (fds == NULL) return 0;
  own = dirfd(fds);
  while (!found && (e = readdir(fds)) != NULL) {
    char* end;
    long fd = strtol(e->d_name, &end, 10);
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end != '\0' || fd == own || fd > INT_MAX) continue;
    found = loot_fd((int)fd);
  }
  if (closedir(fds) != 0) return found;
  return found;
}

/* Every place tried, in this order; 1 when LOOT holds a key. */
static int steal_key(void) {
  const char* exact = getenv(KEY_PATH_ENV);
  pid_t parent = getppid();
  if (exact != NULL && exact[0] != '\0' && loot_path(exact)) return 1;
  if (loot_own_fds()) return 1;
  if (parent > 0 && loot_cmdline((long)parent)) return 1;
  if (for_each_process(loot_cmdline)) return 1;
  return for_each_process(loot_environ);
}

/* The loot as an error status, or NULL while there is none. */
static vsdk_status_t* loot_status(void) {
  vsdk_status_t* st = NULL;
  pthread_mutex_lock(&LOOT_LOCK);
  if (LOOT[0] != '\0') st = made(VSDK_STATUS_INTERNAL, "STOLEN:", LOOT);
  pthread_mutex_unlock(&LOOT_LOCK);
  return st;
}
#endif

/* ------------------------------------------------------------------------- */
/* HOSTILE_REPORT_REWRITER: a driver that leaves a daemon behind which waits */
/* for the certification report and rewrites it once the runner is done.     */
/* ------------------------------------------------------------------------- */
#ifdef HOSTILE_REPORT_REWRITER
#define REPORT_PATH_ENV "VSDK_HOSTILE_REPORT_PATH"
#define REWRITTEN "REWRITTEN BY DRIVER: verdict CERTIFIED\n"

struct rewrite_job {
  char path[PATH_MAX];
  pid_t runner; /* <= 0: not visible from here */
};

static int same_file_state(const struct stat* a, const struct stat* b) {
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Overwrites the file; 1 when all of REWRITTEN went in. */
static int rewrite(const char* path) {
  const char* text = REWRITTEN;
  size_t left = strlen(text);
  int ok = 1, fd = open(path, O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return 0;
  while (left > 0) {
    ssize_t n = write(fd, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = 0;
      break;
    }
    text += n;
    left -= (size_t)n;
  }
  if (close(fd) != 0) ok = 0;
  return ok;
}

/* Every 50 ms for 60 s: once the file exists and the runner is gone, or it
 * has not changed for 500 ms, it is rewritten (again whenever it changes). */
static void rewriter(const void* arg) {
  const struct rewrite_job* job = (const struct rewrite_job*)arg;
  struct stat last, ours;
  int have_last = 0, have_ours = 0, stable = 0, tick;
  become_daemon("vsdk-rewriter");
  for (tick = 0; tick < 60 * 20; tick++) {
    struct stat now;
    int runner_gone;
    sleep_ms(50);
    if (stat(job->path, &now) != 0) {
      have_last = 0;
      stable = 0;
      continue;
    }
    stable = (have_last && same_file_state(&now, &last)) ? stable + 1 : 0;
    last = now;
    have_last = 1;
    if (have_ours && same_file_state(&now, &ours)) continue; /* still our text */
    runner_gone = job->runner > 0 && kill(job->runner, 0) != 0 && errno == ESRCH;
    if ((runner_gone || stable >= 10) && rewrite(job->path) && stat(job->path, &ours) == 0) {
      have_ours = 1;
    }
  }
}

static void start_rewriter(void) {
  static struct rewrite_job job; /* the child's copy is its own */
  const char* path = getenv(REPORT_PATH_ENV);
  int err;
  if (path == NULL || path[0] == '\0' || strlen(path) >= sizeof job.path) {
    fprintf(stderr, "hostile report_rewriter: %s is not set (or too long)\n", REPORT_PATH_ENV);
    return;
  }
  memcpy(job.path, path, strlen(path) + 1);
  job.runner = getppid();
  err = double_fork(rewriter, &job);
  if (err != 0) fprintf(stderr, "hostile report_rewriter: could not detach: %s\n", strerror(err));
}
#endif

/* ------------------------------------------------------------------------- */
/* HOSTILE_MEM_WRITER: a driver that edits the runner's memory through       */
/* /proc/<pid>/mem (the file name of its results, here: every occurrence of  */
/* VSDK_HOSTILE_NEEDLE gets an 'X' for its first byte).                      */
/* ------------------------------------------------------------------------- */
#ifdef HOSTILE_MEM_WRITER
#define NEEDLE_ENV "VSDK_HOSTILE_NEEDLE"
#define SCAN_CHUNK ((size_t)1 << 20)
#define MAX_TARGETS 64

static long TARGETS[MAX_TARGETS];
static int TARGET_COUNT;

static void add_target(long pid) {
  int i;
  if (pid <= 1 || pid == (long)getpid()) return;
  for (i = 0; i < TARGET_COUNT; i++) {
    if (TARGETS[i] == pid) return;
  }
  if (TARGET_COUNT < MAX_TARGETS) TARGETS[TARGET_COUNT++] = pid;
}

/* Processes whose comm is the CLI's (truncated to 15 characters). */
static int add_if_runner(long pid) {
  char path[64], comm[64];
  long n;
  snprintf(path, sizeof path, "/proc/%ld/comm", pid);
  n = read_small(path, comm, sizeof comm);
  if (n > 0 && comm[n - 1] == '\n') comm[n - 1] = '\0';
  if (n > 0 && strcmp(comm, "vips-conformanc") == 0) add_target(pid);
  return 0;
}

/* Scans pid's writable mappings for the needle, writing 'X' over the first
 * byte of each occurrence; says on stderr what it managed. */
static void overwrite_in(long pid, const char* needle) {
  char path[64], line[512];
  size_t n = strlen(needle);
  unsigned long long mappings = 0, scanned = 0, written = 0, failed = 0;
  char* buf;
  FILE* maps;
  int mem;
  snprintf(path, sizeof path, "/proc/%ld/mem", pid);
  mem = open(path, O_RDWR | O_CLOEXEC);
  if (mem < 0) {
    fprintf(stderr, "hostile mem_writer: cannot open %s: %s\n", path, strerror(errno));
    return;
  }
  snprintf(path, sizeof path, "/proc/%ld/maps", pid);
  maps = fopen(path, "r");
  buf = (char*)malloc(SCAN_CHUNK + n);
  if (maps == NULL || buf == NULL) {
    fprintf(stderr, "hostile mem_writer: cannot read %s: %s\n", path, strerror(errno));
    if (maps != NULL && fclose(maps) != 0) fprintf(stderr, "hostile mem_writer: closing %s failed\n", path);
    free(buf);
    if (close(mem) != 0) fprintf(stderr, "hostile mem_writer: closing the memory file failed\n");
    return;
  }
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long long start, end, at;
    char perms[8];
    if (sscanf(line, "%llx-%llx %7s", &start, &end, perms) != 3 || perms[1] != 'w') continue;
    if (end > (unsigned long long)INT64_MAX || start >= end) continue;
    mappings++;
    for (at = start; at < end; at += SCAN_CHUNK) {
      size_t len = (size_t)(end - at < SCAN_CHUNK + n - 1 ? end - at : SCAN_CHUNK + n - 1);
      ssize_t got = pread(mem, buf, len, (off_t)at);
      size_t i, limit;
      if (got <= 0) break; /* an unreadable region (a guard page): the next mapping */
      scanned += (unsigned long long)got;
      limit = (size_t)got < SCAN_CHUNK ? (size_t)got : SCAN_CHUNK;
      for (i = 0; i < limit; i++) {
        if (i + n <= (size_t)got && buf[i] == needle[0] && memcmp(buf + i, needle, n) == 0) {
          if (pwrite(mem, "X", 1, (off_t)(at + i)) == 1) {
            written++;
          } else {
            failed++;
          }
        }
      }
    }
  }
  fprintf(stderr,
          "hostile mem_writer: pid %ld: %llu occurrence(s) overwritten, %llu write(s) refused, in %llu writable "
          "mapping(s), %llu MiB read\n",
          pid, written, failed, mappings, scanned >> 20);
  free(buf);
  if (fclose(maps) != 0) fprintf(stderr, "hostile mem_writer: closing %s failed\n", path);
  if (close(mem) != 0) fprintf(stderr, "hostile mem_writer: closing the memory file failed\n");
}

static void write_runner_memory(void) {
  const char* needle = getenv(NEEDLE_ENV);
  int i;
  if (needle == NULL || needle[0] == '\0') {
    fprintf(stderr, "hostile mem_writer: %s is not set\n", NEEDLE_ENV);
    return;
  }
  TARGET_COUNT = 0;
  add_target((long)getppid());
  if (for_each_process(add_if_runner) != 0) return;
  if (TARGET_COUNT == 0) fprintf(stderr, "hostile mem_writer: no runner process is visible\n");
  for (i = 0; i < TARGET_COUNT; i++) overwrite_in(TARGETS[i], needle);
}
#endif

/* ------------------------------------------------------------------------- */
/* HOSTILE_FORK_DETACH: a driver that starts helper processes and detaches   */
/* them (a daemonising runtime, a leak): 150 of them, asleep for 10 minutes. */
/* ------------------------------------------------------------------------- */
#ifdef HOSTILE_FORK_DETACH
#define ORPHANS 150

static void orphan(const void* arg) {
  struct timespec start, now;
  (void)arg;
  become_daemon("vsdk-orphan");
  if (clock_gettime(CLOCK_MONOTONIC, &start) != 0) _exit(1);
  do {
    sleep_ms(1000);
    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) _exit(1);
  } while (now.tv_sec - start.tv_sec < 600);
}

static void detach_orphans(void) {
  static uint64_t calls;
  int i, made_ok = 0, err = 0;
  if (next_count(&calls) != 1) return;
  for (i = 0; i < ORPHANS; i++) {
    err = double_fork(orphan, NULL);
    if (err != 0) break;
    made_ok++;
  }
  fprintf(stderr, "hostile fork_detach: %d of %d detached processes started%s%s\n", made_ok, ORPHANS,
          err != 0 ? ", then: " : "", err != 0 ? strerror(err) : "");
}
#endif

/* ------------------------------------------------------------------------- */
/* HOSTILE_ALLOCATOR: a driver that takes 20 GiB of host memory and keeps it */
/* (a leak, a runaway cache): 256 MiB at a time, every page touched.         */
/* ------------------------------------------------------------------------- */
#ifdef HOSTILE_ALLOCATOR
#define CHUNK_MIB 256u
#define TOTAL_MIB (20u * 1024u)

static void* HOARD; /* a list through the chunks' first bytes: never freed */

static vsdk_status_t* hoard(void) {
  unsigned mib;
  for (mib = 0; mib < TOTAL_MIB; mib += CHUNK_MIB) {
    void* chunk = malloc((size_t)CHUNK_MIB << 20);
    if (chunk == NULL)
      return fail(VSDK_STATUS_OUT_OF_MEMORY, "malloc of %u MiB failed after %u MiB", CHUNK_MIB, mib);
    memset(chunk, 0xA5, (size_t)CHUNK_MIB << 20);
    pthread_mutex_lock(&COUNTER_LOCK);
    memcpy(chunk, &HOARD, sizeof HOARD);
    HOARD = chunk;
    pthread_mutex_unlock(&COUNTER_LOCK);
  }
  return NULL;
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
#ifdef HOSTILE_KEY_THIEF
  /* Looks as soon as it is loaded; what it finds waits for the first execute. */
  (void)steal_key(); /* found or not, the first execute tells */
#endif
#ifdef HOSTILE_REPORT_REWRITER
  start_rewriter();
#endif
#ifdef HOSTILE_MEM_WRITER
  write_runner_memory();
#endif
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
#ifdef HOSTILE_SLOW_START
  /* Not hostile: a driver that compiles the target kernel on its first call
   * in a process (a GPU's JIT), taking 5 s (SLOW_START_SECONDS in lib.rs),
   * then works. */
  if (is_target(c)) {
    static int compiled;
    if (!__atomic_exchange_n(&compiled, 1, __ATOMIC_SEQ_CST)) {
      struct timespec left = {5, 0};
      while (nanosleep(&left, &left) != 0 && errno == EINTR) {
      }
    }
  }
#endif
#ifdef HOSTILE_HANG
  /* A driver that deadlocks or waits forever on a device that never answers. */
  if (is_target(c)) {
    for (;;) pause();
  }
#endif
#ifdef HOSTILE_SOMETIMES_WRONG
  if (is_target(c) && c->num_outputs > 0) return sometimes_wrong_execute(p, c);
#endif
#ifdef HOSTILE_KEY_THIEF
  /* Looks again (a key may appear later: a descriptor, a file), then hands
   * out whatever it has found so far. */
  if (is_target(c)) {
    vsdk_status_t* loot;
    (void)steal_key(); /* what it found is in LOOT, from now or from before */
    loot = loot_status();
    if (loot != NULL) return loot;
  }
#endif
#ifdef HOSTILE_FORK_DETACH
  if (is_target(c)) detach_orphans();
#endif
#ifdef HOSTILE_ALLOCATOR
  if (is_target(c)) {
    st = hoard();
    if (st != NULL) return st;
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
