/* Several threads checking tensors at once on one suite handle (reading a
 * const handle from many threads is allowed by the header): each computes
 * demo-mlp's `layer_norm` stage itself and checks it; every other thread
 * perturbs its result, which must FAIL while the others PASS. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "vips_sdk/vips_sdk.h"

#define THREADS 6
#define ROUNDS 5
#define ROWS 4
#define COLS 32

static const vsdk_suite_t* suite;

struct job {
  int index;
  int failures;
};

static void* work(void* arg) {
  struct job* job = (struct job*)arg;
  float h[ROWS * COLS], gamma[COLS], beta[COLS], n[ROWS * COLS];
  vsdk_error_t* e = vsdk_suite_read_f32(suite, "h", h, ROWS * COLS);
  if (!e) e = vsdk_suite_read_f32(suite, "gamma", gamma, COLS);
  if (!e) e = vsdk_suite_read_f32(suite, "beta", beta, COLS);
  if (e) {
    fprintf(stderr, "thread %d: %s\n", job->index, vsdk_error_message(e));
    vsdk_error_free(e);
    job->failures++;
    return NULL;
  }
  for (int r = 0; r < ROWS; r++) {
    double mean = 0, var = 0;
    for (int c = 0; c < COLS; c++) mean += h[r * COLS + c];
    mean /= COLS;
    for (int c = 0; c < COLS; c++) var += (h[r * COLS + c] - mean) * (h[r * COLS + c] - mean);
    var /= COLS;
    for (int c = 0; c < COLS; c++)
      n[r * COLS + c] = (float)((h[r * COLS + c] - mean) / sqrt(var + 1e-6) * gamma[c] + beta[c]);
  }
  int perturbed = job->index % 2;
  if (perturbed) n[7] += 0.01f;
  int64_t shape[2] = {ROWS, COLS};
  vsdk_tensor_t t;
  memset(&t, 0, sizeof t);
  t.data = n;
  t.device.device_type = VSDK_DEVICE_CPU;
  t.ndim = 2;
  t.dtype.code = VSDK_DTYPE_FLOAT;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  const char* names[1] = {"n"};
  vsdk_check_args_t args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.stage = "layer_norm";
  args.output_count = 1;
  args.names = names;
  args.outputs = &t;
  for (int round = 0; round < ROUNDS; round++) {
    vsdk_results_t* results = NULL;
    e = vsdk_check(suite, &args, &results);
    if (e) {
      fprintf(stderr, "thread %d: %s\n", job->index, vsdk_error_message(e));
      vsdk_error_free(e);
      job->failures++;
      return NULL;
    }
    vsdk_stage_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.struct_size = sizeof rec;
    e = vsdk_results_record(results, 0, &rec);
    int want = perturbed ? VSDK_STAGE_FAIL : VSDK_STAGE_PASS;
    if (e || rec.status != want) {
      fprintf(stderr, "thread %d: expected status %d, got %d (%s)\n", job->index, want, rec.status,
              e ? vsdk_error_message(e) : rec.status_label);
      job->failures++;
    }
    vsdk_error_free(e);
    vsdk_results_free(results);
  }
  return NULL;
}

int main(void) {
  vsdk_suite_t* s = NULL;
  vsdk_error_t* e = vsdk_suite_open("demo-mlp", &s);
  if (e) {
    fprintf(stderr, "%s\n", vsdk_error_message(e));
    return 1;
  }
  suite = s;
  pthread_t threads[THREADS];
  struct job jobs[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i].index = i;
    jobs[i].failures = 0;
    pthread_create(&threads[i], NULL, work, &jobs[i]);
  }
  int failures = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    failures += jobs[i].failures;
  }
  vsdk_suite_free(s);
  if (failures) {
    fprintf(stderr, "threads: %d failure(s)\n", failures);
    return 1;
  }
  printf("threads: %d threads x %d checks, all as expected\n", THREADS, ROUNDS);
  return 0;
}
