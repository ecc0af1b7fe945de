/* An inference engine's use of libvips_sdk, in C (the quick start of
 * docs/c-api.md). Build against an installed prefix:
 *
 *   cc engine.c $(pkg-config --cflags --libs vips-sdk) -lm -o engine
 *   ./engine [report.json public-key.pem]
 *
 * 1. loads the CPU provider and lists its devices;
 * 2. runs the quick DINOv2 suite on it and prints each stage's margin;
 * 3. checks a tensor of its own: its LayerNorm for the `final_norm` stage,
 *    written into a padded (strided) buffer; then the same perturbed, which
 *    must fail, with its margin;
 * 4. with a report and a key: verifies the report against the provider
 *    library it loaded, and refuses the driver unless CERTIFIED.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vips_sdk/vips_sdk.h>

#define INIT(s) (memset(&(s), 0, sizeof(s)), (s).struct_size = sizeof(s))

static int ok(vsdk_error_t* e, const char* what) {
  if (e == NULL) return 1;
  fprintf(stderr, "%s: %s\n", what, vsdk_error_message(e));
  vsdk_error_free(e);
  return 0;
}

/* Checks `x_norm` given in a buffer of `row_stride` floats per token. */
static int check_final_norm(const vsdk_suite_t* suite, float* x_norm, int64_t tokens,
                            int64_t channels, int64_t row_stride, double* margin) {
  int64_t shape[3] = {1, tokens, channels};
  int64_t strides[3] = {tokens * row_stride, row_stride, 1};
  vsdk_tensor_t t;
  memset(&t, 0, sizeof t);
  t.data = x_norm;
  t.device.device_type = VSDK_DEVICE_CPU;
  t.ndim = 3;
  t.dtype.code = VSDK_DTYPE_FLOAT;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = strides;
  const char* names[1] = {"x_norm"};
  vsdk_check_args_t args;
  INIT(args);
  args.stage = "final_norm";
  args.tier = "fp32";
  args.output_count = 1;
  args.names = names;
  args.outputs = &t;
  vsdk_results_t* results = NULL;
  if (!ok(vsdk_check(suite, &args, &results), "check final_norm")) return -1;
  vsdk_stage_record_t rec;
  INIT(rec);
  int status = -1;
  if (ok(vsdk_results_record(results, 0, &rec), "record")) {
    status = rec.status;
    *margin = rec.margin;
    printf("  final_norm, own LayerNorm: %s, margin %.4f%s%s\n", rec.status_label, rec.margin,
           rec.reason ? ": " : "", rec.reason ? rec.reason : "");
  }
  vsdk_results_free(results);
  return status;
}

int main(int argc, char** argv) {
  printf("libvips_sdk %s (header %s)\n", vsdk_sdk_version(), VSDK_SDK_VERSION_STRING);
  if (vsdk_sdk_version_number() != VSDK_SDK_VERSION_NUMBER) {
    fprintf(stderr, "library and header versions differ\n");
    return 1;
  }

  /* 1. The provider and its devices. */
  vsdk_host_provider_t* cpu = NULL;
  if (!ok(vsdk_provider_open("cpu", &cpu), "open provider cpu")) return 1;
  vsdk_host_provider_info_t pinfo;
  INIT(pinfo);
  if (!ok(vsdk_provider_info(cpu, &pinfo), "provider info")) return 1;
  printf("provider %s %s (%s), %s\n", pinfo.name, pinfo.version, pinfo.vendor, pinfo.library);
  for (uint32_t i = 0; i < pinfo.device_count; i++) {
    vsdk_device_info_t d;
    INIT(d);
    if (ok(vsdk_provider_device_info(cpu, i, &d), "device info"))
      printf("  device %u: %s (%llu MiB)\n", i, d.name, (unsigned long long)(d.memory_bytes >> 20));
  }

  /* 2. The quick DINOv2 suite on it. */
  vsdk_suite_t* suite = NULL;
  if (!ok(vsdk_suite_open("dinov2-vits14-quick", &suite), "open suite")) return 1;
  vsdk_run_options_t options;
  INIT(options);
  vsdk_results_t* results = NULL;
  if (!ok(vsdk_run(suite, cpu, &options, &results), "run")) return 1;
  vsdk_results_info_t rinfo;
  INIT(rinfo);
  if (!ok(vsdk_results_info(results, &rinfo), "results")) return 1;
  for (size_t i = 0; i < rinfo.record_count; i++) {
    vsdk_stage_record_t rec;
    INIT(rec);
    if (ok(vsdk_results_record(results, i, &rec), "record"))
      printf("  %-12s %-4s %-12s %-10s margin %.4f\n", rec.stage, rec.tier, rec.round,
             rec.status_label, rec.margin);
  }
  printf("suite: %s\n", rinfo.passed ? "PASS" : "FAIL");
  int run_passed = rinfo.passed;
  vsdk_results_free(results);

  /* 3. A tensor of our own: LayerNorm(x_12) with norm_w, norm_b, eps 1e-6. */
  vsdk_tensor_info_t x_info;
  INIT(x_info);
  if (!ok(vsdk_suite_tensor(suite, "x_12", &x_info), "x_12")) return 1;
  int64_t tokens = x_info.shape[1], channels = x_info.shape[2], stride = channels + 16;
  float* x = malloc(sizeof(float) * tokens * channels);
  float* w = malloc(sizeof(float) * channels);
  float* b = malloc(sizeof(float) * channels);
  float* y = calloc((size_t)(tokens * stride), sizeof(float));
  if (!ok(vsdk_suite_read_f32(suite, "x_12", x, tokens * channels), "read x_12") ||
      !ok(vsdk_suite_read_f32(suite, "norm_w", w, channels), "read norm_w") ||
      !ok(vsdk_suite_read_f32(suite, "norm_b", b, channels), "read norm_b"))
    return 1;
  for (int64_t t = 0; t < tokens; t++) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < channels; c++) mean += x[t * channels + c];
    mean /= channels;
    for (int64_t c = 0; c < channels; c++)
      var += (x[t * channels + c] - mean) * (x[t * channels + c] - mean);
    var /= channels;
    for (int64_t c = 0; c < channels; c++)
      y[t * stride + c] = (float)((x[t * channels + c] - mean) / sqrt(var + 1e-6) * w[c] + b[c]);
  }
  double margin = 0;
  int own = check_final_norm(suite, y, tokens, channels, stride, &margin);
  y[3 * stride + 5] += 0.05f; /* a bug: one element off */
  double bad_margin = 0;
  int perturbed = check_final_norm(suite, y, tokens, channels, stride, &bad_margin);
  free(x);
  free(w);
  free(b);
  free(y);
  int checks_ok = own == VSDK_STAGE_PASS && perturbed == VSDK_STAGE_FAIL && bad_margin < 0;
  printf("own tensor: correct %s, perturbed %s (margin %.2f)\n",
         own == VSDK_STAGE_PASS ? "PASS" : "NOT PASS",
         perturbed == VSDK_STAGE_FAIL ? "FAIL" : "NOT FAIL", bad_margin);

  /* 4. Refuse an uncertified driver. */
  int certified = 1;
  if (argc == 3) {
    vsdk_verify_args_t v;
    INIT(v);
    v.report = argv[1];
    v.public_key = argv[2];
    v.provider = pinfo.library; /* the file we loaded must be the certified one */
    vsdk_report_t* report = NULL;
    certified = 0;
    if (ok(vsdk_verify_report(&v, &report), "verify report")) {
      vsdk_report_info_t r;
      INIT(r);
      if (ok(vsdk_report_info(report, &r), "report info")) {
        printf("report: %s %s %s at %s on %s (%s)\n", r.verdict, r.component, r.component_version,
               r.tier, r.provider, r.device);
        certified = r.certified;
      }
      vsdk_report_free(report);
    }
    printf("driver %s\n", certified ? "accepted" : "REFUSED");
  }

  vsdk_suite_free(suite);
  vsdk_provider_free(cpu);
  return run_passed && checks_ok && certified ? 0 : 1;
}
