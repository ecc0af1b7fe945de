/* An engine's own tensors judged through libvips_sdk: the tensors its
 * kernels computed, saved under the suite's names (.npz, .safetensors, .npy),
 * judged stage by stage as `vips-conformance check` judges them.
 *
 *   cc -std=c99 check.c $(pkg-config --cflags --libs vips-sdk) -o check
 *   ./check SUITE CAPTURES [--chained|--isolated] [--tier fp32|fp16|bf16]
 *
 * Isolated: each stage against the reference from its golden inputs (or its
 * inputs as the engine fed them, captured as INPUT@STAGE). Chained: each
 * stage from the engine's own earlier tensors; the component's outputs are
 * also compared end to end. Default (VSDK_CHECK_AUTO), as the CLI's: chained
 * where the captures hold what fed the stages, else isolated. Stages the captures hold nothing of
 * are NOT CAPTURED (an engine may start at any stage). Exit status 0: every
 * judged stage passed; 1: one did not; 2: the check could not be made.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vips_sdk/vips_sdk.h>

static int fail(vsdk_error_t* e, const char* what) {
  fprintf(stderr, "%s: %s\n", what, vsdk_error_message(e));
  vsdk_error_free(e);
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SUITE CAPTURES [--chained|--isolated] [--tier T]\n", argv[0]);
    return 2;
  }
  vsdk_check_args_t args = {.struct_size = sizeof args};
  args.tier = "fp32";
  args.chained = VSDK_CHECK_AUTO;
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--chained") == 0) {
      args.chained = 1;
    } else if (strcmp(argv[i], "--isolated") == 0) {
      args.chained = 0;
    } else if (strcmp(argv[i], "--tier") == 0 && i + 1 < argc) {
      args.tier = argv[++i];
    } else {
      fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  vsdk_error_t* e;
  vsdk_suite_t* suite = NULL;
  if ((e = vsdk_suite_open(argv[1], &suite))) return fail(e, "suite");
  vsdk_tensors_t* tensors = NULL;
  if ((e = vsdk_tensors_open(argv[2], &tensors))) return fail(e, "captures");
  args.tensors = tensors;
  vsdk_results_t* results = NULL;
  if ((e = vsdk_check(suite, &args, &results))) return fail(e, "check");

  vsdk_results_info_t info = {.struct_size = sizeof info};
  if ((e = vsdk_results_info(results, &info))) return fail(e, "results");
  for (size_t i = 0; i < info.record_count; i++) {
    vsdk_stage_record_t r = {.struct_size = sizeof r};
    if ((e = vsdk_results_record(results, i, &r))) return fail(e, "record");
    printf("%-12s %-13s margin %8.4f", r.stage, r.status_label, r.margin);
    if (r.reason) printf("  %s", r.reason);
    printf("\n");
    for (size_t k = 0; k < r.output_count && r.status == VSDK_STAGE_FAIL; k++) {
      vsdk_output_record_t o = {.struct_size = sizeof o};
      if ((e = vsdk_results_output(results, i, k, &o))) return fail(e, "output");
      if (!o.passed && o.worst_index != UINT64_MAX)
        printf("  %s: worst element %llu: %.9g, reference %.9g, bound %.3g\n", o.tensor,
               (unsigned long long)o.worst_index, o.worst_actual, o.worst_reference, o.worst_bound);
    }
  }
  for (size_t i = 0; i < info.end_to_end_count; i++) {
    vsdk_end_to_end_record_t r = {.struct_size = sizeof r};
    if ((e = vsdk_results_end_to_end(results, i, &r))) return fail(e, "end to end");
    printf("end to end %s: %s, rel L2 %.3g (<= %.3g), cosine %.9f (>= %.9f)\n", r.tensor,
           r.passed ? "PASS" : "FAIL", r.rel_l2_error, r.max_rel_l2_error, r.cosine_similarity,
           r.min_cosine_similarity);
  }
  printf("check: %s\n", info.passed ? "PASS" : "FAIL");
  int status = info.passed ? 0 : 1;
  vsdk_results_free(results);
  vsdk_tensors_free(tensors);
  vsdk_suite_free(suite);
  return status;
}
