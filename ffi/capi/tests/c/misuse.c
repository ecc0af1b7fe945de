/* Misuse of the engine API: NULL arguments, wrong struct_size, handles of
 * the wrong kind, unknown names, bad tensors. Each must give an error with
 * the right code and a message, never a crash. Run with VSDK_SUITES_PATH
 * and VSDK_PROVIDER_PATH set (tests/c_api.rs does). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "vips_sdk/vips_sdk.h"

static int failures = 0;

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "misuse.c:%d: FAILED: %s\n", __LINE__, #cond); \
      failures++;                                                    \
    }                                                                \
  } while (0)

/* An error with `code` whose message contains `part`. */
static void expect(vsdk_error_t* e, vsdk_status_code_t code, const char* part, int line) {
  if (e == NULL) {
    fprintf(stderr, "misuse.c:%d: FAILED: expected an error with code %d, got success\n", line, code);
    failures++;
    return;
  }
  const char* m = vsdk_error_message(e);
  if (vsdk_error_code(e) != code || strstr(m, part) == NULL) {
    fprintf(stderr, "misuse.c:%d: FAILED: expected code %d containing \"%s\", got %d: %s\n", line,
            code, part, vsdk_error_code(e), m);
    failures++;
  } else {
    printf("ok %d: %s\n", line, m);
  }
  vsdk_error_free(e);
}
#define EXPECT(call, code, part) expect((call), (code), (part), __LINE__)

/* A call that must succeed. */
static void ok(vsdk_error_t* e, int line) {
  if (e != NULL) {
    fprintf(stderr, "misuse.c:%d: FAILED: %s\n", line, vsdk_error_message(e));
    failures++;
    vsdk_error_free(e);
  }
}
#define OK(call) ok((call), __LINE__)

int main(void) {
  CHECK(vsdk_sdk_version_number() == VSDK_SDK_VERSION_NUMBER);
  CHECK(strcmp(vsdk_sdk_version(), VSDK_SDK_VERSION_STRING) == 0);
  CHECK(vsdk_error_code(NULL) == VSDK_STATUS_OK);
  CHECK(strcmp(vsdk_error_message(NULL), "") == 0);
  vsdk_error_free(NULL);
  vsdk_provider_free(NULL);
  vsdk_suite_free(NULL);
  vsdk_results_free(NULL);
  vsdk_report_free(NULL);

  vsdk_host_provider_t* provider = NULL;
  EXPECT(vsdk_provider_open(NULL, &provider), VSDK_STATUS_INVALID_ARGUMENT, "`path_or_name` is NULL");
  EXPECT(vsdk_provider_open("cpu", NULL), VSDK_STATUS_INVALID_ARGUMENT, "`out` is NULL");
  EXPECT(vsdk_provider_open("no-such-provider", &provider), VSDK_STATUS_NOT_FOUND, "no provider named `no-such-provider`");
  EXPECT(vsdk_provider_open("/etc/hostname", &provider), VSDK_STATUS_INVALID_FILE, "/etc/hostname");
  /* Names and paths (docs/c-api.md): a `/` or a `.so` ending makes a path,
   * anything else is a name, whatever the working directory holds (the test
   * runs where a file `cpu` and a directory `demo-mlp` lie). */
  EXPECT(vsdk_provider_open("./no-such.so", &provider), VSDK_STATUS_NOT_FOUND,
         "read as a path (it contains `/`), and no file is there");
  EXPECT(vsdk_provider_open("no-such.so", &provider), VSDK_STATUS_NOT_FOUND,
         "read as a path (it ends in `.so`)");
  EXPECT(vsdk_provider_open("no-such-provider", &provider), VSDK_STATUS_NOT_FOUND, "read as a name");
  CHECK(provider == NULL); /* out-parameters are written only on success */
  vsdk_error_t* e = vsdk_provider_open("cpu", &provider);
  CHECK(e == NULL && provider != NULL);
  vsdk_error_free(e);

  vsdk_host_provider_info_t pinfo;
  memset(&pinfo, 0, sizeof pinfo);
  EXPECT(vsdk_provider_info(provider, &pinfo), VSDK_STATUS_INVALID_ARGUMENT, "struct_size` is 0");
  pinfo.struct_size = sizeof pinfo - 1;
  EXPECT(vsdk_provider_info(provider, &pinfo), VSDK_STATUS_INVALID_ARGUMENT, "smaller than this library's");
  pinfo.struct_size = sizeof pinfo;
  CHECK(vsdk_provider_info(provider, &pinfo) == NULL);
  CHECK(strcmp(pinfo.name, "cpu") == 0 && pinfo.device_count >= 1);
  EXPECT(vsdk_provider_info(provider, NULL), VSDK_STATUS_INVALID_ARGUMENT, "`out` is NULL");
  EXPECT(vsdk_provider_info(NULL, &pinfo), VSDK_STATUS_INVALID_ARGUMENT, "`provider` is NULL");
  vsdk_device_info_t dinfo;
  memset(&dinfo, 0, sizeof dinfo);
  dinfo.struct_size = sizeof dinfo;
  EXPECT(vsdk_provider_device_info(provider, 4000, &dinfo), VSDK_STATUS_NOT_FOUND, "device 4000");

  vsdk_suite_t* suite = NULL;
  EXPECT(vsdk_suite_open("no-such-suite", &suite), VSDK_STATUS_NOT_FOUND, "no suite `no-such-suite`");
  EXPECT(vsdk_suite_open("no-such-suite", &suite), VSDK_STATUS_NOT_FOUND,
         "read as a name (it has no `/` and does not end in `.yaml`)");
  EXPECT(vsdk_suite_open("./demo-mlp", &suite), VSDK_STATUS_INVALID_FILE,
         "`./demo-mlp` (read as a path: it contains `/`): ");
  EXPECT(vsdk_suite_open("./no-such-suite", &suite), VSDK_STATUS_NOT_FOUND,
         "read as a path (it contains `/`), and nothing is there");
  EXPECT(vsdk_suite_open("no-such-suite.yaml", &suite), VSDK_STATUS_NOT_FOUND,
         "read as a path (it ends in `.yaml`)");
  CHECK(vsdk_suite_open("demo-mlp", &suite) == NULL && suite != NULL);

  /* A handle of the wrong kind. */
  vsdk_suite_info_t sinfo;
  memset(&sinfo, 0, sizeof sinfo);
  sinfo.struct_size = sizeof sinfo;
  EXPECT(vsdk_suite_info((const vsdk_suite_t*)provider, &sinfo), VSDK_STATUS_INVALID_ARGUMENT,
         "not a live suite handle");
  EXPECT(vsdk_provider_info((const vsdk_host_provider_t*)suite, &pinfo), VSDK_STATUS_INVALID_ARGUMENT,
         "not a live provider handle");
  vsdk_results_info_t rinfo;
  memset(&rinfo, 0, sizeof rinfo);
  rinfo.struct_size = sizeof rinfo;
  EXPECT(vsdk_results_info((const vsdk_results_t*)suite, &rinfo), VSDK_STATUS_INVALID_ARGUMENT,
         "not a live results handle");
  CHECK(vsdk_error_code((const vsdk_error_t*)suite) == VSDK_STATUS_INVALID_ARGUMENT);
  vsdk_provider_free((vsdk_host_provider_t*)suite); /* ignored: not a provider */
  CHECK(vsdk_suite_info(suite, &sinfo) == NULL);  /* still alive */
  CHECK(strcmp(sinfo.component, "demo-mlp") == 0 && sinfo.stage_count == 3);

  vsdk_stage_info_t stage;
  memset(&stage, 0, sizeof stage);
  stage.struct_size = sizeof stage;
  EXPECT(vsdk_suite_stage(suite, 99, &stage), VSDK_STATUS_NOT_FOUND, "stage 99");
  vsdk_tensor_info_t tinfo;
  memset(&tinfo, 0, sizeof tinfo);
  tinfo.struct_size = sizeof tinfo;
  EXPECT(vsdk_suite_tensor(suite, "nope", &tinfo), VSDK_STATUS_NOT_FOUND, "no tensor `nope`");
  CHECK(sinfo.tensor_count >= 10);
  EXPECT(vsdk_suite_tensor_at(suite, sinfo.tensor_count, &tinfo), VSDK_STATUS_NOT_FOUND, "the suite declares");
  for (size_t i = 0; i < sinfo.tensor_count; i++) {
    vsdk_tensor_info_t by_index, by_name;
    memset(&by_index, 0, sizeof by_index);
    by_index.struct_size = sizeof by_index;
    memset(&by_name, 0, sizeof by_name);
    by_name.struct_size = sizeof by_name;
    CHECK(vsdk_suite_tensor_at(suite, i, &by_index) == NULL);
    CHECK(vsdk_suite_tensor(suite, by_index.name, &by_name) == NULL);
    CHECK(strcmp(by_index.name, by_name.name) == 0 && by_index.ndim == by_name.ndim);
  }
  float small[3];
  EXPECT(vsdk_suite_read_f32(suite, "gamma", small, 3), VSDK_STATUS_INVALID_ARGUMENT, "has 32 elements");

  /* Checking: unknown stage, missing output, wrong shape, device memory, bad dtype. */
  float n[4 * 32];
  memset(n, 0, sizeof n);
  int64_t shape[2] = {4, 32};
  int64_t bad_shape[2] = {32, 4};
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
  args.stage = "nope";
  args.output_count = 1;
  args.names = names;
  args.outputs = &t;
  vsdk_results_t* results = NULL;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_NOT_FOUND, "no stage `nope`");
  args.stage = "layer_norm";
  args.output_count = 0;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "give every output");
  args.output_count = 1;
  t.shape = bad_shape;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "the document declares");
  t.shape = shape;
  t.device.device_type = VSDK_DEVICE_CUDA;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "not host memory");
  t.device.device_type = VSDK_DEVICE_CPU;
  t.dtype.bits = 24;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "not a catalog dtype");
  t.dtype.bits = 32;
  t.ndim = -1;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "ndim -1");
  t.ndim = 2;
  int64_t huge[2] = {(int64_t)1 << 61, 1};
  t.strides = huge;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "reach past any allocation");
  t.strides = NULL;
  const char* twice[2] = {"n", "n"};
  vsdk_tensor_t two[2] = {t, t};
  args.names = twice;
  args.outputs = two;
  args.output_count = 2;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "given twice");
  args.names = names;
  args.outputs = &t;
  args.output_count = 1;
  args.tier = "fp8";
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "tier `fp8`");
  args.tier = NULL;
  args.struct_size = 8;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "args->struct_size` is 8");
  /* A caller built against the first header (a smaller struct_size) is
   * read up to what it knows. */
  args.struct_size = offsetof(vsdk_check_args_t, tensors);
  args.stage = "nope";
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_NOT_FOUND, "no stage `nope`");
  args.struct_size = sizeof args;
  args.stage = NULL;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "without `args->stage`");
  args.output_count = 0;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT,
         "no selected stage's outputs are among");
  CHECK(results == NULL);

  /* Tensor sets: missing and foreign files, names given twice. */
  vsdk_tensors_t* tensors = NULL;
  EXPECT(vsdk_tensors_open("/nonexistent/x.npz", &tensors), VSDK_STATUS_NOT_FOUND, "no such file");
  EXPECT(vsdk_tensors_open("/etc/hostname", &tensors), VSDK_STATUS_INVALID_FILE, "unknown capture format");
  EXPECT(vsdk_tensors_open(NULL, &tensors), VSDK_STATUS_INVALID_ARGUMENT, "`path` is NULL");
  CHECK(tensors == NULL);
  OK(vsdk_tensors_new(&tensors));
  OK(vsdk_tensors_add(tensors, "n", &t));
  EXPECT(vsdk_tensors_add(tensors, "n", &t), VSDK_STATUS_INVALID_ARGUMENT, "already in the set");
  t.ndim = -1;
  EXPECT(vsdk_tensors_add(tensors, "m", &t), VSDK_STATUS_INVALID_ARGUMENT, "ndim -1");
  t.ndim = 2;
  EXPECT(vsdk_tensors_add((vsdk_tensors_t*)suite, "m", &t), VSDK_STATUS_INVALID_ARGUMENT,
         "not a live tensors handle");
  size_t count = 0;
  OK(vsdk_tensors_count(tensors, &count));
  CHECK(count == 1);
  vsdk_tensor_info_t entry = {sizeof entry, NULL, {0, 0, 0}, 0, NULL};
  EXPECT(vsdk_tensors_at(tensors, 1, &entry), VSDK_STATUS_NOT_FOUND, "the set holds 1");
  OK(vsdk_tensors_at(tensors, 0, &entry));
  CHECK(strcmp(entry.name, "n") == 0 && entry.ndim == 2 && entry.shape[1] == 32);
  /* Given in `names` and in `tensors`: refused. */
  args.stage = "layer_norm";
  args.output_count = 1;
  args.tensors = tensors;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "given twice");
  args.tensors = (const vsdk_tensors_t*)suite;
  EXPECT(vsdk_check(suite, &args, &results), VSDK_STATUS_INVALID_ARGUMENT, "args->tensors");
  vsdk_tensors_free(tensors);
  vsdk_end_to_end_record_t e2e = {sizeof e2e, NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT(vsdk_results_end_to_end((const vsdk_results_t*)suite, 0, &e2e), VSDK_STATUS_INVALID_ARGUMENT,
         "not a live results handle");
  CHECK(results == NULL);

  /* Reports: files that are not there or not reports. */
  vsdk_verify_args_t v;
  memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  v.report = "/nonexistent/report.json";
  v.public_key = "/nonexistent/key.pub.pem";
  vsdk_report_t* report = NULL;
  EXPECT(vsdk_verify_report(&v, &report), VSDK_STATUS_INVALID_FILE, "/nonexistent/key.pub.pem");
  EXPECT(vsdk_verify_report(NULL, &report), VSDK_STATUS_INVALID_ARGUMENT, "`args` is NULL");

  vsdk_suite_free(suite);
  vsdk_provider_free(provider);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("misuse: all checks passed\n");
  return 0;
}
