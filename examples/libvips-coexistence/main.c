/* libvips and libvips_sdk in one translation unit and one program: libvips
 * owns `vips_`, `Vips*` and <vips/vips.h>; the SDK keeps to `vsdk_` and
 * <vips_sdk/...>. Builds an image with libvips, then checks a stage with
 * the SDK, and calls back into libvips.
 *   cc main.c $(pkg-config --cflags --libs vips vips-sdk) -o coexist */
#include <stdio.h>
#include <string.h>

#include <vips/vips.h>
#include <vips_sdk/vips_sdk.h>

int main(int argc, char** argv) {
  (void)argc;
  if (VIPS_INIT(argv[0])) vips_error_exit("VIPS_INIT");
  VipsImage* black = NULL;
  VipsImage* grey = NULL;
  if (vips_black(&black, 64, 48, NULL) || vips_linear1(black, &grey, 1.0, 128.0, NULL))
    vips_error_exit("libvips");
  double mean = 0;
  if (vips_avg(grey, &mean, NULL)) vips_error_exit("vips_avg");
  printf("libvips %s: a %dx%d image of mean %.1f\n", vips_version_string(),
         vips_image_get_width(grey), vips_image_get_height(grey), mean);

  vsdk_suite_t* suite = NULL;
  vsdk_error_t* e = vsdk_suite_open("demo-mlp", &suite);
  if (e) {
    fprintf(stderr, "vsdk: %s\n", vsdk_error_message(e));
    vsdk_error_free(e);
    return 1;
  }
  vsdk_suite_info_t info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  e = vsdk_suite_info(suite, &info);
  if (e) {
    fprintf(stderr, "vsdk: %s\n", vsdk_error_message(e));
    return 1;
  }
  printf("libvips_sdk %s: suite %s with %zu stages\n", vsdk_sdk_version(), info.component,
         info.stage_count);
  vsdk_suite_free(suite);

  VipsImage* small = NULL;
  if (vips_resize(grey, &small, 0.5, NULL)) vips_error_exit("vips_resize");
  printf("libvips again: resized to %dx%d\n", vips_image_get_width(small),
         vips_image_get_height(small));
  g_object_unref(small);
  g_object_unref(grey);
  g_object_unref(black);
  vips_shutdown();
  return mean == 128.0 ? 0 : 1;
}
