/* wbcl-run — the table of modules.
 *
 * TO ADD A MODULE: define `const wbcl_run_module wbcl_mod_<name> = { ... };` in a
 * tools/run/mod_<family>.c file (CMake globs the .c files of tools/run) and add one line
 * `X(<name>)` below. The order here is the order of `wbcl-run --list`. */
#include <string.h>

#include "registry.h"

#define WBCL_RUN_MODULES(X)                                                                         \
    /* mod_basic.c */                                                                               \
    X(check)                                                                                        \
    X(layernorm)                                                                                    \
    X(gelu)                                                                                         \
    X(softmax)                                                                                      \
    X(gemm)                                                                                         \
    X(attn_softmax) /* mod_attention.c */                                                           \
    X(attn_mssa)    /* mod_attention.c */                                                           \
    X(redunet_fit)     /* mod_redunet.c */                                                          \
    X(redunet_apply)   /* mod_redunet.c */                                                          \
    X(redunet_example) /* mod_redunet.c */                                                          \
    X(attn_tssa)        /* mod_attention_stats.c */                                                 \
    X(attn_tssa_causal) /* mod_attention_stats.c */                                                 \
    X(attn_xca)         /* mod_attention_stats.c */                                                 \
    X(attn_energy)      /* mod_attention_stats.c */                                                 \
    X(ista)  /* mod_ista.c */                                                                       \
    X(lasso) /* mod_ista.c */                                                                       \
    X(redunet1d_fit)   /* mod_circulant.c */                                                        \
    X(redunet1d_apply) /* mod_circulant.c */                                                        \
    X(redunet2d_fit)   /* mod_circulant.c */                                                        \
    X(redunet2d_apply) /* mod_circulant.c */                                                        \
    X(crate) /* mod_models.c */                                                                     \
    X(tost)  /* mod_models.c */                                                                     \
    X(gpt2)              /* mod_lm.c */                                                             \
    X(tost_lm)           /* mod_lm.c */                                                             \
    X(crate_lm)          /* mod_lm.c */                                                             \
    X(gpt2_generate)     /* mod_lm.c */                                                             \
    X(tost_lm_generate)  /* mod_lm.c */                                                             \
    X(crate_lm_generate) /* mod_lm.c */                                                             \
    /* mod_attention.c, mod_redunet.c, ...: add their lines here */

#define WBCL_RUN_DECLARE(name) extern const wbcl_run_module wbcl_mod_##name;
WBCL_RUN_MODULES(WBCL_RUN_DECLARE)
#undef WBCL_RUN_DECLARE

#define WBCL_RUN_ENTRY(name) &wbcl_mod_##name,
static const wbcl_run_module *const modules[] = {WBCL_RUN_MODULES(WBCL_RUN_ENTRY)};
#undef WBCL_RUN_ENTRY

size_t wbcl_run_module_count(void) { return sizeof modules / sizeof modules[0]; }

const wbcl_run_module *wbcl_run_module_at(size_t i) { return i < wbcl_run_module_count() ? modules[i] : NULL; }

const wbcl_run_module *wbcl_run_module_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < wbcl_run_module_count(); i++)
        if (!strcmp(modules[i]->name, name)) return modules[i];
    return NULL;
}
