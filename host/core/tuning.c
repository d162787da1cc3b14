/* Tuned kernel parameters (include/wbcl/tuning.h): the key registry and its validation, the
 * table format (parse, write), where a context finds its table, and the public calls. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "wbcl/tuning.h"
#include "blas.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The library version written into tables (keep equal to project(VERSION) in CMakeLists.txt). */
#ifndef WBCL_VERSION_STRING
#define WBCL_VERSION_STRING "0.1.0"
#endif
#define FORMAT_ID "wbcl-tuning-1"
#define REF_P 64 /* head dimension attention's unscoped keys are shown for */

/* ---- the registry ---------------------------------------------------------------- */
enum { K_RANGE, K_POW2, K_SET };

typedef struct pdesc {
    const char *key, *family;
    int kind;
    long lo, hi;
    long set[6]; /* K_SET: allowed values, 0-terminated */
    int wg_limit;   /* value <= the device's max work-group size */
    int lmem_per;   /* bytes of local memory per unit of value (0: none) */
    int attention;  /* may be scoped by head dimension */
    const char *doc;
} pdesc;

static const pdesc registry[] = {
    {"core.wg", "core", K_RANGE, 1, 1 << 16, {0}, 1, 0, 0, "work-group size of the 1-D elementwise kernels (WBCL_WG)"},
    {"reduce.rows", "reduce", K_RANGE, 2, 4096, {0}, 0, 0, 0,
     "CPU row-block reductions: rows per work-item (WBCL_REDUCE_ROWS)"},
    {"reduce.wg", "reduce", K_POW2, 1, 1 << 16, {0}, 1, 4, 0, "GPU work-group reductions: work-group size (WBCL_REDUCE_WG)"},
    {"gemm.mr", "gemm", K_RANGE, 1, 16, {0}, 0, 0, 0, "packed GEMM: rows of C per work-item (WBCL_GEMM_MR)"},
    {"gemm.nr", "gemm", K_SET, 0, 0, {4, 8, 16, 32, 64, 0}, 0, 0, 0,
     "packed GEMM: columns of C per work-item (WBCL_GEMM_NR)"},
    {"gemm.a_block_kib", "gemm", K_RANGE, 16, 65536, {0}, 0, 0, 0, "packed GEMM: KiB of packed A panels per block"},
    {"gemm.backend", "gemm", K_RANGE, 1, 3, {0}, 0, 0, 0,
     "GEMM backend unless set explicitly: 1 packed, 2 CLBlast, 3 tiled (wbcl_gemm_backend)"},
    {"gemm.tiled.tile", "gemm_tiled", K_SET, 0, 0, {64, 128, 0}, 0, 0, 0,
     "tiled GEMM: rows and columns of C per work-group (WBCL_GT_TM = WBCL_GT_TN); 0: by the shape"},
    {"gemm.tiled.tk", "gemm_tiled", K_SET, 0, 0, {8, 16, 32, 0}, 0, 0, 0,
     "tiled GEMM: k per local-memory slice (WBCL_GT_TK)"},
    {"gemm.tiled.db", "gemm_tiled", K_RANGE, 0, 1, {0}, 0, 0, 0,
     "tiled GEMM: 1 = two local-memory slices, one barrier per slice (WBCL_GT_DB)"},
    {"gemm.tiled.v4", "gemm_tiled", K_RANGE, 0, 1, {0}, 0, 0, 0,
     "tiled GEMM: 1 = A and B read as float4 where aligned (WBCL_GT_VA, WBCL_GT_VB)"},
    {"gemm.tiled.maxrreg", "gemm_tiled", K_RANGE, 0, 255, {0}, 0, 0, 0,
     "tiled GEMM: registers per work-item at most (-cl-nv-maxrregcount; NVIDIA's OpenCL only); 0: the compiler's "
     "choice"},
    {"circulant.wg", "circulant", K_RANGE, 0, 1, {0}, 0, 0, 0,
     "GPU shift-invariant ReduNet: 1 a work-group per matrix (Cholesky) and per bin (Gram), 0 one per work-item"},
    {"attention.qb", "attention", K_RANGE, 1, 16, {0}, 0, 0, 1, "CPU fused attention: queries per register group"},
    {"attention.g", "attention", K_RANGE, 1, 16, {0}, 0, 0, 1, "CPU fused attention: register groups per work-item"},
    {"attention.vw", "attention", K_SET, 0, 0, {4, 8, 16, 0}, 0, 0, 1, "fused attention: accumulator vector width"},
    {"attention.vc", "attention", K_RANGE, 1, 16, {0}, 0, 0, 1,
     "CPU fused attention: accumulator vectors of a row per O += P V pass (a divisor of the row's; else the "
     "largest divisor below)"},
    {"attention.sp", "attention", K_RANGE, 1, 2, {0}, 0, 0, 1,
     "CPU fused attention: 16-key score panels per pass over p (1: qb score vectors live, 2: twice that)"},
    {"attention.bq", "attention", K_POW2, 1, 1 << 16, {0}, 1, 0, 1, "GPU fused attention: queries per work-group"},
    {"attention.bk", "attention", K_RANGE, 1, 256, {0}, 0, 0, 1, "GPU fused attention: keys per local-memory tile"},
    {"attention.tiled", "attention", K_RANGE, 0, 2, {0}, 0, 0, 1,
     "GPU fused attention, p = 32, 64, 96, 128: 1 the register-tiled kernel, 2 its second form (p = 32, 64), "
     "0 one query per work-item"},
    {"attention.maxrreg", "attention", K_RANGE, 0, 255, {0}, 0, 0, 1,
     "GPU fused attention: registers per work-item at most (-cl-nv-maxrregcount; NVIDIA's OpenCL only); 0: the "
     "compiler's choice"},
    /* CLBlast's Xgemm kernel (its names; host/core/blas.c applies them, checks the set as a whole) */
#define XG(name, kind, lo, hi, doc) {"clblast.xgemm." name, "clblast", kind, lo, hi, {1, 2, 4, 8, 16, 0}, 0, 0, 0, doc}
    XG("GEMMK", K_RANGE, 0, 1, "CLBlast Xgemm: kernel form (0: 2-D register tiles, 1: 1-D, KREG)"),
    XG("KREG", K_RANGE, 1, 64, "CLBlast Xgemm: k values per register (GEMMK 1)"),
    XG("KWG", K_RANGE, 1, 512, "CLBlast Xgemm: k per work-group tile"),
    XG("KWI", K_RANGE, 1, 64, "CLBlast Xgemm: k unroll factor"),
    XG("MDIMA", K_RANGE, 1, 1024, "CLBlast Xgemm: work-items along m loading A"),
    XG("MDIMC", K_RANGE, 1, 1024, "CLBlast Xgemm: work-items along m computing C"),
    XG("MWG", K_RANGE, 1, 2048, "CLBlast Xgemm: rows of C per work-group"),
    XG("NDIMB", K_RANGE, 1, 1024, "CLBlast Xgemm: work-items along n loading B"),
    XG("NDIMC", K_RANGE, 1, 1024, "CLBlast Xgemm: work-items along n computing C"),
    XG("NWG", K_RANGE, 1, 2048, "CLBlast Xgemm: columns of C per work-group"),
    XG("SA", K_RANGE, 0, 1, "CLBlast Xgemm: A tile in local memory"),
    XG("SB", K_RANGE, 0, 1, "CLBlast Xgemm: B tile in local memory"),
    XG("STRM", K_RANGE, 0, 1, "CLBlast Xgemm: strided access along m"),
    XG("STRN", K_RANGE, 0, 1, "CLBlast Xgemm: strided access along n"),
    XG("VWM", K_SET, 0, 0, "CLBlast Xgemm: vector width along m"),
    XG("VWN", K_SET, 0, 0, "CLBlast Xgemm: vector width along n"),
#undef XG
    {"clblast.gemm.min_indirect", "clblast", K_RANGE, 0, 1 << 20, {0}, 0, 0, 0,
     "CLBlast GEMM: m*n*k from this size cubed up takes the Xgemm kernel, below it the direct one"},
};
#define N_REG (sizeof registry / sizeof registry[0])

/* Splits "attention.p64.qb" into the registry entry and p (0 when unscoped). NULL if unknown. */
static const pdesc *lookup(const char *key, size_t *p)
{
    *p = 0;
    if (!key) return NULL;
    for (size_t i = 0; i < N_REG; i++)
        if (strcmp(registry[i].key, key) == 0) return &registry[i];
    static const char pre[] = "attention.p";
    if (strncmp(key, pre, sizeof pre - 1) != 0) return NULL;
    const char *s = key + sizeof pre - 1;
    if (!isdigit((unsigned char)*s) || *s == '0') return NULL;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end != '.' || v == 0 || v > 4096) return NULL;
    char base[48];
    snprintf(base, sizeof base, "attention%s", end);
    for (size_t i = 0; i < N_REG; i++)
        if (registry[i].attention && strcmp(registry[i].key, base) == 0) {
            *p = (size_t)v;
            return &registry[i];
        }
    return NULL;
}

/* Checks value against the key's rule and the device. 0 = fine, else writes why into `why`
 * and returns the status to report. */
static wbcl_status check_value(const wbcl_device_info *dev, const pdesc *d, size_t p, long v, char *why, size_t n)
{
    if (d->kind == K_SET) {
        /* gemm.tiled.tile may also be 0: the tile by the shape (wbcl__gemm_tiled_tile) */
        const int zero_by_shape = !strcmp(d->key, "gemm.tiled.tile");
        int ok = zero_by_shape && v == 0;
        char list[64] = "";
        size_t used = zero_by_shape ? (size_t)snprintf(list, sizeof list, "0, ") : 0;
        for (int i = 0; d->set[i]; i++) {
            ok |= d->set[i] == v;
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%ld", i ? ", " : "", d->set[i]);
            if (used >= sizeof list) used = sizeof list - 1;
        }
        if (!ok) {
            wbcl__msg(why, n, "%ld is not one of {%s}", v, list);
            return WBCL_ERROR_INVALID_ARGUMENT;
        }
    } else {
        if (v < d->lo || v > d->hi) {
            wbcl__msg(why, n, "%ld is outside %ld..%ld", v, d->lo, d->hi);
            return WBCL_ERROR_INVALID_ARGUMENT;
        }
        if (d->kind == K_POW2 && (v & (v - 1))) {
            wbcl__msg(why, n, "%ld is not a power of two", v);
            return WBCL_ERROR_INVALID_ARGUMENT;
        }
    }
    if (d->wg_limit && (size_t)v > dev->max_work_group_size) {
        wbcl__msg(why, n, "%ld exceeds the device's maximum work-group size %zu", v, dev->max_work_group_size);
        return WBCL_ERROR_DEVICE_LIMIT;
    }
    if (v && (!strcmp(d->key, "gemm.tiled.maxrreg") || !strcmp(d->key, "attention.maxrreg"))) {
        /* a register cap is a build option of NVIDIA's compiler (cl_nv_compiler_options); another
         * compiler would refuse the build. ptxas rounds it up to a multiple of 4 and to its minimum */
        if (!dev->has_nv_compiler_options) {
            wbcl__msg(why, n, "a register cap needs NVIDIA's compiler options (cl_nv_compiler_options), which this "
                              "device's compiler does not take");
            return WBCL_ERROR_UNSUPPORTED;
        }
        if (v < 16) {
            wbcl__msg(why, n, "%ld registers is below the 16 ptxas takes at least (0: no cap)", v);
            return WBCL_ERROR_INVALID_ARGUMENT;
        }
    }
    if (!strcmp(d->key, "gemm.backend") && v == WBCL_GEMM_TILED) {
        /* the tiled kernel's smallest form (64 x 64 x 8) must fit; larger tiles are checked at use */
        wbcl_status st = wbcl__gemm_tiled_limits(dev, 64, 8, 0, why, n);
        if (st) return st;
    }
    if (d->lmem_per && (uint64_t)v * (uint64_t)d->lmem_per > dev->local_mem_size) {
        wbcl__msg(why, n, "%ld needs %llu bytes of local memory, the device has %llu", v,
                  (unsigned long long)v * (unsigned long long)d->lmem_per, (unsigned long long)dev->local_mem_size);
        return WBCL_ERROR_DEVICE_LIMIT;
    }
    if (p && strcmp(d->key, "attention.bk") == 0) {
        /* the K and V tiles within half the local memory, as the default rule keeps them */
        const uint64_t need = (uint64_t)v * p * 2 * sizeof(float), lm = dev->local_mem_size ? dev->local_mem_size : 16384;
        if (need > lm / 2) {
            wbcl__msg(why, n, "%ld keys of p = %zu need %llu bytes of local memory for K and V, more than half of "
                              "the device's %llu", v, p, (unsigned long long)need, (unsigned long long)lm);
            return WBCL_ERROR_DEVICE_LIMIT;
        }
    }
    if (why && n) why[0] = 0;
    return WBCL_SUCCESS;
}

/* ---- small helpers ----------------------------------------------------------------- */
static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Appends a line to the heap string *notes (NULL: empty). */
static void add_line(char **notes, const char *line)
{
    size_t old = *notes ? strlen(*notes) : 0, add = strlen(line);
    if (add && line[add - 1] == '\n') add--; /* one newline per line */
    if (old > 16384) return;                   /* enough said */
    char *s = realloc(*notes, old + add + 2);
    if (!s) return;
    memcpy(s + old, line, add);
    s[old + add] = '\n';
    s[old + add + 1] = 0;
    *notes = s;
}

static void vnote(char **notes, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    add_line(notes, line);
}

static void note(wbcl_context *ctx, const char *fmt, ...) WBCL_PRINTF(2, 3);
static void note(wbcl_context *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(&ctx->tuning_notes, fmt, ap);
    va_end(ap);
}

void wbcl__tuning_note(wbcl_context *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(&ctx->tuning_notes, fmt, ap);
    va_end(ap);
}

/* A note about one key, kept until the table as a whole is accepted. */
static void key_note(char **pending, const char *fmt, ...) WBCL_PRINTF(2, 3);
static void key_note(char **pending, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(pending, fmt, ap);
    va_end(ap);
}

static uint32_t fnv32(const char *a, const char *b, const char *c)
{
    uint32_t h = 2166136261u;
    const char *parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        for (const unsigned char *s = (const unsigned char *)parts[i]; *s; s++) h = (h ^ *s) * 16777619u;
        h = (h ^ 0xffu) * 16777619u;
    }
    return h;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

/* ---- parsing a table ------------------------------------------------------------------ */
/* Parses `text` (NUL-terminated, modified) as a table for ctx's device. On whole-table
 * rejection returns 0 with the reason in why; else fills out[] (validated entries) and *n,
 * adding a note per dropped key, and returns 1. */
static int parse_table(wbcl_context *ctx, char *text, size_t len, const char *what, int source, wbcl__tuned *out,
                       size_t *n_out, wbcl_variant *variant, char **pending, char *why, size_t whylen)
{
    *n_out = 0;
    if (strlen(text) != len) {
        wbcl__msg(why, whylen, "it contains a NUL byte (not a text table)");
        return 0;
    }
    const char *hdr_names[5] = {"device", "vendor", "driver", "variant", "wbcl"};
    char hdr[5][256] = {"", "", "", "", ""};
    int have[5] = {0, 0, 0, 0, 0}, seen_format = 0;
    size_t n = 0, lineno = 0;
    char *save = NULL;
    /* strtok_r skips empty lines: line numbers count non-empty lines only; good enough for notes */
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        for (const unsigned char *c = (const unsigned char *)s; *c; c++)
            if (*c < 0x20 && *c != '\t') {
                wbcl__msg(why, whylen, "line %zu holds control characters (not a text table)", lineno);
                return 0;
            }
        char *eq = strchr(s, '=');
        if (!eq) {
            wbcl__msg(why, whylen, "line %zu is not 'key = value': '%.60s'", lineno, s);
            return 0;
        }
        *eq = 0;
        char *key = trim(s), *val = trim(eq + 1);
        if (!seen_format) {
            if (strcmp(key, "format") != 0 || strcmp(val, FORMAT_ID) != 0) {
                wbcl__msg(why, whylen, "the first item must be 'format = %s'", FORMAT_ID);
                return 0;
            }
            seen_format = 1;
            continue;
        }
        int h = -1;
        for (int i = 0; i < 5; i++)
            if (strcmp(key, hdr_names[i]) == 0) h = i;
        if (h >= 0) {
            if (have[h]) {
                wbcl__msg(why, whylen, "header '%s' given twice", key);
                return 0;
            }
            have[h] = 1;
            snprintf(hdr[h], sizeof hdr[h], "%s", val);
            continue;
        }
        size_t p;
        const pdesc *d = lookup(key, &p);
        if (!d) {
            key_note(pending, "%s: line %zu: unknown key '%.60s' ignored", what, lineno, key);
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(val, &end, 10);
        if (!*val || *end || errno) {
            key_note(pending, "%s: line %zu: '%s' = '%.60s' is not an integer; the default is kept", what, lineno, key, val);
            continue;
        }
        char reason[256];
        if (check_value(&ctx->info, d, p, v, reason, sizeof reason)) {
            key_note(pending, "%s: line %zu: '%s' = %s rejected: %s; the default is kept", what, lineno, key, val, reason);
            continue;
        }
        int dup = 0;
        for (size_t i = 0; i < n; i++) dup |= strcmp(out[i].key, key) == 0;
        if (dup) {
            key_note(pending, "%s: line %zu: '%s' given twice; the first value is kept", what, lineno, key);
            continue;
        }
        if (n == WBCL_TUNED_MAX) {
            key_note(pending, "%s: more than %d parameters; '%s' and the rest ignored", what, WBCL_TUNED_MAX, key);
            break;
        }
        snprintf(out[n].key, sizeof out[n].key, "%s", key);
        out[n].value = v;
        out[n].source = source;
        n++;
    }
    if (!seen_format) {
        wbcl__msg(why, whylen, "it is empty or lacks 'format = %s'", FORMAT_ID);
        return 0;
    }
    for (int i = 0; i < 4; i++)
        if (!have[i]) {
            wbcl__msg(why, whylen, "the header lacks '%s'", hdr_names[i]);
            return 0;
        }
    const char *mine[3] = {ctx->info.name, ctx->info.vendor, ctx->info.driver_version};
    for (int i = 0; i < 3; i++)
        if (strcmp(hdr[i], mine[i]) != 0) {
            wbcl__msg(why, whylen, "it is for %s '%s', this device's is '%s' (stale or another device)", hdr_names[i],
                      hdr[i], mine[i]);
            return 0;
        }
    wbcl_variant tv;
    if (wbcl_variant_parse(hdr[3], &tv) || tv == WBCL_VARIANT_AUTO) {
        wbcl__msg(why, whylen, "variant '%s' is not cpu or gpu", hdr[3]);
        return 0;
    }
    if (tv != ctx->variant) {
        wbcl__msg(why, whylen, "it is for the %s kernel variant, this context runs %s", wbcl_variant_name(tv),
                  wbcl_variant_name(ctx->variant));
        return 0;
    }
    if (have[4] && strcmp(hdr[4], WBCL_VERSION_STRING) != 0)
        key_note(pending, "%s: written by wbcl %s, this is %s (values validated as usual)", what, hdr[4], WBCL_VERSION_STRING);
    *variant = tv;
    *n_out = n;
    return 1;
}

/* Tries one table; on acceptance installs it in ctx and returns 1. */
static int try_table(wbcl_context *ctx, char *text, size_t len, const char *what, int source)
{
    wbcl__tuned *tmp = malloc(sizeof(wbcl__tuned) * WBCL_TUNED_MAX);
    if (!tmp) return 0;
    size_t n = 0;
    wbcl_variant v = ctx->variant;
    char why[512];
    char *pending = NULL;
    const int ok = parse_table(ctx, text, len, what, source, tmp, &n, &v, &pending, why, sizeof why);
    if (ok && pending) add_line(&ctx->tuning_notes, pending);
    free(pending);
    if (!ok) {
        note(ctx, "%s rejected: %s; %s", what, why,
             source == WBCL_PARAM_ENV ? "trying the next source" : source == WBCL_PARAM_CACHE ? "trying the shipped tables" : "defaults used");
        free(tmp);
        return 0;
    }
    static const char shipped[] = "shipped table ";
    char *origin = dup_str(source == WBCL_PARAM_SHIPPED && !strncmp(what, shipped, sizeof shipped - 1)
                               ? what + sizeof shipped - 1 : what);
    if (!origin) { free(tmp); return 0; }
    memcpy(ctx->tuned, tmp, n * sizeof *tmp);
    ctx->n_tuned = n;
    ctx->tuning_source = source;
    ctx->tuning_variant = v;
    free(ctx->tuning_origin);
    ctx->tuning_origin = origin;
    free(tmp);
    return 1;
}

static int try_file(wbcl_context *ctx, const char *path, int source, int missing_is_note)
{
    size_t len = 0;
    char *text = wbcl__read_file(path, &len);
    if (!text) {
        if (missing_is_note) note(ctx, "%s: cannot read it (%s); trying the next source", path, "missing or unreadable");
        return 0;
    }
    int ok = try_table(ctx, text, len, path, source);
    free(text);
    return ok;
}

/* The header lines of a shipped table, compared before parsing (so that tables of other
 * devices leave no notes). */
static int header_is(const char *text, const char *key, const char *want)
{
    const char *s = text;
    const size_t kl = strlen(key);
    while (s && *s) {
        while (*s == ' ' || *s == '\t') s++;
        if (strncmp(s, key, kl) == 0) {
            const char *v = s + kl;
            while (*v == ' ' || *v == '\t') v++;
            if (*v == '=') {
                v++;
                while (*v == ' ' || *v == '\t') v++;
                const char *e = strchr(v, '\n');
                size_t n = e ? (size_t)(e - v) : strlen(v);
                while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r')) n--;
                return n == strlen(want) && strncmp(v, want, n) == 0;
            }
        }
        s = strchr(s, '\n');
        if (s) s++;
    }
    return 0;
}

void wbcl__tuning_load(wbcl_context *ctx)
{
    ctx->n_tuned = 0;
    ctx->tuning_source = WBCL_PARAM_DEFAULT;
    ctx->tuning_variant = ctx->variant;
    const char *env = getenv("WBCL_TUNING");
    if (env && strcmp(env, "off") == 0) return;
    if (env && *env && try_file(ctx, env, WBCL_PARAM_ENV, 1)) return;
    char path[4096];
    if (wbcl_tuning_path(ctx, path, sizeof path) == WBCL_SUCCESS && try_file(ctx, path, WBCL_PARAM_CACHE, 0)) return;
    const char *name;
    const char *text;
    for (size_t i = 0; (text = wbcl__shipped_table(i, &name)) != NULL; i++) {
        if (!header_is(text, "device", ctx->info.name) || !header_is(text, "vendor", ctx->info.vendor) ||
            !header_is(text, "driver", ctx->info.driver_version) ||
            !header_is(text, "variant", wbcl_variant_name(ctx->variant)))
            continue;
        char *copy = dup_str(text);
        if (!copy) return;
        char what[160];
        snprintf(what, sizeof what, "shipped table %s", name);
        int ok = try_table(ctx, copy, strlen(copy), what, WBCL_PARAM_SHIPPED);
        free(copy);
        if (ok) return;
    }
}

void wbcl__tuning_release(wbcl_context *ctx)
{
    free(ctx->tuning_origin);
    free(ctx->tuning_notes);
    ctx->tuning_origin = ctx->tuning_notes = NULL;
}

int wbcl__tuned_value(const wbcl_context *ctx, const char *key, size_t p, long *value, int *source)
{
    char scoped[48] = "";
    if (p && strncmp(key, "attention.", 10) == 0) snprintf(scoped, sizeof scoped, "attention.p%zu.%s", p, key + 10);
    const wbcl__tuned *hit = NULL;
    for (int pass = 0; pass < 2 && !hit; pass++) {
        const char *want = pass == 0 ? scoped : key;
        if (!*want) continue;
        for (size_t i = 0; i < ctx->n_tuned; i++) {
            const wbcl__tuned *t = &ctx->tuned[i];
            if (strcmp(t->key, want) != 0) continue;
            if (t->source != WBCL_PARAM_SET && ctx->tuning_variant != ctx->variant) continue;
            hit = t;
        }
    }
    if (!hit) return 0;
    *value = hit->value;
    if (source) *source = hit->source;
    return 1;
}

/* ---- public calls ---------------------------------------------------------------------- */
const char *wbcl_param_source_name(wbcl_param_source s)
{
    static const char *const names[] = {"default", "shipped table", "cache file", "WBCL_TUNING", "set"};
    return (int)s >= 0 && (size_t)s < sizeof names / sizeof names[0] ? names[s] : NULL;
}

/* The default and in-use value of registry entry d for head dimension p (attention) on ctx. */
static void resolve(const wbcl_context *ctx, const pdesc *d, size_t p, long *value, long *dflt, int *source)
{
    *source = WBCL_PARAM_DEFAULT;
    if (d->attention) {
        int v0[WBCL_ATT_NPARAMS], v1[WBCL_ATT_NPARAMS], i = 0;
        while (i < WBCL_ATT_NPARAMS - 1 && strcmp(wbcl__att_keys[i], d->key) != 0) i++;
        wbcl__attention_params(ctx, p, 0, v0);
        wbcl__attention_params(ctx, p, 1, v1);
        *dflt = v0[i];
        *value = v1[i];
        long t; /* the source only: *value is what the op uses (an unscoped bk halved to fit p) */
        /* sp, unless tuned itself, follows the QB in use: where that moved it, it came from QB's source */
        if (!wbcl__tuned_value(ctx, d->key, p, &t, source) && !strcmp(d->key, "attention.sp") && *value != *dflt)
            wbcl__tuned_value(ctx, "attention.qb", p, &t, source);
        return;
    }
    if (!strcmp(d->family, "clblast")) { /* CLBlast's own value is the default */
        *dflt = wbcl__clblast_default(ctx, d->key);
        if (!wbcl__tuned_value(ctx, d->key, 0, value, source)) *value = *dflt;
        return;
    }
    /* params without tuning: recompute the defaults on a copy */
    wbcl_context tmp = *ctx;
    tmp.n_tuned = 0;
    wbcl__params_init(&tmp);
    const wbcl_params *a = &tmp.params, *b = &ctx->params;
    const int *pa = NULL, *pb = NULL;
    if (!strcmp(d->key, "core.wg")) pa = &a->wg_size, pb = &b->wg_size;
    else if (!strcmp(d->key, "reduce.rows")) pa = &a->reduce_rows, pb = &b->reduce_rows;
    else if (!strcmp(d->key, "reduce.wg")) pa = &a->reduce_wg, pb = &b->reduce_wg;
    else if (!strcmp(d->key, "gemm.mr")) pa = &a->gemm_mr, pb = &b->gemm_mr;
    else if (!strcmp(d->key, "gemm.nr")) pa = &a->gemm_nr, pb = &b->gemm_nr;
    else if (!strcmp(d->key, "gemm.tiled.tile")) pa = &a->gemm_tiled, pb = &b->gemm_tiled;
    else if (!strcmp(d->key, "gemm.backend")) pa = &a->gemm_backend, pb = &b->gemm_backend;
    else if (!strcmp(d->key, "gemm.tiled.tk")) pa = &a->gemm_tiled_k, pb = &b->gemm_tiled_k;
    else if (!strcmp(d->key, "gemm.tiled.db")) pa = &a->gemm_tiled_db, pb = &b->gemm_tiled_db;
    else if (!strcmp(d->key, "gemm.tiled.v4")) pa = &a->gemm_tiled_v4, pb = &b->gemm_tiled_v4;
    else if (!strcmp(d->key, "gemm.tiled.maxrreg")) pa = &a->gemm_tiled_maxrreg, pb = &b->gemm_tiled_maxrreg;
    else if (!strcmp(d->key, "circulant.wg")) pa = &a->circulant_wg, pb = &b->circulant_wg;
    else pa = &a->gemm_a_block_kib, pb = &b->gemm_a_block_kib;
    *dflt = *pa;
    *value = *pb;
    if (pb == &b->gemm_backend) *value = ctx->gemm_backend; /* an explicit choice wins over the table */
    long t;
    wbcl__tuned_value(ctx, d->key, 0, &t, source);
}

int wbcl_context_param(const wbcl_context *ctx, size_t i, wbcl_param_info *out)
{
    if (!ctx || !out) return 0;
    const pdesc *d;
    size_t p = 0;
    const char *key;
    if (i < N_REG) {
        d = &registry[i];
        key = d->key;
        p = d->attention ? REF_P : 0;
    } else {
        size_t k = i - N_REG, seen = 0;
        const wbcl__tuned *t = NULL;
        for (size_t j = 0; j < ctx->n_tuned; j++) {
            size_t pj;
            const pdesc *dj = lookup(ctx->tuned[j].key, &pj);
            if (dj && pj && seen++ == k) { t = &ctx->tuned[j]; d = dj; p = pj; break; }
        }
        if (!t) return 0;
        key = t->key;
    }
    int src;
    resolve(ctx, d, p, &out->value, &out->default_value, &src);
    out->key = key;
    out->family = d->family;
    out->p = d->attention ? p : 0;
    out->source = (wbcl_param_source)src;
    out->origin = src == WBCL_PARAM_DEFAULT || src == WBCL_PARAM_SET || !ctx->tuning_origin ? "" : ctx->tuning_origin;
    out->doc = d->doc;
    return 1;
}

wbcl_status wbcl_context_param_get(const wbcl_context *ctx, const char *key, long *value, wbcl_param_source *source)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t p;
    const pdesc *d = lookup(key, &p);
    if (!d) return wbcl__fail((wbcl_context *)ctx, WBCL_ERROR_INVALID_ARGUMENT, "unknown kernel parameter '%s'",
                              key ? key : "(null)");
    if (d->attention && !p) p = REF_P;
    long v, dv;
    int src;
    resolve(ctx, d, p, &v, &dv, &src);
    if (value) *value = v;
    if (source) *source = (wbcl_param_source)src;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_context_set_param(wbcl_context *ctx, const char *key, long value)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t p;
    const pdesc *d = lookup(key, &p);
    if (!d) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_context_set_param: unknown key '%s'", key ? key : "(null)");
    char why[256];
    wbcl_status st = check_value(&ctx->info, d, p, value, why, sizeof why);
    if (st) return wbcl__fail(ctx, st, "wbcl_context_set_param: '%s' = %ld on '%s': %s", key, value, ctx->info.name, why);
    size_t i = 0;
    while (i < ctx->n_tuned && strcmp(ctx->tuned[i].key, key) != 0) i++;
    if (i == ctx->n_tuned) {
        if (i == WBCL_TUNED_MAX)
            return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_context_set_param: more than %d parameters", WBCL_TUNED_MAX);
        snprintf(ctx->tuned[i].key, sizeof ctx->tuned[i].key, "%s", key);
        ctx->n_tuned++;
    }
    ctx->tuned[i].value = value;
    ctx->tuned[i].source = WBCL_PARAM_SET;
    ctx->clblast_noted = 0; /* a new set of clblast.* keys may be noted again */
    wbcl__params_init(ctx);
    return WBCL_SUCCESS;
}

wbcl_status wbcl_context_reset_params(wbcl_context *ctx)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    ctx->n_tuned = 0;
    ctx->clblast_noted = 0;
    ctx->tuning_source = WBCL_PARAM_DEFAULT;
    free(ctx->tuning_origin);
    ctx->tuning_origin = NULL;
    wbcl__params_init(ctx);
    return WBCL_SUCCESS;
}

const char *wbcl_context_tuning_notes(const wbcl_context *ctx)
{
    return ctx && ctx->tuning_notes ? ctx->tuning_notes : "";
}

wbcl_param_source wbcl_context_tuning_source(const wbcl_context *ctx, const char **origin)
{
    if (origin) *origin = ctx && ctx->tuning_origin ? ctx->tuning_origin : "";
    return ctx ? (wbcl_param_source)ctx->tuning_source : WBCL_PARAM_DEFAULT;
}

wbcl_status wbcl_tuning_path(const wbcl_context *ctx, char *buf, size_t len)
{
    if (!ctx || !buf || !len) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!ctx->cache_dir) {
        buf[0] = 0;
        return wbcl__fail((wbcl_context *)ctx, WBCL_ERROR_UNSUPPORTED, "no cache directory (WBCL_CACHE_DIR=off or no HOME)");
    }
    char name[64];
    size_t j = 0;
    for (const char *s = ctx->info.name; *s && j < sizeof name - 1; s++) {
        const unsigned char c = (unsigned char)*s;
        name[j++] = isalnum(c) || c == '-' || c == '_' || c == '.' ? (char)c : '_';
    }
    name[j] = 0;
    int n = snprintf(buf, len, "%s/tuning/%s-%08x.txt", ctx->cache_dir, j ? name : "device",
                     (unsigned)fnv32(ctx->info.name, ctx->info.vendor, ctx->info.driver_version));
    if (n < 0 || (size_t)n >= len)
        return wbcl__fail((wbcl_context *)ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_tuning_path: buffer too small");
    return WBCL_SUCCESS;
}

wbcl_status wbcl_context_save_params(wbcl_context *ctx, const char *path, const char *comment)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!path || !*path) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_context_save_params: no path");
    size_t cap = 4096 + (comment ? 2 * strlen(comment) : 0) + ctx->n_tuned * 80, n = 0;
    char *text = malloc(cap);
    if (!text) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
#define PUT(...) n += (size_t)snprintf(text + n, cap - n, __VA_ARGS__)
    PUT("# wbcl kernel parameter table (include/wbcl/tuning.h)\n");
    if (comment)
        for (const char *s = comment; *s;) {
            const char *e = strchr(s, '\n');
            size_t l = e ? (size_t)(e - s) : strlen(s);
            PUT("# %.*s\n", (int)l, s);
            s += l + (e ? 1 : 0);
        }
    PUT("format = %s\ndevice = %s\nvendor = %s\ndriver = %s\nvariant = %s\nwbcl = %s\n", FORMAT_ID, ctx->info.name,
        ctx->info.vendor, ctx->info.driver_version, wbcl_variant_name(ctx->variant), WBCL_VERSION_STRING);
    for (size_t i = 0; i < ctx->n_tuned; i++) {
        const wbcl__tuned *t = &ctx->tuned[i];
        if (t->source != WBCL_PARAM_SET && ctx->tuning_variant != ctx->variant) continue;
        PUT("%s = %ld\n", t->key, t->value);
    }
#undef PUT
    if (n >= cap) { free(text); return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "parameter table too long"); }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    int rc = 0;
    if (slash && slash != dir) {
        *slash = 0;
        rc = wbcl__mkdir_p(dir);
    }
    if (!rc) rc = wbcl__write_file_atomic(path, text, n);
    free(text);
    if (rc) return wbcl__fail(ctx, WBCL_ERROR_IO, "cannot write the parameter table '%s'", path);
    return WBCL_SUCCESS;
}
