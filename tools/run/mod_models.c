/* wbcl-run — vision models: crate (CRATE) and tost (ToST), include/wbcl/models.h.
 * Input: images (B, C, H, W) as .npy (a single (C, H, W) image is taken as B = 1).
 * Output: logits (B, classes) or, with --param output=features, CRATE's final tokens
 * (B, N+1, d) / ToST's normed CLS feature (B, d). Configuration: the sizes come from the weights
 * (models.h: config fields 0); --param config=NAME (a published preset) and the individual size
 * params are checked against them (a contradiction is an error naming the size, the key and both
 * values); explicit size params override the preset's. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "wbcl/models.h"

static const char *const out_choices[] = {"logits", "features", NULL};
static const char *const dtype_choices[] = {"f32", "f16", NULL};

/* --param weight_dtype=f32|f16 (models.h: f16 stores the GEMM weight matrices as float16) */
static int weight_dtype_param(wbcl_run *r, wbcl_dtype *out)
{
    const char *w;
    if (wbcl_run_param_choice(r, "weight_dtype", "f32", dtype_choices, &w)) return 1;
    *out = !strcmp(w, "f16") ? WBCL_F16 : WBCL_F32;
    return 0;
}

static int load_images(wbcl_run *r, wbcl_run_array *h, wbcl_tensor **x)
{
    if (wbcl_run_input(r, 0, "images", h, NULL)) return 1;
    if (h->ndim == 3) { /* (C, H, W) -> (1, C, H, W) */
        h->shape[3] = h->shape[2];
        h->shape[2] = h->shape[1];
        h->shape[1] = h->shape[0];
        h->shape[0] = 1;
        h->ndim = 4;
    }
    if (h->ndim != 4) {
        char s[96];
        return wbcl_run_fail(r, "images must be (B, C, H, W) or (C, H, W), got %s",
                             wbcl_run_shape_str(s, sizeof s, h->ndim, h->shape));
    }
    return wbcl_run_upload(r, h, x);
}

static int size_param(wbcl_run *r, const char *name, size_t def, size_t *out)
{
    long v;
    if (wbcl_run_param_int(r, name, (long)def, 0, 1L << 20, &v)) return 1;
    *out = (size_t)v;
    return 0;
}

/* ---- crate -------------------------------------------------------------------------------- */
static int run_crate(wbcl_run *r)
{
    /* sizes 0 = from the weights (models.h); a preset's sizes are checked against them */
    wbcl_crate_config c;
    wbcl_crate_config_preset("tiny", &c); /* eta, lambd, ln_eps */
    c.dim = c.depth = c.heads = c.dim_head = c.patch = c.channels = 0;
    const char *preset = wbcl_run_param_str(r, "config");
    if (preset && wbcl_crate_config_preset(preset, &c))
        return wbcl_run_fail(r, "unknown CRATE config '%s' (tiny, small, base, large)", preset);
    /* the weights fix only heads * dim_head: heads defaults to 6 (tiny's) when neither is given */
    if (!preset && !wbcl_run_param_str(r, "heads") && !wbcl_run_param_str(r, "dim_head")) c.heads = 6;
    /* dim_head follows from heads and the weights unless given; a dim_head alone sets heads */
    if (!wbcl_run_param_str(r, "dim_head")) c.dim_head = 0;
    if (wbcl_run_param_str(r, "dim_head") && !wbcl_run_param_str(r, "heads")) c.heads = 0;
    const char *what;
    int diag;
    if (size_param(r, "dim", c.dim, &c.dim) || size_param(r, "depth", c.depth, &c.depth) ||
        size_param(r, "heads", c.heads, &c.heads) || size_param(r, "dim_head", c.dim_head, &c.dim_head) ||
        size_param(r, "patch", c.patch, &c.patch) || size_param(r, "channels", c.channels, &c.channels) ||
        size_param(r, "classes", 0, &c.num_classes) || wbcl_run_param_pos(r, "eta", c.eta, &c.eta) ||
        wbcl_run_param_float(r, "lambd", c.lambd, 0, HUGE_VAL, &c.lambd) ||
        wbcl_run_param_choice(r, "output", "logits", out_choices, &what) ||
        wbcl_run_param_bool(r, "diagnostics", 0, &diag) || weight_dtype_param(r, &c.weight_dtype))
        return 1;
    if (diag && r->par && r->par->size > 1) /* only rank 0 prints: the other ranks' samples would be lost */
        return wbcl_run_fail(r, "--param diagnostics=1 does not run over ranks; run it with wbcl-run");
    wbcl_run_array xh = {0};
    wbcl_tensor *x = NULL, *y = NULL;
    wbcl_crate *m = NULL;
    double *Rc = NULL, *sp = NULL;
    int rc = 1;
    if (load_images(r, &xh, &x)) goto done;
    if (wbcl_run_check(r, wbcl_crate_load_file(r->ctx, r->weights_path, &c, &m))) goto done;
    const wbcl_crate_config *mc = wbcl_crate_get_config(m);
    const size_t B = xh.shape[0];
    const int feat = !strcmp(what, "features");
    size_t N1 = (mc->patch ? (xh.shape[2] / mc->patch) * (xh.shape[3] / mc->patch) : 0) + 1;
    size_t so[3] = {B, feat ? N1 : mc->num_classes, mc->dim};
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, feat ? 3 : 2, so, WBCL_F32, NULL, &y))) goto done;
    wbcl_model_opts o;
    memset(&o, 0, sizeof o);
    if (diag) {
        Rc = calloc(mc->depth * B, sizeof *Rc);
        sp = calloc(mc->depth * B, sizeof *sp);
        if (!Rc || !sp) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        o.Rc = Rc;
        o.sparsity = sp;
        o.eps2 = 1.0;
        o.sparsity_threshold = 0.0f;
    }
    if (wbcl_run_check(r, wbcl_crate_forward(r->ctx, m, x, feat ? WBCL_MODEL_FEATURES : WBCL_MODEL_LOGITS, y, &o)))
        goto done;
    if (diag)
        for (size_t l = 0; l < mc->depth; l++)
            for (size_t b = 0; b < B; b++)
                wbcl_run_info(r, "layer %zu sample %zu: Rc(z_half) %.6g  sparsity(z) %.6g\n", l, b, Rc[l * B + b],
                              sp[l * B + b]);
    rc = wbcl_run_write_output_tensor(r, y);
done:
    free(Rc);
    free(sp);
    wbcl_run_array_free(&xh);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_crate_destroy(m);
    return rc;
}

static const char *const crate_params[] = {"config", "dim",   "depth",  "heads",       "dim_head", "patch",
                                           "channels", "classes", "eta", "lambd", "output", "diagnostics", "weight_dtype",
                                           NULL};

const wbcl_run_module wbcl_mod_crate = {
    "crate",
    "CRATE vision model (MSSA + ISTA layers) on images: logits or features",
    "  --input images.npy (B, C, H, W) or (C, H, W); H, W multiples of the patch\n"
    "  --weights crate.safetensors   reference state_dict keys (tools/convert_pth.py converts .pth)\n"
    "  sizes from the weights: dim, depth, heads * dim_head, channels * patch^2 (channels 3 unless\n"
    "          given), classes; --param config=tiny|small|base|large or dim, depth, heads, dim_head,\n"
    "          patch, channels, classes are checked against them; heads (6) or dim_head sets the split\n"
    "          of heads * dim_head; eta (0.1), lambd (0.1)\n"
    "  --param output=logits|features   (B, classes) or the final tokens (B, N+1, d)\n"
    "  --param diagnostics=1   prints per-layer Rc(z_half | U) (eps^2 = 1) and the nonzero fraction of z\n"
    "  --param weight_dtype=f32|f16   f16: GEMM weight matrices stored as float16 (fp32 compute)\n"
    "  --output Y.npy",
    crate_params,
    NULL,
    1,
    1,
    WBCL_RUN_REQUIRED,
    WBCL_RUN_OPTIONAL,
    0,
    run_crate};

/* ---- tost --------------------------------------------------------------------------------- */
static int run_tost(wbcl_run *r)
{
    /* every ToST size is fixed by the weights: 0 = from them; a preset's sizes are checked */
    wbcl_tost_config c;
    wbcl_tost_config_preset("tiny", &c); /* ln_eps, bn_eps */
    c.dim = c.depth = c.heads = c.mlp_hidden = c.patch = c.cls_layers = 0;
    const char *preset = wbcl_run_param_str(r, "config");
    if (preset && wbcl_tost_config_preset(preset, &c))
        return wbcl_run_fail(r, "unknown ToST config '%s' (tiny, small, medium)", preset);
    const char *what;
    if (size_param(r, "dim", c.dim, &c.dim) || size_param(r, "depth", c.depth, &c.depth) ||
        size_param(r, "heads", c.heads, &c.heads) || size_param(r, "patch", c.patch, &c.patch) ||
        size_param(r, "mlp_hidden", c.mlp_hidden, &c.mlp_hidden) ||
        size_param(r, "cls_layers", c.cls_layers, &c.cls_layers) || size_param(r, "classes", 0, &c.num_classes) ||
        wbcl_run_param_choice(r, "output", "logits", out_choices, &what) || weight_dtype_param(r, &c.weight_dtype))
        return 1;
    wbcl_run_array xh = {0};
    wbcl_tensor *x = NULL, *y = NULL;
    wbcl_tost *m = NULL;
    int rc = 1;
    if (load_images(r, &xh, &x)) goto done;
    if (wbcl_run_check(r, wbcl_tost_load_file(r->ctx, r->weights_path, &c, &m))) goto done;
    const wbcl_tost_config *mc = wbcl_tost_get_config(m);
    const int feat = !strcmp(what, "features");
    size_t so[2] = {xh.shape[0], feat ? mc->dim : mc->num_classes};
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, 2, so, WBCL_F32, NULL, &y))) goto done;
    if (wbcl_run_check(r, wbcl_tost_forward(r->ctx, m, x, feat ? WBCL_MODEL_FEATURES : WBCL_MODEL_LOGITS, y, NULL)))
        goto done;
    rc = wbcl_run_write_output_tensor(r, y);
done:
    wbcl_run_array_free(&xh);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_tost_destroy(m);
    return rc;
}

static const char *const tost_params[] = {"config", "dim",        "depth",   "heads", "patch",
                                          "mlp_hidden", "cls_layers", "classes", "output", "weight_dtype", NULL};

const wbcl_run_module wbcl_mod_tost = {
    "tost",
    "ToST vision model (TSSA blocks + class attention) on images: logits or features",
    "  --input images.npy (B, 3, H, W) or (3, H, W)\n"
    "  --weights tost.safetensors   reference state_dict keys (tools/convert_pth.py converts .pth)\n"
    "  sizes from the weights: dim, depth, heads, patch (16|8), mlp_hidden, cls_layers, classes;\n"
    "          --param config=tiny|small|medium or the individual sizes are checked against them\n"
    "  --param output=logits|features   (B, classes) or the normed CLS feature (B, d)\n"
    "  --param weight_dtype=f32|f16   f16: GEMM weight matrices stored as float16 (fp32 compute)\n"
    "  --output Y.npy",
    tost_params,
    NULL,
    1,
    1,
    WBCL_RUN_REQUIRED,
    WBCL_RUN_OPTIONAL,
    0,
    run_tost};
