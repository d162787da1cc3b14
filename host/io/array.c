/* wbcl — host arrays, element conversion, and the helpers the file formats share. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io_internal.h"

/* ---- shared helpers ------------------------------------------------------------------------- */

void wbcl_io_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (n < 0)
        err[0] = '\0';
    for (char *p = err; *p; ++p)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

const char *wbcl_io_quote(char *buf, size_t bufsize, const char *s, size_t len)
{
    if (!buf || bufsize < 8)
        return "";
    size_t room = bufsize - 4; /* keep space for "..." and NUL */
    size_t o = 0, i = 0;
    for (; i < len && o < room; ++i) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (i < len) {
        /* do not end inside a UTF-8 sequence */
        while (o > 0 && ((unsigned char)buf[o - 1] & 0xC0) == 0x80)
            --o;
        if (o > 0 && ((unsigned char)buf[o - 1] & 0xC0) == 0xC0)
            --o;
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

int wbcl_io_host_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void wbcl_io_swap(void *data, size_t n, size_t esize)
{
    unsigned char *p = data;
    if (esize < 2)
        return;
    for (size_t i = 0; i < n; ++i, p += esize)
        for (size_t j = 0; j < esize / 2; ++j) {
            unsigned char t = p[j];
            p[j] = p[esize - 1 - j];
            p[esize - 1 - j] = t;
        }
}

int wbcl_io_write_le(FILE *f, const void *data, size_t n, size_t esize)
{
    if (n == 0 || esize == 0)
        return 0;
    if (wbcl_io_host_le() || esize == 1)
        return fwrite(data, esize, n, f) == n ? 0 : -1;
    unsigned char tmp[4096];
    size_t per = sizeof tmp / esize;
    const unsigned char *p = data;
    while (n > 0) {
        size_t k = n < per ? n : per;
        memcpy(tmp, p, k * esize);
        wbcl_io_swap(tmp, k, esize);
        if (fwrite(tmp, esize, k, f) != k)
            return -1;
        p += k * esize;
        n -= k;
    }
    return 0;
}

int wbcl_io_mul(size_t a, size_t b, size_t *r)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *r = a * b;
    return 1;
}

static int elem_valid(wbcl_elem e)
{
    return (int)e >= (int)WBCL_ELEM_F32 && (int)e <= (int)WBCL_ELEM_I64;
}

wbcl_status wbcl_io_check_array(const wbcl_array *a, const char *who, const char *what,
                                char *err, size_t errlen)
{
    if (!a) {
        wbcl_io_errf(err, errlen, "%s: %s: array is NULL", who, what);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    if (!elem_valid(a->elem)) {
        wbcl_io_errf(err, errlen, "%s: %s: invalid element type %d", who, what, (int)a->elem);
        return WBCL_ERROR_DTYPE;
    }
    if (a->ndim < 0 || a->ndim > WBCL_ARRAY_MAX_DIMS) {
        wbcl_io_errf(err, errlen, "%s: %s: ndim %d outside 0..%d", who, what, a->ndim,
                     WBCL_ARRAY_MAX_DIMS);
        return WBCL_ERROR_SHAPE;
    }
    size_t numel = 1, nbytes;
    for (int i = 0; i < a->ndim; ++i)
        if (!wbcl_io_mul(numel, a->shape[i], &numel)) {
            wbcl_io_errf(err, errlen, "%s: %s: element count overflows", who, what);
            return WBCL_ERROR_SHAPE;
        }
    if (!wbcl_io_mul(numel, wbcl_elem_size(a->elem), &nbytes)) {
        wbcl_io_errf(err, errlen, "%s: %s: byte count overflows", who, what);
        return WBCL_ERROR_SHAPE;
    }
    if (nbytes != a->nbytes) {
        wbcl_io_errf(err, errlen, "%s: %s: nbytes %zu does not match shape (%zu bytes)", who, what,
                     a->nbytes, nbytes);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    if (nbytes > 0 && !a->data) {
        wbcl_io_errf(err, errlen, "%s: %s: data is NULL", who, what);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl_io_atomic_write(const char *path, wbcl_io_writer_fn fn, void *ctx, char *err,
                                 size_t errlen)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0; /* includes the '/' */
    size_t cap = dirlen + 64;
    char *tmp = malloc(cap);
    if (!tmp) {
        wbcl_io_errf(err, errlen, "%s: out of memory", path);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    memcpy(tmp, path, dirlen);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long seed = (unsigned long long)ts.tv_nsec * 6364136223846793005ULL ^
                              (unsigned long long)ts.tv_sec ^ (unsigned long long)(uintptr_t)&ts;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        snprintf(tmp + dirlen, cap - dirlen, ".wbcl-tmp-%ld-%016llx", (long)getpid(), seed);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int e = errno;
        wbcl_io_errf(err, errlen, "%s: cannot create temporary file in its directory: %s", path,
                     strerror(e));
        free(tmp);
        return WBCL_ERROR_IO;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        wbcl_io_errf(err, errlen, "%s: cannot write: %s", path, strerror(e));
        return WBCL_ERROR_IO;
    }
    errno = 0;
    int rc = fn(f, ctx);
    int e = errno;
    if (rc == 0 && ferror(f)) {
        rc = -1;
        e = errno;
    }
    if (fclose(f) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        free(tmp);
        wbcl_io_errf(err, errlen, "%s: write failed: %s", path, e ? strerror(e) : "I/O error");
        return WBCL_ERROR_IO;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        free(tmp);
        wbcl_io_errf(err, errlen, "%s: cannot rename temporary file into place: %s", path,
                     strerror(e));
        return WBCL_ERROR_IO;
    }
    free(tmp);
    return WBCL_SUCCESS;
}

/* ---- arrays --------------------------------------------------------------------------------- */

size_t wbcl_elem_size(wbcl_elem e)
{
    switch (e) {
    case WBCL_ELEM_F32: return 4;
    case WBCL_ELEM_F64: return 8;
    case WBCL_ELEM_F16: return 2;
    case WBCL_ELEM_BF16: return 2;
    case WBCL_ELEM_I32: return 4;
    case WBCL_ELEM_I64: return 8;
    }
    return 0;
}

const char *wbcl_elem_name(wbcl_elem e)
{
    switch (e) {
    case WBCL_ELEM_F32: return "F32";
    case WBCL_ELEM_F64: return "F64";
    case WBCL_ELEM_F16: return "F16";
    case WBCL_ELEM_BF16: return "BF16";
    case WBCL_ELEM_I32: return "I32";
    case WBCL_ELEM_I64: return "I64";
    }
    return "invalid";
}

wbcl_status wbcl_array_alloc(wbcl_array *a, wbcl_elem elem, int ndim, const size_t *shape,
                             char *err, size_t errlen)
{
    if (!a) {
        wbcl_io_errf(err, errlen, "wbcl_array_alloc: array is NULL");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    memset(a, 0, sizeof *a);
    if (!elem_valid(elem)) {
        wbcl_io_errf(err, errlen, "wbcl_array_alloc: invalid element type %d", (int)elem);
        return WBCL_ERROR_DTYPE;
    }
    if (ndim < 0 || ndim > WBCL_ARRAY_MAX_DIMS) {
        wbcl_io_errf(err, errlen, "wbcl_array_alloc: ndim %d outside 0..%d", ndim,
                     WBCL_ARRAY_MAX_DIMS);
        return WBCL_ERROR_SHAPE;
    }
    if (ndim > 0 && !shape) {
        wbcl_io_errf(err, errlen, "wbcl_array_alloc: shape is NULL");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    size_t numel = 1, nbytes;
    for (int i = 0; i < ndim; ++i)
        if (!wbcl_io_mul(numel, shape[i], &numel)) {
            wbcl_io_errf(err, errlen, "wbcl_array_alloc: element count overflows size_t");
            return WBCL_ERROR_SHAPE;
        }
    if (!wbcl_io_mul(numel, wbcl_elem_size(elem), &nbytes)) {
        wbcl_io_errf(err, errlen, "wbcl_array_alloc: byte count overflows size_t");
        return WBCL_ERROR_SHAPE;
    }
    void *data = calloc(nbytes ? nbytes : 1, 1);
    if (!data) {
        wbcl_io_errf(err, errlen, "wbcl_array_alloc: cannot allocate %zu bytes", nbytes);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    a->elem = elem;
    a->ndim = ndim;
    for (int i = 0; i < ndim; ++i)
        a->shape[i] = shape[i];
    a->data = data;
    a->nbytes = nbytes;
    return WBCL_SUCCESS;
}

void wbcl_array_free(wbcl_array *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

size_t wbcl_array_numel(const wbcl_array *a)
{
    if (!a || a->ndim < 0 || a->ndim > WBCL_ARRAY_MAX_DIMS)
        return 0;
    size_t n = 1;
    for (int i = 0; i < a->ndim; ++i)
        if (!wbcl_io_mul(n, a->shape[i], &n))
            return 0;
    return n;
}

float wbcl_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static float f64_to_f32(double x)
{
    /* Halfway between FLT_MAX and 2^128: at or beyond it, round-to-nearest gives infinity. Done
     * explicitly because a double outside float's range converts with undefined behaviour. */
    const double lim = (double)FLT_MAX + 0x1p103;
    if (x >= lim)
        return INFINITY;
    if (x <= -lim)
        return -INFINITY;
    return (float)x;
}

wbcl_status wbcl_array_to_f32(const wbcl_array *a, float **out, char *err, size_t errlen)
{
    if (!out) {
        wbcl_io_errf(err, errlen, "wbcl_array_to_f32: out is NULL");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    *out = NULL;
    wbcl_status st = wbcl_io_check_array(a, "wbcl_array_to_f32", "input", err, errlen);
    if (st)
        return st;
    size_t n = wbcl_array_numel(a), bytes;
    if (!wbcl_io_mul(n, sizeof(float), &bytes)) { /* cannot happen: numel*esize fits */
        wbcl_io_errf(err, errlen, "wbcl_array_to_f32: byte count overflows size_t");
        return WBCL_ERROR_SHAPE;
    }
    float *f = malloc(bytes ? bytes : 1);
    if (!f) {
        wbcl_io_errf(err, errlen, "wbcl_array_to_f32: cannot allocate %zu bytes", bytes);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    const unsigned char *p = a->data;
    switch (a->elem) {
    case WBCL_ELEM_F32:
        if (n)
            memcpy(f, p, bytes);
        break;
    case WBCL_ELEM_F64:
        for (size_t i = 0; i < n; ++i) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            f[i] = f64_to_f32(d);
        }
        break;
    case WBCL_ELEM_F16:
    case WBCL_ELEM_BF16:
        for (size_t i = 0; i < n; ++i) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            f[i] = a->elem == WBCL_ELEM_F16 ? wbcl_f16_to_f32(h) : wbcl_bf16_to_f32(h);
        }
        break;
    case WBCL_ELEM_I32:
        for (size_t i = 0; i < n; ++i) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            f[i] = (float)v;
        }
        break;
    case WBCL_ELEM_I64:
        for (size_t i = 0; i < n; ++i) {
            int64_t v;
            memcpy(&v, p + 8 * i, 8);
            f[i] = (float)v;
        }
        break;
    }
    *out = f;
    return WBCL_SUCCESS;
}
