/*
 * A freestanding replay of a VIPS pack (docs/embedded.md): no libc, its own
 * _start, Linux system calls for the files and the verdict lines. Built
 * with -ffreestanding -nostdlib -static against libvips_verify.a; what
 * firmware would do with flash and a UART, this does with two files.
 *
 *   replay PACK.vrp OUTPUTS.bin
 *
 * OUTPUTS.bin: the device's outputs, raw, in the pack's order (stage by
 * stage, output by output). Prints one line per output:
 *   VERDICT <stage> <output> <passed> <over_bound> <elements> <max_e> <rms_e> <rms_t>
 *           <bias_z> <bias_ratio> <max_abs_error> <rel_l2_error> <tolerance_factor>
 *           <worst_index> <sha256>
 * with every double as the hex of its bits. Exit: 0 every output passed and
 * the pack checked out, 1 an output failed, 2 an error (the line `ERROR ...`).
 */
#include <stddef.h>
#include <stdint.h>
#include <vips_sdk/verify.h>

/* ---- the little a freestanding program needs ---------------------------- */

static long sys3(long n, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}
#define SYS_READ 0
#define SYS_WRITE 1
#define SYS_OPEN 2
#define SYS_EXIT 60

/* The compiler's own copies call these: the only "libc" the verifier needs. */
void *memcpy(void *d, const void *s, size_t n) {
    unsigned char *dd = d;
    const unsigned char *ss = s;
    while (n--) *dd++ = *ss++;
    return d;
}
void *memmove(void *d, const void *s, size_t n) {
    unsigned char *dd = d;
    const unsigned char *ss = s;
    if (dd < ss) {
        while (n--) *dd++ = *ss++;
    } else {
        while (n--) dd[n] = ss[n];
    }
    return d;
}
void *memset(void *d, int c, size_t n) {
    unsigned char *dd = d;
    while (n--) *dd++ = (unsigned char)c;
    return d;
}
int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    for (; n; n--, x++, y++)
        if (*x != *y) return *x - *y;
    return 0;
}
int bcmp(const void *a, const void *b, size_t n) { return memcmp(a, b, n); }

static __attribute__((noreturn)) void leave(int code) {
    sys3(SYS_EXIT, code, 0, 0);
    for (;;) {
    }
}

static char line[1024];
static size_t line_len;
static void put(const char *s, size_t n) {
    while (n--) {
        if (line_len < sizeof line) line[line_len++] = *s;
        s++;
    }
}
static void puts0(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    put(s, n);
}
static void put_u64(uint64_t v) {
    char b[20];
    int i = 20;
    do {
        b[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(b + i, (size_t)(20 - i));
}
static void put_hex(const uint8_t *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        put(&digits[p[i] >> 4], 1);
        put(&digits[p[i] & 15], 1);
    }
}
static void put_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    uint8_t be[8];
    for (int i = 0; i < 8; i++) be[i] = (uint8_t)(u >> (56 - 8 * i));
    put(" ", 1);
    put_hex(be, 8);
}
static void flush(void) {
    put("\n", 1);
    sys3(SYS_WRITE, 1, (long)line, (long)line_len);
    line_len = 0;
}
static __attribute__((noreturn)) void fail(const char *what, uint32_t status) {
    puts0("ERROR ");
    puts0(what);
    puts0(" status ");
    put_u64(status);
    flush();
    leave(2);
}

static void on_panic(const char *message, size_t len) {
    puts0("ERROR panic: ");
    put(message, len);
    flush();
    leave(3);
}

/* ---- the replay ---------------------------------------------------------- */

/* The verifier's whole RAM: its state and one frame (24 KiB of data). */
static uint64_t arena[(32 * 1024) / 8];
static uint8_t pack_chunk[4096];
static uint8_t out_chunk[4096];
static char stage[64], output[64];
static size_t stage_len, output_len;

static void copy_name(char *dst, size_t *len, const vsdk_verify_event *e) {
    *len = e->name_len < 64 ? e->name_len : 64;
    memcpy(dst, e->name, *len);
}

static int replay(long pack_fd, long out_fd) {
    vsdk_verify_set_panic_hook(on_panic);
    vsdk_verify *v = vsdk_verify_init(arena, sizeof arena);
    if (!v) fail("init", 0);
    int failed = 0;
    for (;;) {
        long got = sys3(SYS_READ, pack_fd, (long)pack_chunk, sizeof pack_chunk);
        if (got < 0) fail("reading the pack", 0);
        if (got == 0) break;
        size_t at = 0;
        while (at < (size_t)got) {
            size_t used = 0;
            vsdk_verify_event e;
            vsdk_verify_status s = vsdk_verify_feed(v, pack_chunk + at, (size_t)got - at, &used, &e);
            if (s != VSDK_VERIFY_OK) fail("feed", s);
            at += used;
            if (e.kind == VSDK_VERIFY_EVENT_STAGE) copy_name(stage, &stage_len, &e);
            if (e.kind == VSDK_VERIFY_EVENT_OUTPUT) copy_name(output, &output_len, &e);
            /* INPUT events: a device would copy e.bytes to input e.name at e.offset. */
            if (e.kind != VSDK_VERIFY_EVENT_EXPECTED) continue;
            size_t due = e.output_bytes;
            while (due) {
                size_t n = due < sizeof out_chunk ? due : sizeof out_chunk;
                size_t have = 0;
                while (have < n) {
                    long r = sys3(SYS_READ, out_fd, (long)(out_chunk + have), (long)(n - have));
                    if (r <= 0) fail("the outputs file ended early", 0);
                    have += (size_t)r;
                }
                s = vsdk_verify_output(v, out_chunk, n);
                due -= n;
                if (s == VSDK_VERIFY_VERDICT) {
                    vsdk_verdict d;
                    if (vsdk_verify_finish(v, &d) != VSDK_VERIFY_OK) fail("finish", 0);
                    puts0("VERDICT ");
                    put(stage, stage_len);
                    put(" ", 1);
                    put(output, output_len);
                    put(" ", 1);
                    put_u64(d.passed);
                    put(" ", 1);
                    put_u64(d.over_bound);
                    put(" ", 1);
                    put_u64(d.elements);
                    put_bits(d.max_e);
                    put_bits(d.rms_e);
                    put_bits(d.rms_t);
                    put_bits(d.bias_z);
                    put_bits(d.bias_ratio);
                    put_bits(d.max_abs_error);
                    put_bits(d.rel_l2_error);
                    put_bits(d.tolerance_factor);
                    put(" ", 1);
                    put_u64(d.worst_index);
                    put(" ", 1);
                    put_hex(d.sha256, 32);
                    flush();
                    failed |= !d.passed;
                } else if (s != VSDK_VERIFY_OK) {
                    fail("output", s);
                }
            }
        }
    }
    if (!vsdk_verify_done(v)) fail("the pack ended before its End frame", 0);
    if (sys3(SYS_READ, out_fd, (long)out_chunk, 1) != 0) fail("the outputs file is longer than the pack's outputs", 0);
    puts0("END");
    flush();
    return failed ? 1 : 0;
}

__attribute__((used)) void start_c(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    if (argc != 3) {
        puts0("usage: replay PACK.vrp OUTPUTS.bin");
        flush();
        leave(2);
    }
    long pack = sys3(SYS_OPEN, (long)argv[1], 0, 0);
    long outs = sys3(SYS_OPEN, (long)argv[2], 0, 0);
    if (pack < 0 || outs < 0) fail("open", 0);
    leave(replay(pack, outs));
}

/* The entry point: the kernel's stack holds argc, then argv. */
__asm__(".globl _start\n"
        "_start:\n"
        "  xor %rbp, %rbp\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call start_c\n"
        "  hlt\n");
