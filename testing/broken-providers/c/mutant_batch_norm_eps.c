/*
 * The plain-C template with one deliberate bug: vsdk.batch_norm uses eps 1e-3
 * (Keras's BatchNormalization default) whatever the call says (PyTorch's 1e-5 in
 * the suites). The template's bn_eps_f is renamed away by the function-like macro,
 * as in mutant_silu_sigmoid.c.
 */
static float bn_eps_f(double eps) { (void)eps; return 1e-3f; }
#define bn_eps_f(x) template_bn_eps_f(x)

#include "template.c"
