/* wbcl — NumPy .npy reader and writer.
 *
 * Layout: "\x93NUMPY", major, minor, header length (u16 LE for 1.0, u32 LE for 2.0/3.0), then a
 * Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and a newline, then the raw C-order data. The dict parser accepts exactly the literal
 * forms numpy writes and reasonable variations (key order, spacing, quotes, trailing commas). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io_internal.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER (1u << 20) /* generous: a legal header here is < 300 bytes */

typedef struct npy_header {
    wbcl_elem elem;
    int ndim;
    size_t shape[WBCL_ARRAY_MAX_DIMS];
} npy_header;

/* ---- prefix --------------------------------------------------------------------------------- */

/* Checks magic and version in the first plen (<= 12) bytes of a total-byte file; returns where
 * the header dict starts and its length. */
static wbcl_status parse_prefix(const unsigned char *p, size_t plen, uint64_t total,
                                const char *name, size_t *hstart, size_t *hlen, char *err,
                                size_t errlen)
{
    size_t cmp = plen < NPY_MAGIC_LEN ? plen : NPY_MAGIC_LEN;
    if (memcmp(p, NPY_MAGIC, cmp) != 0) {
        wbcl_io_errf(err, errlen, "%s: not a .npy file (bad magic)", name);
        return WBCL_ERROR_FORMAT;
    }
    if (total < 10) {
        wbcl_io_errf(err, errlen, "%s: truncated .npy file (%llu bytes)", name,
                     (unsigned long long)total);
        return WBCL_ERROR_FORMAT;
    }
    unsigned major = p[6], minor = p[7];
    uint64_t start, len;
    if (major == 1 && minor == 0) {
        start = 10;
        len = (uint64_t)p[8] | (uint64_t)p[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (total < 12) {
            wbcl_io_errf(err, errlen, "%s: truncated .npy file (%llu bytes)", name,
                         (unsigned long long)total);
            return WBCL_ERROR_FORMAT;
        }
        start = 12;
        len = (uint64_t)p[8] | (uint64_t)p[9] << 8 | (uint64_t)p[10] << 16 |
              (uint64_t)p[11] << 24;
    } else {
        wbcl_io_errf(err, errlen, "%s: unsupported .npy format version %u.%u", name, major,
                     minor);
        return WBCL_ERROR_FORMAT;
    }
    if (len > total - start) {
        wbcl_io_errf(err, errlen,
                     "%s: header length %llu extends beyond the end of the file (%llu bytes)",
                     name, (unsigned long long)len, (unsigned long long)total);
        return WBCL_ERROR_FORMAT;
    }
    if (len > NPY_MAX_HEADER) {
        wbcl_io_errf(err, errlen, "%s: header length %llu exceeds the limit of %u bytes", name,
                     (unsigned long long)len, NPY_MAX_HEADER);
        return WBCL_ERROR_FORMAT;
    }
    *hstart = (size_t)start;
    *hlen = (size_t)len;
    return WBCL_SUCCESS;
}

/* ---- header dict ---------------------------------------------------------------------------- */

typedef struct cursor {
    const char *s;
    size_t n, i;
    const char *name; /* file, for messages */
    char *err;
    size_t errlen;
} cursor;

static int peek(const cursor *c) { return c->i < c->n ? (unsigned char)c->s[c->i] : -1; }

static void skip_ws(cursor *c)
{
    while (c->i < c->n &&
           (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        ++c->i;
}

static wbcl_status bad(cursor *c, const char *what)
{
    wbcl_io_errf(c->err, c->errlen, "%s: malformed .npy header at byte %zu: %s", c->name, c->i,
                 what);
    return WBCL_ERROR_FORMAT;
}

static wbcl_status expect(cursor *c, char ch, const char *what)
{
    if (peek(c) != (unsigned char)ch)
        return bad(c, what);
    ++c->i;
    return WBCL_SUCCESS;
}

/* A quoted string without escapes: '...' or "...". */
static wbcl_status parse_str(cursor *c, const char **str, size_t *len, const char *what)
{
    int q = peek(c);
    if (q != '\'' && q != '"')
        return bad(c, what);
    size_t b = ++c->i;
    while (c->i < c->n && c->s[c->i] != q) {
        char ch = c->s[c->i];
        if (ch == '\\' || ch == '\n' || ch == '\r' || ch == '\0')
            return bad(c, "unsupported character in string");
        ++c->i;
    }
    if (c->i >= c->n)
        return bad(c, "unterminated string");
    *str = c->s + b;
    *len = c->i - b;
    ++c->i;
    return WBCL_SUCCESS;
}

static int is_ident(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
}

/* Matches the bare word w (e.g. True) followed by a non-identifier character. */
static int match_word(cursor *c, const char *w)
{
    size_t k = strlen(w);
    if (c->n - c->i < k || memcmp(c->s + c->i, w, k) != 0)
        return 0;
    if (c->i + k < c->n && is_ident((unsigned char)c->s[c->i + k]))
        return 0;
    c->i += k;
    return 1;
}

static int str_eq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static wbcl_status parse_descr(cursor *c, npy_header *h)
{
    int ch = peek(c);
    if (ch == '[' || ch == '(' || ch == '{') {
        wbcl_io_errf(c->err, c->errlen, "%s: structured dtypes are not supported", c->name);
        return WBCL_ERROR_DTYPE;
    }
    const char *s;
    size_t n;
    wbcl_status st = parse_str(c, &s, &n, "expected a dtype string for 'descr'");
    if (st)
        return st;
    static const struct {
        const char *descr;
        wbcl_elem elem;
    } known[] = {{"<f4", WBCL_ELEM_F32}, {"<f8", WBCL_ELEM_F64}, {"<f2", WBCL_ELEM_F16},
                 {"<i4", WBCL_ELEM_I32}, {"<i8", WBCL_ELEM_I64}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; ++k)
        if (str_eq(s, n, known[k].descr)) {
            h->elem = known[k].elem;
            return WBCL_SUCCESS;
        }
    char q[80];
    wbcl_io_quote(q, sizeof q, s, n);
    if (n > 0 && s[0] == '>')
        wbcl_io_errf(c->err, c->errlen,
                     "%s: big-endian dtype '%s' is not supported (use little-endian '<')",
                     c->name, q);
    else
        wbcl_io_errf(c->err, c->errlen,
                     "%s: unsupported dtype '%s' (supported: <f4 <f8 <f2 <i4 <i8)", c->name, q);
    return WBCL_ERROR_DTYPE;
}

static wbcl_status parse_dim(cursor *c, size_t *v)
{
    if (peek(c) == '-') {
        wbcl_io_errf(c->err, c->errlen, "%s: negative dimension in shape", c->name);
        return WBCL_ERROR_SHAPE;
    }
    int ch = peek(c);
    if (ch < '0' || ch > '9')
        return bad(c, "expected a non-negative integer in 'shape'");
    size_t x = 0;
    while ((ch = peek(c)) >= '0' && ch <= '9') {
        size_t d = (size_t)(ch - '0');
        if (x > (SIZE_MAX - d) / 10) {
            wbcl_io_errf(c->err, c->errlen, "%s: dimension in shape overflows size_t", c->name);
            return WBCL_ERROR_SHAPE;
        }
        x = x * 10 + d;
        ++c->i;
    }
    if (peek(c) == 'L') /* Python 2 long literal */
        ++c->i;
    if (is_ident(peek(c)))
        return bad(c, "bad integer in 'shape'");
    *v = x;
    return WBCL_SUCCESS;
}

static wbcl_status parse_shape(cursor *c, npy_header *h)
{
    wbcl_status st = expect(c, '(', "expected a tuple for 'shape'");
    if (st)
        return st;
    skip_ws(c);
    int nd = 0;
    if (peek(c) == ')') {
        ++c->i;
        h->ndim = 0;
        return WBCL_SUCCESS;
    }
    for (;;) {
        size_t v = 0;
        if ((st = parse_dim(c, &v)))
            return st;
        if (nd == WBCL_ARRAY_MAX_DIMS) {
            wbcl_io_errf(c->err, c->errlen, "%s: shape has more than %d dimensions", c->name,
                         WBCL_ARRAY_MAX_DIMS);
            return WBCL_ERROR_SHAPE;
        }
        h->shape[nd++] = v;
        skip_ws(c);
        if (peek(c) == ',') {
            ++c->i;
            skip_ws(c);
            if (peek(c) == ')') {
                ++c->i;
                break;
            }
            continue;
        }
        if (peek(c) == ')') {
            if (nd == 1) /* "(3)" is an int in Python, not a tuple */
                return bad(c, "one-element shape tuple needs a trailing comma");
            ++c->i;
            break;
        }
        return bad(c, "expected ',' or ')' in 'shape'");
    }
    h->ndim = nd;
    return WBCL_SUCCESS;
}

static wbcl_status parse_dict(const char *s, size_t n, const char *name, npy_header *h, char *err,
                              size_t errlen)
{
    cursor cc = {s, n, 0, name, err, errlen}, *c = &cc;
    int have_descr = 0, have_order = 0, have_shape = 0;
    wbcl_status st;
    skip_ws(c);
    if ((st = expect(c, '{', "expected '{'")))
        return st;
    for (;;) {
        skip_ws(c);
        if (peek(c) == '}') {
            ++c->i;
            break;
        }
        const char *k;
        size_t kn;
        if ((st = parse_str(c, &k, &kn, "expected a quoted key or '}'")))
            return st;
        skip_ws(c);
        if ((st = expect(c, ':', "expected ':' after key")))
            return st;
        skip_ws(c);
        int *seen;
        if (str_eq(k, kn, "descr")) {
            seen = &have_descr;
            if (*seen)
                goto dup;
            st = parse_descr(c, h);
        } else if (str_eq(k, kn, "fortran_order")) {
            seen = &have_order;
            if (*seen)
                goto dup;
            if (match_word(c, "True")) {
                wbcl_io_errf(err, errlen, "%s: Fortran-order arrays are not supported", name);
                return WBCL_ERROR_FORMAT;
            }
            if (!match_word(c, "False"))
                return bad(c, "expected True or False for 'fortran_order'");
        } else if (str_eq(k, kn, "shape")) {
            seen = &have_shape;
            if (*seen)
                goto dup;
            st = parse_shape(c, h);
        } else {
            char q[80];
            wbcl_io_errf(err, errlen, "%s: unexpected key '%s' in .npy header", name,
                         wbcl_io_quote(q, sizeof q, k, kn));
            return WBCL_ERROR_FORMAT;
        }
        if (st)
            return st;
        *seen = 1;
        skip_ws(c);
        if (peek(c) == ',') {
            ++c->i;
            continue;
        }
        if (peek(c) != '}')
            return bad(c, "expected ',' or '}'");
        continue;
    dup: {
        char q[80];
        wbcl_io_errf(err, errlen, "%s: duplicate key '%s' in .npy header", name,
                     wbcl_io_quote(q, sizeof q, k, kn));
        return WBCL_ERROR_FORMAT;
    }
    }
    skip_ws(c);
    if (c->i != c->n)
        return bad(c, "unexpected data after the header dict");
    const char *missing = !have_descr ? "descr" : !have_order ? "fortran_order"
                        : !have_shape ? "shape" : NULL;
    if (missing) {
        wbcl_io_errf(err, errlen, "%s: .npy header lacks the key '%s'", name, missing);
        return WBCL_ERROR_FORMAT;
    }
    return WBCL_SUCCESS;
}

/* Byte count of the data the header describes, checked against what the file holds. */
static wbcl_status data_size(const npy_header *h, uint64_t avail, const char *name,
                             size_t *nbytes, char *err, size_t errlen)
{
    size_t numel = 1;
    for (int i = 0; i < h->ndim; ++i)
        if (!wbcl_io_mul(numel, h->shape[i], &numel)) {
            wbcl_io_errf(err, errlen, "%s: shape's element count overflows size_t", name);
            return WBCL_ERROR_SHAPE;
        }
    if (!wbcl_io_mul(numel, wbcl_elem_size(h->elem), nbytes)) {
        wbcl_io_errf(err, errlen, "%s: shape's byte count overflows size_t", name);
        return WBCL_ERROR_SHAPE;
    }
    if ((uint64_t)*nbytes > avail) {
        wbcl_io_errf(err, errlen,
                     "%s: truncated data: shape needs %zu bytes, file holds %llu after the header",
                     name, *nbytes, (unsigned long long)avail);
        return WBCL_ERROR_FORMAT;
    }
    if ((uint64_t)*nbytes < avail) {
        wbcl_io_errf(err, errlen, "%s: %llu unexpected bytes after the data", name,
                     (unsigned long long)(avail - *nbytes));
        return WBCL_ERROR_FORMAT;
    }
    return WBCL_SUCCESS;
}

static wbcl_status make_array(const npy_header *h, const char *name, wbcl_array *out, char *err,
                              size_t errlen)
{
    wbcl_status st = wbcl_array_alloc(out, h->elem, h->ndim, h->shape, NULL, 0);
    if (st == WBCL_ERROR_OUT_OF_MEMORY)
        wbcl_io_errf(err, errlen, "%s: out of memory for the array data", name);
    else if (st)
        wbcl_io_errf(err, errlen, "%s: invalid array shape", name);
    return st;
}

/* ---- readers -------------------------------------------------------------------------------- */

wbcl_status wbcl_npy_read_mem(const void *buf, size_t len, const char *name_for_messages,
                              wbcl_array *out, char *err, size_t errlen)
{
    const char *name = WBCL_IO_NAME(name_for_messages);
    if (out)
        memset(out, 0, sizeof *out);
    if (!out || (!buf && len > 0)) {
        wbcl_io_errf(err, errlen, "%s: NULL argument to wbcl_npy_read_mem", name);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    const unsigned char *p = buf;
    size_t hstart, hlen, nbytes;
    npy_header h;
    memset(&h, 0, sizeof h);
    wbcl_status st = parse_prefix(p ? p : (const unsigned char *)"", len < 12 ? len : 12, len,
                                  name, &hstart, &hlen, err, errlen);
    if (st)
        return st;
    if ((st = parse_dict((const char *)p + hstart, hlen, name, &h, err, errlen)))
        return st;
    size_t off = hstart + hlen;
    if ((st = data_size(&h, len - off, name, &nbytes, err, errlen)))
        return st;
    if ((st = make_array(&h, name, out, err, errlen)))
        return st;
    if (nbytes)
        memcpy(out->data, p + off, nbytes);
    if (!wbcl_io_host_le())
        wbcl_io_swap(out->data, nbytes / wbcl_elem_size(h.elem), wbcl_elem_size(h.elem));
    return WBCL_SUCCESS;
}

wbcl_status wbcl_npy_read(const char *path, wbcl_array *out, char *err, size_t errlen)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out) {
        wbcl_io_errf(err, errlen, "%s: NULL argument to wbcl_npy_read", path ? path : "(null)");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        wbcl_io_errf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        return WBCL_ERROR_IO;
    }
    wbcl_status st;
    char *hbuf = NULL;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 0) {
        wbcl_io_errf(err, errlen, "%s: not a regular file", path);
        st = WBCL_ERROR_IO;
        goto done;
    }
    uint64_t total = (uint64_t)sb.st_size;
    unsigned char prefix[12];
    size_t plen = total < 12 ? (size_t)total : 12;
    if (fread(prefix, 1, plen, f) != plen) {
        wbcl_io_errf(err, errlen, "%s: read error", path);
        st = WBCL_ERROR_IO;
        goto done;
    }
    size_t hstart, hlen, nbytes;
    npy_header h;
    memset(&h, 0, sizeof h);
    if ((st = parse_prefix(prefix, plen, total, path, &hstart, &hlen, err, errlen)))
        goto done;
    hbuf = malloc(hlen ? hlen : 1);
    if (!hbuf) {
        wbcl_io_errf(err, errlen, "%s: out of memory", path);
        st = WBCL_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    if (fseek(f, (long)hstart, SEEK_SET) != 0 || fread(hbuf, 1, hlen, f) != hlen) {
        wbcl_io_errf(err, errlen, "%s: read error in the header", path);
        st = WBCL_ERROR_IO;
        goto done;
    }
    if ((st = parse_dict(hbuf, hlen, path, &h, err, errlen)))
        goto done;
    if ((st = data_size(&h, total - (uint64_t)(hstart + hlen), path, &nbytes, err, errlen)))
        goto done;
    if ((st = make_array(&h, path, out, err, errlen)))
        goto done;
    if (nbytes && fread(out->data, 1, nbytes, f) != nbytes) {
        wbcl_io_errf(err, errlen, "%s: read error in the data (file changed while reading?)",
                     path);
        wbcl_array_free(out);
        st = WBCL_ERROR_IO;
        goto done;
    }
    if (!wbcl_io_host_le())
        wbcl_io_swap(out->data, nbytes / wbcl_elem_size(h.elem), wbcl_elem_size(h.elem));
done:
    free(hbuf);
    fclose(f);
    return st;
}

/* ---- writer --------------------------------------------------------------------------------- */

typedef struct npy_write_ctx {
    const char *header;
    size_t header_len;
    const wbcl_array *a;
} npy_write_ctx;

static int npy_write_body(FILE *f, void *vctx)
{
    const npy_write_ctx *ctx = vctx;
    if (fwrite(ctx->header, 1, ctx->header_len, f) != ctx->header_len)
        return -1;
    size_t es = wbcl_elem_size(ctx->a->elem);
    return wbcl_io_write_le(f, ctx->a->data, ctx->a->nbytes / es, es);
}

wbcl_status wbcl_npy_write(const char *path, const wbcl_array *a, char *err, size_t errlen)
{
    if (!path) {
        wbcl_io_errf(err, errlen, "wbcl_npy_write: path is NULL");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    wbcl_status st = wbcl_io_check_array(a, path, "array to write", err, errlen);
    if (st)
        return st;
    const char *descr;
    switch (a->elem) {
    case WBCL_ELEM_F32: descr = "<f4"; break;
    case WBCL_ELEM_F64: descr = "<f8"; break;
    case WBCL_ELEM_I32: descr = "<i4"; break;
    case WBCL_ELEM_I64: descr = "<i8"; break;
    default:
        wbcl_io_errf(err, errlen, "%s: .npy writer does not support element type %s", path,
                     wbcl_elem_name(a->elem));
        return WBCL_ERROR_DTYPE;
    }
    /* 10-byte prefix + dict, padded with spaces and '\n' to a multiple of 64 (as numpy does). */
    char hdr[512];
    int n = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < a->ndim; ++i)
        n += snprintf(hdr + 10 + n, sizeof hdr - 10 - (size_t)n, "%s%zu", i ? ", " : "",
                      a->shape[i]);
    if (a->ndim == 1)
        hdr[10 + n++] = ',';
    n += snprintf(hdr + 10 + n, sizeof hdr - 10 - (size_t)n, "), }");
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(hdr + 10 + n, ' ', padded - total);
    hdr[padded - 1] = '\n';
    size_t dict_len = padded - 10;
    memcpy(hdr, NPY_MAGIC, NPY_MAGIC_LEN);
    hdr[6] = 1;
    hdr[7] = 0;
    hdr[8] = (char)(dict_len & 0xff);
    hdr[9] = (char)(dict_len >> 8);
    npy_write_ctx ctx = {hdr, padded, a};
    return wbcl_io_atomic_write(path, npy_write_body, &ctx, err, errlen);
}

wbcl_status wbcl_npy_write_f32(const char *path, int ndim, const size_t *shape, const float *data,
                               char *err, size_t errlen)
{
    const char *name = path ? path : "wbcl_npy_write_f32";
    if (ndim < 0 || ndim > WBCL_ARRAY_MAX_DIMS) {
        wbcl_io_errf(err, errlen, "%s: ndim %d outside 0..%d", name, ndim, WBCL_ARRAY_MAX_DIMS);
        return WBCL_ERROR_SHAPE;
    }
    if (ndim > 0 && !shape) {
        wbcl_io_errf(err, errlen, "%s: shape is NULL", name);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    wbcl_array a;
    memset(&a, 0, sizeof a);
    a.elem = WBCL_ELEM_F32;
    a.ndim = ndim;
    size_t numel = 1;
    for (int i = 0; i < ndim; ++i) {
        a.shape[i] = shape[i];
        if (!wbcl_io_mul(numel, shape[i], &numel)) {
            wbcl_io_errf(err, errlen, "%s: shape's element count overflows size_t", name);
            return WBCL_ERROR_SHAPE;
        }
    }
    if (!wbcl_io_mul(numel, sizeof(float), &a.nbytes)) {
        wbcl_io_errf(err, errlen, "%s: shape's byte count overflows size_t", name);
        return WBCL_ERROR_SHAPE;
    }
    a.data = (void *)(uintptr_t)data; /* read only */
    return wbcl_npy_write(path, &a, err, errlen);
}
