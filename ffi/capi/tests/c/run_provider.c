/* An engine running a suite on a provider through vsdk_run, the way an
 * integration would (default options: the SDK's worker):
 *   run_provider LIBRARY SUITE STAGE_GLOB
 * prints one line per stage record, "<round> <stage> <STATUS LABEL>", then
 * "passed 0|1". Exit status 0 when every call succeeded (whatever the
 * verdict), 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include "vips_sdk/vips_sdk.h"

static int report(const char* what, vsdk_error_t* e) {
  if (e == NULL) return 0;
  fprintf(stderr, "%s: %s\n", what, vsdk_error_message(e));
  vsdk_error_free(e);
  return 1;
}

int main(int argc, char** argv) {
  vsdk_suite_t* suite = NULL;
  vsdk_host_provider_t* provider = NULL;
  vsdk_results_t* results = NULL;
  vsdk_run_options_t options;
  vsdk_results_info_t info;
  int failed = 0;
  size_t i;
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIBRARY SUITE STAGE_GLOB\n", argv[0]);
    return 1;
  }
  memset(&options, 0, sizeof options);
  options.struct_size = sizeof options;
  options.stage_glob = argv[3];
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  failed = report("vsdk_suite_open", vsdk_suite_open(argv[2], &suite));
  if (!failed) failed = report("vsdk_provider_open", vsdk_provider_open(argv[1], &provider));
  if (!failed) failed = report("vsdk_run", vsdk_run(suite, provider, &options, &results));
  if (!failed) failed = report("vsdk_results_info", vsdk_results_info(results, &info));
  for (i = 0; !failed && i < info.record_count; i++) {
    vsdk_stage_record_t record;
    memset(&record, 0, sizeof record);
    record.struct_size = sizeof record;
    failed = report("vsdk_results_record", vsdk_results_record(results, i, &record));
    if (!failed) printf("%s %s %s\n", record.round, record.stage, record.status_label);
  }
  if (!failed) printf("passed %d\n", (int)info.passed);
  vsdk_results_free(results);
  vsdk_provider_free(provider);
  vsdk_suite_free(suite);
  return failed;
}
