/* wbcl — safetensors reader and writer.
 *
 * Layout: u64 LE header length N, N bytes of JSON
 *   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
 * then the data region; offsets are relative to its start. The reader keeps only the parsed
 * header (and, for files, an open descriptor read with pread, so const calls are thread-safe). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io_internal.h"

#define ST_MAX_HEADER 100000000ull /* as the reference implementation */
#define ST_MAX_EXACT 9007199254740992.0 /* 2^53: JSON numbers arrive as doubles */
#define QLEN 160

typedef struct st_dtype {
    const char *name;
    size_t size;
    int supported;
    wbcl_elem elem;
} st_dtype;

static const st_dtype dtypes[] = {
    {"F32", 4, 1, WBCL_ELEM_F32},     {"F64", 8, 1, WBCL_ELEM_F64},
    {"F16", 2, 1, WBCL_ELEM_F16},     {"BF16", 2, 1, WBCL_ELEM_BF16},
    {"I32", 4, 1, WBCL_ELEM_I32},     {"I64", 8, 1, WBCL_ELEM_I64},
    /* known to safetensors, validated, but not converted by this library */
    {"BOOL", 1, 0, WBCL_ELEM_F32},    {"U8", 1, 0, WBCL_ELEM_F32},
    {"I8", 1, 0, WBCL_ELEM_F32},      {"I16", 2, 0, WBCL_ELEM_F32},
    {"U16", 2, 0, WBCL_ELEM_F32},     {"U32", 4, 0, WBCL_ELEM_F32},
    {"U64", 8, 0, WBCL_ELEM_F32},     {"F8_E4M3", 1, 0, WBCL_ELEM_F32},
    {"F8_E5M2", 1, 0, WBCL_ELEM_F32},
};

typedef struct st_tensor {
    char *key;        /* as in the file */
    const char *name; /* key with prefixes stripped (points into key) */
    const st_dtype *dtype;
    int ndim;
    size_t shape[WBCL_ARRAY_MAX_DIMS];
    uint64_t begin, end; /* relative to the data region */
} st_tensor;

typedef struct st_meta {
    char *key, *value;
} st_meta;

struct wbcl_safetensors {
    char *source;          /* path or buffer name, for messages */
    int fd;                /* file: open descriptor; memory: -1 */
    unsigned char *mem;    /* memory: copy of the data region */
    uint64_t data_start;   /* file offset of the data region */
    uint64_t data_size;
    size_t n;
    st_tensor *t;          /* header order */
    st_tensor **by_name;   /* sorted by stripped name */
    size_t n_meta;
    st_meta *meta;         /* sorted by key */
};

/* ---- helpers -------------------------------------------------------------------------------- */

static const char *strip_prefixes(const char *s)
{
    for (;;) {
        if (strncmp(s, "module.", 7) == 0)
            s += 7;
        else if (strncmp(s, "_orig_mod.", 10) == 0)
            s += 10;
        else
            return s;
    }
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static const char *q(char *buf, const char *s) { return wbcl_io_quote(buf, QLEN, s, strlen(s)); }

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp((*(st_tensor *const *)a)->name, (*(st_tensor *const *)b)->name);
}

static int cmp_tensor_key(const void *key, const void *elem)
{
    return strcmp((const char *)key, (*(st_tensor *const *)elem)->name);
}

/* data order: by (begin, end), then header order, as the reference sorts before validating */
static int cmp_offsets(const void *a, const void *b)
{
    const st_tensor *x = *(st_tensor *const *)a, *y = *(st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

static int cmp_meta_key(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const st_meta *)elem)->key);
}

/* A JSON number that is a non-negative integer exactly representable as a double. */
static int json_uint(const cJSON *item, uint64_t *v)
{
    if (!cJSON_IsNumber(item))
        return 0;
    double d = item->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_EXACT) || d != floor(d))
        return 0;
    *v = (uint64_t)d;
    return 1;
}

/* Reads exactly len bytes at offset off; 0 on success, -1 on error or end of file. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len > 0) {
        size_t chunk = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            return -1;
        }
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* ---- parsing -------------------------------------------------------------------------------- */

static wbcl_status parse_tensor(wbcl_safetensors *st, const cJSON *item, st_tensor *t, char *err,
                                size_t errlen)
{
    const char *src = st->source;
    char kq[QLEN];
    q(kq, item->string);
    if (!cJSON_IsObject(item)) {
        wbcl_io_errf(err, errlen, "%s: tensor '%s': entry is not a JSON object", src, kq);
        return WBCL_ERROR_FORMAT;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dt) || !dt->valuestring) {
        wbcl_io_errf(err, errlen, "%s: tensor '%s': missing or non-string \"dtype\"", src, kq);
        return WBCL_ERROR_FORMAT;
    }
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; ++k)
        if (strcmp(dt->valuestring, dtypes[k].name) == 0)
            t->dtype = &dtypes[k];
    if (!t->dtype) {
        char dq[QLEN];
        wbcl_io_errf(err, errlen, "%s: tensor '%s': unsupported dtype '%s'", src, kq,
                     q(dq, dt->valuestring));
        return WBCL_ERROR_DTYPE;
    }
    if (!cJSON_IsArray(sh)) {
        wbcl_io_errf(err, errlen, "%s: tensor '%s': missing or non-array \"shape\"", src, kq);
        return WBCL_ERROR_FORMAT;
    }
    int nd = 0;
    size_t numel = 1, nbytes;
    for (const cJSON *d = sh->child; d; d = d->next) {
        uint64_t v;
        if (nd == WBCL_ARRAY_MAX_DIMS) {
            wbcl_io_errf(err, errlen, "%s: tensor '%s': shape has more than %d dimensions", src,
                         kq, WBCL_ARRAY_MAX_DIMS);
            return WBCL_ERROR_SHAPE;
        }
        if (!json_uint(d, &v) || v > SIZE_MAX) {
            wbcl_io_errf(err, errlen, "%s: tensor '%s': shape entry %d is not a non-negative integer",
                         src, kq, nd);
            return WBCL_ERROR_SHAPE;
        }
        t->shape[nd++] = (size_t)v;
        if (!wbcl_io_mul(numel, (size_t)v, &numel)) {
            wbcl_io_errf(err, errlen, "%s: tensor '%s': element count overflows size_t", src, kq);
            return WBCL_ERROR_SHAPE;
        }
    }
    t->ndim = nd;
    if (!wbcl_io_mul(numel, t->dtype->size, &nbytes)) {
        wbcl_io_errf(err, errlen, "%s: tensor '%s': byte count overflows size_t", src, kq);
        return WBCL_ERROR_SHAPE;
    }
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !json_uint(of->child, &t->begin) ||
        !json_uint(of->child->next, &t->end)) {
        wbcl_io_errf(err, errlen,
                     "%s: tensor '%s': \"data_offsets\" must be two non-negative integers", src, kq);
        return WBCL_ERROR_FORMAT;
    }
    if (t->begin > t->end || t->end > st->data_size) {
        wbcl_io_errf(err, errlen,
                     "%s: tensor '%s': data_offsets [%llu, %llu] outside the data region "
                     "(%llu bytes)",
                     src, kq, (unsigned long long)t->begin, (unsigned long long)t->end,
                     (unsigned long long)st->data_size);
        return WBCL_ERROR_FORMAT;
    }
    if (t->end - t->begin != (uint64_t)nbytes) {
        wbcl_io_errf(err, errlen,
                     "%s: tensor '%s': data_offsets span %llu bytes but dtype and shape need %zu",
                     src, kq, (unsigned long long)(t->end - t->begin), nbytes);
        return WBCL_ERROR_FORMAT;
    }
    t->key = dup_str(item->string);
    if (!t->key) {
        wbcl_io_errf(err, errlen, "%s: out of memory", src);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    t->name = strip_prefixes(t->key);
    return WBCL_SUCCESS;
}

static wbcl_status parse_metadata(wbcl_safetensors *st, const cJSON *item, char *err, size_t errlen)
{
    const char *src = st->source;
    if (st->meta) {
        wbcl_io_errf(err, errlen, "%s: duplicate \"__metadata__\" entry", src);
        return WBCL_ERROR_FORMAT;
    }
    if (!cJSON_IsObject(item)) {
        wbcl_io_errf(err, errlen, "%s: \"__metadata__\" is not a JSON object", src);
        return WBCL_ERROR_FORMAT;
    }
    size_t n = 0;
    for (const cJSON *m = item->child; m; m = m->next)
        ++n;
    st->meta = calloc(n ? n : 1, sizeof *st->meta);
    if (!st->meta) {
        wbcl_io_errf(err, errlen, "%s: out of memory", src);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    for (const cJSON *m = item->child; m; m = m->next) {
        char kq[QLEN];
        if (!cJSON_IsString(m) || !m->valuestring) {
            wbcl_io_errf(err, errlen, "%s: \"__metadata__\" key '%s': value is not a string", src,
                         q(kq, m->string));
            return WBCL_ERROR_FORMAT;
        }
        st_meta *e = &st->meta[st->n_meta];
        e->key = dup_str(m->string);
        e->value = dup_str(m->valuestring);
        ++st->n_meta;
        if (!e->key || !e->value) {
            wbcl_io_errf(err, errlen, "%s: out of memory", src);
            return WBCL_ERROR_OUT_OF_MEMORY;
        }
    }
    if (st->n_meta > 1)
        qsort(st->meta, st->n_meta, sizeof *st->meta, cmp_meta);
    for (size_t i = 1; i < st->n_meta; ++i)
        if (strcmp(st->meta[i - 1].key, st->meta[i].key) == 0) {
            char kq[QLEN];
            wbcl_io_errf(err, errlen, "%s: \"__metadata__\" key '%s' appears twice", src,
                         q(kq, st->meta[i].key));
            return WBCL_ERROR_FORMAT;
        }
    return WBCL_SUCCESS;
}

/* The tensors' data_offsets must tile the data region exactly, as the reference implementation
 * (safetensors' Metadata::validate and read_metadata) requires: sorted by offsets, the first begins
 * at 0, each begins where the previous one ends (no overlap, no gap) and the last ends at the end
 * of the data region (no trailing bytes; with no tensors the region is empty). Empty tensors
 * ([k, k]) fit anywhere on that chain. Called after each entry's own checks (begin <= end <= data
 * size, span == numel * element size). */
static wbcl_status check_tiling(const wbcl_safetensors *st, char *err, size_t errlen)
{
    const char *src = st->source;
    st_tensor **ord = malloc((st->n ? st->n : 1) * sizeof *ord);
    if (!ord) {
        wbcl_io_errf(err, errlen, "%s: out of memory", src);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < st->n; ++i)
        ord[i] = &st->t[i];
    if (st->n > 1)
        qsort(ord, st->n, sizeof *ord, cmp_offsets);
    wbcl_status status = WBCL_SUCCESS;
    uint64_t pos = 0;
    char aq[QLEN], bq[QLEN];
    for (size_t i = 0; i < st->n && !status; ++i) {
        const st_tensor *t = ord[i], *prev = i ? ord[i - 1] : NULL;
        if (t->begin == pos) {
            pos = t->end;
            continue;
        }
        status = WBCL_ERROR_FORMAT;
        if (!prev)
            wbcl_io_errf(err, errlen,
                         "%s: tensor '%s' (data_offsets [%llu, %llu]) is the first in the data region "
                         "but does not start at 0: bytes [0, %llu) belong to no tensor",
                         src, q(aq, t->key), (unsigned long long)t->begin,
                         (unsigned long long)t->end, (unsigned long long)t->begin);
        else if (t->begin < pos)
            wbcl_io_errf(err, errlen,
                         "%s: tensors '%s' (data_offsets [%llu, %llu]) and '%s' (data_offsets "
                         "[%llu, %llu]) overlap",
                         src, q(aq, prev->key), (unsigned long long)prev->begin,
                         (unsigned long long)prev->end, q(bq, t->key),
                         (unsigned long long)t->begin, (unsigned long long)t->end);
        else
            wbcl_io_errf(err, errlen,
                         "%s: gap between tensors '%s' (data_offsets [%llu, %llu]) and '%s' "
                         "(data_offsets [%llu, %llu]): bytes [%llu, %llu) belong to no tensor",
                         src, q(aq, prev->key), (unsigned long long)prev->begin,
                         (unsigned long long)prev->end, q(bq, t->key),
                         (unsigned long long)t->begin, (unsigned long long)t->end,
                         (unsigned long long)pos, (unsigned long long)t->begin);
    }
    if (!status && pos != st->data_size) {
        status = WBCL_ERROR_FORMAT;
        if (st->n == 0)
            wbcl_io_errf(err, errlen,
                         "%s: the header lists no tensors but the data region has %llu bytes", src,
                         (unsigned long long)st->data_size);
        else
            wbcl_io_errf(err, errlen,
                         "%s: the tensors cover %llu of the data region's %llu bytes: the last, "
                         "'%s' (data_offsets [%llu, %llu]), is followed by %llu bytes that belong "
                         "to no tensor",
                         src, (unsigned long long)pos, (unsigned long long)st->data_size,
                         q(aq, ord[st->n - 1]->key), (unsigned long long)ord[st->n - 1]->begin,
                         (unsigned long long)ord[st->n - 1]->end,
                         (unsigned long long)(st->data_size - pos));
    }
    free(ord);
    return status;
}

/* Parses the header (json: n bytes followed by a NUL) into st; st->data_size must be set. */
static wbcl_status parse_header(wbcl_safetensors *st, const char *json, size_t n, char *err,
                                size_t errlen)
{
    const char *src = st->source;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, n, &end, 0);
    if (!root) {
        size_t at = (end && end >= json && end <= json + n) ? (size_t)(end - json) : 0;
        wbcl_io_errf(err, errlen, "%s: header is not valid JSON (near byte %zu of %zu)", src, at,
                     n);
        return WBCL_ERROR_FORMAT;
    }
    wbcl_status status = WBCL_SUCCESS;
    for (const char *p = end; p && p < json + n; ++p)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            wbcl_io_errf(err, errlen, "%s: unexpected data after the JSON header (byte %zu)", src,
                         (size_t)(p - json));
            status = WBCL_ERROR_FORMAT;
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        wbcl_io_errf(err, errlen, "%s: header is not a JSON object", src);
        status = WBCL_ERROR_FORMAT;
        goto done;
    }
    size_t count = 0;
    for (const cJSON *it = root->child; it; it = it->next)
        if (!it->string || strcmp(it->string, "__metadata__") != 0)
            ++count;
    st->t = calloc(count ? count : 1, sizeof *st->t);
    st->by_name = calloc(count ? count : 1, sizeof *st->by_name);
    if (!st->t || !st->by_name) {
        wbcl_io_errf(err, errlen, "%s: out of memory", src);
        status = WBCL_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!it->string) { /* cannot happen for an object member */
            wbcl_io_errf(err, errlen, "%s: header entry without a key", src);
            status = WBCL_ERROR_FORMAT;
            goto done;
        }
        if (strcmp(it->string, "__metadata__") == 0)
            status = parse_metadata(st, it, err, errlen);
        else {
            status = parse_tensor(st, it, &st->t[st->n], err, errlen);
            if (!status) {
                st->by_name[st->n] = &st->t[st->n];
                ++st->n;
            }
        }
        if (status)
            goto done;
    }
    if (st->n > 1)
        qsort(st->by_name, st->n, sizeof *st->by_name, cmp_tensor);
    for (size_t i = 1; i < st->n; ++i)
        if (strcmp(st->by_name[i - 1]->name, st->by_name[i]->name) == 0) {
            char aq[QLEN], bq[QLEN];
            wbcl_io_errf(err, errlen, "%s: duplicate tensor name: keys '%s' and '%s'", src,
                         q(aq, st->by_name[i - 1]->key), q(bq, st->by_name[i]->key));
            status = WBCL_ERROR_FORMAT;
            goto done;
        }
    status = check_tiling(st, err, errlen);
done:
    cJSON_Delete(root);
    return status;
}

static wbcl_safetensors *st_new(const char *source)
{
    wbcl_safetensors *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->fd = -1;
    st->source = dup_str(source);
    if (!st->source) {
        free(st);
        return NULL;
    }
    return st;
}

/* Validates header length n against the total size; common to file and memory. */
static wbcl_status check_header_len(const char *src, uint64_t n, uint64_t total, char *err,
                                    size_t errlen)
{
    if (n > total - 8) {
        wbcl_io_errf(err, errlen,
                     "%s: header length %llu extends beyond the end of the file (%llu bytes)", src,
                     (unsigned long long)n, (unsigned long long)total);
        return WBCL_ERROR_FORMAT;
    }
    if (n > ST_MAX_HEADER) {
        wbcl_io_errf(err, errlen, "%s: header length %llu exceeds the limit of %llu bytes", src,
                     (unsigned long long)n, ST_MAX_HEADER);
        return WBCL_ERROR_FORMAT;
    }
    if (n < 2) {
        wbcl_io_errf(err, errlen, "%s: header length %llu is too small for a JSON object", src,
                     (unsigned long long)n);
        return WBCL_ERROR_FORMAT;
    }
    return WBCL_SUCCESS;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = v << 8 | p[i];
    return v;
}

/* ---- public reader -------------------------------------------------------------------------- */

wbcl_status wbcl_safetensors_open_mem(const void *buf, size_t len, const char *name_for_messages,
                                      wbcl_safetensors **out, char *err, size_t errlen)
{
    const char *src = WBCL_IO_NAME(name_for_messages);
    if (out)
        *out = NULL;
    if (!out || (!buf && len > 0)) {
        wbcl_io_errf(err, errlen, "%s: NULL argument to wbcl_safetensors_open_mem", src);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    const unsigned char *p = buf;
    if (len < 8) {
        wbcl_io_errf(err, errlen, "%s: too short for a safetensors file (%zu bytes)", src, len);
        return WBCL_ERROR_FORMAT;
    }
    uint64_t n = le64(p);
    wbcl_status status = check_header_len(src, n, len, err, errlen);
    if (status)
        return status;
    wbcl_safetensors *st = st_new(src);
    char *json = malloc((size_t)n + 1);
    if (!st || !json) {
        free(json);
        wbcl_safetensors_close(st);
        wbcl_io_errf(err, errlen, "%s: out of memory", src);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    memcpy(json, p + 8, (size_t)n);
    json[n] = '\0';
    st->data_start = 8 + n;
    st->data_size = len - st->data_start;
    status = parse_header(st, json, (size_t)n, err, errlen);
    free(json);
    if (!status) {
        st->mem = malloc(st->data_size ? (size_t)st->data_size : 1);
        if (!st->mem) {
            wbcl_io_errf(err, errlen, "%s: out of memory", src);
            status = WBCL_ERROR_OUT_OF_MEMORY;
        } else if (st->data_size)
            memcpy(st->mem, p + st->data_start, (size_t)st->data_size);
    }
    if (status) {
        wbcl_safetensors_close(st);
        return status;
    }
    *out = st;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_safetensors_open(const char *path, wbcl_safetensors **out, char *err,
                                  size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !out) {
        wbcl_io_errf(err, errlen, "%s: NULL argument to wbcl_safetensors_open",
                     path ? path : "(null)");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        wbcl_io_errf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        return WBCL_ERROR_IO;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 0) {
        close(fd);
        wbcl_io_errf(err, errlen, "%s: not a regular file", path);
        return WBCL_ERROR_IO;
    }
    uint64_t total = (uint64_t)sb.st_size;
    unsigned char lenbuf[8];
    if (total < 8) {
        close(fd);
        wbcl_io_errf(err, errlen, "%s: too short for a safetensors file (%llu bytes)", path,
                     (unsigned long long)total);
        return WBCL_ERROR_FORMAT;
    }
    if (pread_full(fd, lenbuf, 8, 0) != 0) {
        int e = errno;
        close(fd);
        wbcl_io_errf(err, errlen, "%s: read error: %s", path, e ? strerror(e) : "end of file");
        return WBCL_ERROR_IO;
    }
    uint64_t n = le64(lenbuf);
    wbcl_status status = check_header_len(path, n, total, err, errlen);
    if (status) {
        close(fd);
        return status;
    }
    wbcl_safetensors *st = st_new(path);
    char *json = malloc((size_t)n + 1);
    if (!st || !json) {
        free(json);
        wbcl_safetensors_close(st);
        close(fd);
        wbcl_io_errf(err, errlen, "%s: out of memory", path);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    st->fd = fd;
    if (pread_full(fd, json, (size_t)n, 8) != 0) {
        int e = errno;
        free(json);
        wbcl_safetensors_close(st);
        wbcl_io_errf(err, errlen, "%s: read error in the header: %s", path,
                     e ? strerror(e) : "end of file");
        return WBCL_ERROR_IO;
    }
    json[n] = '\0';
    st->data_start = 8 + n;
    st->data_size = total - st->data_start;
    status = parse_header(st, json, (size_t)n, err, errlen);
    free(json);
    if (status) {
        wbcl_safetensors_close(st);
        return status;
    }
    *out = st;
    return WBCL_SUCCESS;
}

void wbcl_safetensors_close(wbcl_safetensors *st)
{
    if (!st)
        return;
    if (st->fd >= 0)
        close(st->fd);
    if (st->t)
        for (size_t i = 0; i < st->n; ++i)
            free(st->t[i].key);
    if (st->meta)
        for (size_t i = 0; i < st->n_meta; ++i) {
            free(st->meta[i].key);
            free(st->meta[i].value);
        }
    free(st->t);
    free(st->by_name);
    free(st->meta);
    free(st->mem);
    free(st->source);
    free(st);
}

size_t wbcl_safetensors_count(const wbcl_safetensors *st) { return st ? st->n : 0; }

const char *wbcl_safetensors_name(const wbcl_safetensors *st, size_t i)
{
    return st && i < st->n ? st->t[i].name : NULL;
}

static const st_tensor *find(const wbcl_safetensors *st, const char *name)
{
    if (!st || !name || st->n == 0)
        return NULL;
    st_tensor *const *hit =
        bsearch(strip_prefixes(name), st->by_name, st->n, sizeof *st->by_name, cmp_tensor_key);
    return hit ? *hit : NULL;
}

int wbcl_safetensors_has(const wbcl_safetensors *st, const char *name)
{
    return find(st, name) != NULL;
}

const char *wbcl_safetensors_metadata(const wbcl_safetensors *st, const char *key)
{
    if (!st || !key || st->n_meta == 0)
        return NULL;
    const st_meta *m = bsearch(key, st->meta, st->n_meta, sizeof *st->meta, cmp_meta_key);
    return m ? m->value : NULL;
}

wbcl_status wbcl_safetensors_get(const wbcl_safetensors *st, const char *name, wbcl_array *out,
                                 char *err, size_t errlen)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!st || !name || !out) {
        wbcl_io_errf(err, errlen, "%s: NULL argument to wbcl_safetensors_get",
                     st ? st->source : "(null)");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    char kq[QLEN];
    const st_tensor *t = find(st, name);
    if (!t) {
        wbcl_io_errf(err, errlen, "%s: missing tensor '%s'", st->source, q(kq, name));
        return WBCL_ERROR_FORMAT;
    }
    if (!t->dtype->supported) {
        wbcl_io_errf(err, errlen, "%s: tensor '%s': dtype %s is not supported", st->source,
                     q(kq, t->key), t->dtype->name);
        return WBCL_ERROR_DTYPE;
    }
    wbcl_status status = wbcl_array_alloc(out, t->dtype->elem, t->ndim, t->shape, NULL, 0);
    if (status) {
        wbcl_io_errf(err, errlen, "%s: tensor '%s': %s", st->source, q(kq, t->key),
                     status == WBCL_ERROR_OUT_OF_MEMORY ? "out of memory" : "bad shape");
        return status;
    }
    size_t nbytes = (size_t)(t->end - t->begin); /* == out->nbytes, checked when opened */
    if (st->mem) {
        if (nbytes)
            memcpy(out->data, st->mem + t->begin, nbytes);
    } else if (nbytes && pread_full(st->fd, out->data, nbytes, st->data_start + t->begin) != 0) {
        int e = errno;
        wbcl_array_free(out);
        wbcl_io_errf(err, errlen, "%s: tensor '%s': read error: %s", st->source, q(kq, t->key),
                     e ? strerror(e) : "unexpected end of file (file changed?)");
        return WBCL_ERROR_IO;
    }
    if (!wbcl_io_host_le())
        wbcl_io_swap(out->data, nbytes / t->dtype->size, t->dtype->size);
    return WBCL_SUCCESS;
}

/* ---- writer --------------------------------------------------------------------------------- */

static int utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int k;
        uint32_t cp, min;
        if (c < 0x80) {
            ++p;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else
            return 0;
        for (int i = 1; i <= k; ++i) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        p += k + 1;
    }
    return 1;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (n > SIZE_MAX - b->n - 1) {
        b->oom = 1;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap = cap > SIZE_MAX / 2 ? b->n + n + 1 : cap * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_u64(sbuf *b, uint64_t v)
{
    char tmp[24];
    int k = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    sb_put(b, tmp, (size_t)k);
}

static void sb_json_str(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            sb_put(b, e, 2);
        } else if (*p < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", *p);
            sb_put(b, e, 6);
        } else
            sb_put(b, (const char *)p, 1);
    }
    sb_put(b, "\"", 1);
}

typedef struct st_write_ctx {
    const char *header;
    size_t header_len;
    size_t n;
    const wbcl_array *const *arrays;
    const size_t *order; /* data order */
} st_write_ctx;

static int st_write_body(FILE *f, void *vctx)
{
    const st_write_ctx *c = vctx;
    unsigned char len[8];
    uint64_t hl = c->header_len;
    for (int i = 0; i < 8; ++i)
        len[i] = (unsigned char)(hl >> (8 * i));
    if (fwrite(len, 1, 8, f) != 8 || fwrite(c->header, 1, c->header_len, f) != c->header_len)
        return -1;
    for (size_t i = 0; i < c->n; ++i) {
        const wbcl_array *a = c->arrays[c->order[i]];
        size_t es = wbcl_elem_size(a->elem);
        if (wbcl_io_write_le(f, a->data, a->nbytes / es, es) != 0)
            return -1;
    }
    return 0;
}

static int cmp_cstr_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 if two of the n strings (after prefix stripping when strip) are equal; *dup gets one. */
static int has_duplicate(size_t n, const char *const *s, int strip, const char **dup, int *oom)
{
    *oom = 0;
    if (n < 2)
        return 0;
    const char **v = malloc(n * sizeof *v);
    if (!v) {
        *oom = 1;
        return 0;
    }
    for (size_t i = 0; i < n; ++i)
        v[i] = strip ? strip_prefixes(s[i]) : s[i];
    qsort(v, n, sizeof *v, cmp_cstr_ptr);
    int found = 0;
    for (size_t i = 1; i < n && !found; ++i)
        if (strcmp(v[i - 1], v[i]) == 0) {
            found = 1;
            *dup = v[i];
        }
    free(v);
    return found;
}

wbcl_status wbcl_safetensors_write(const char *path, size_t n, const char *const *names,
                                   const wbcl_array *const *arrays, size_t n_meta,
                                   const char *const *meta_keys, const char *const *meta_values,
                                   char *err, size_t errlen)
{
    char kq[QLEN];
    if (!path || (n > 0 && (!names || !arrays)) || (n_meta > 0 && (!meta_keys || !meta_values))) {
        wbcl_io_errf(err, errlen, "%s: NULL argument to wbcl_safetensors_write",
                     path ? path : "(null)");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    if (n > SIZE_MAX / sizeof(size_t)) {
        wbcl_io_errf(err, errlen, "%s: too many tensors", path);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; ++i) {
        if (!names[i] || !utf8_valid(names[i]) || strcmp(names[i], "__metadata__") == 0) {
            wbcl_io_errf(err, errlen,
                         "%s: tensor %zu: name is NULL, not valid UTF-8 or \"__metadata__\"",
                         path, i);
            return WBCL_ERROR_INVALID_ARGUMENT;
        }
        char what[QLEN + 16];
        snprintf(what, sizeof what, "tensor '%s'", q(kq, names[i]));
        wbcl_status s = wbcl_io_check_array(arrays[i], path, what, err, errlen);
        if (s)
            return s;
    }
    for (size_t i = 0; i < n_meta; ++i)
        if (!meta_keys[i] || !meta_values[i] || !utf8_valid(meta_keys[i]) ||
            !utf8_valid(meta_values[i])) {
            wbcl_io_errf(err, errlen,
                         "%s: metadata entry %zu: key or value is NULL or not valid UTF-8", path,
                         i);
            return WBCL_ERROR_INVALID_ARGUMENT;
        }
    const char *dup = NULL;
    int oom = 0;
    if (has_duplicate(n, names, 1, &dup, &oom) || oom ||
        has_duplicate(n_meta, meta_keys, 0, &dup, &oom) || oom) {
        if (oom) {
            wbcl_io_errf(err, errlen, "%s: out of memory", path);
            return WBCL_ERROR_OUT_OF_MEMORY;
        }
        wbcl_io_errf(err, errlen, "%s: duplicate name '%s' (tensor names are compared after "
                     "stripping \"module.\"/\"_orig_mod.\")", path, q(kq, dup));
        return WBCL_ERROR_INVALID_ARGUMENT;
    }

    /* data order: 8-byte elements first, then 4, then 2, so every tensor stays aligned */
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    uint64_t *begin = malloc((n ? n : 1) * sizeof *begin);
    if (!order || !begin) {
        free(order);
        free(begin);
        wbcl_io_errf(err, errlen, "%s: out of memory", path);
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    size_t k = 0;
    uint64_t off = 0;
    for (size_t es = 8; es >= 2; es /= 2)
        for (size_t i = 0; i < n; ++i)
            if (wbcl_elem_size(arrays[i]->elem) == es) {
                order[k++] = i;
                begin[i] = off;
                off += arrays[i]->nbytes; /* sums of in-memory sizes: no u64 overflow */
            }

    sbuf b = {0};
    sb_str(&b, "{");
    int first = 1;
    if (n_meta > 0) {
        sb_str(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; ++i) {
            if (i)
                sb_str(&b, ",");
            sb_json_str(&b, meta_keys[i]);
            sb_str(&b, ":");
            sb_json_str(&b, meta_values[i]);
        }
        sb_str(&b, "}");
        first = 0;
    }
    for (size_t i = 0; i < n; ++i) {
        const wbcl_array *a = arrays[i];
        if (!first)
            sb_str(&b, ",");
        first = 0;
        sb_json_str(&b, names[i]);
        sb_str(&b, ":{\"dtype\":\"");
        sb_str(&b, wbcl_elem_name(a->elem));
        sb_str(&b, "\",\"shape\":[");
        for (int d = 0; d < a->ndim; ++d) {
            if (d)
                sb_str(&b, ",");
            sb_u64(&b, a->shape[d]);
        }
        sb_str(&b, "],\"data_offsets\":[");
        sb_u64(&b, begin[i]);
        sb_str(&b, ",");
        sb_u64(&b, begin[i] + a->nbytes);
        sb_str(&b, "]}");
    }
    sb_str(&b, "}");
    while (!b.oom && b.n % 8 != 0)
        sb_str(&b, " ");
    free(begin);
    wbcl_status status;
    if (b.oom) {
        wbcl_io_errf(err, errlen, "%s: out of memory", path);
        status = WBCL_ERROR_OUT_OF_MEMORY;
    } else if (b.n > ST_MAX_HEADER) {
        wbcl_io_errf(err, errlen, "%s: header of %zu bytes exceeds the limit of %llu", path, b.n,
                     ST_MAX_HEADER);
        status = WBCL_ERROR_INVALID_ARGUMENT;
    } else {
        st_write_ctx ctx = {b.p, b.n, n, arrays, order};
        status = wbcl_io_atomic_write(path, st_write_body, &ctx, err, errlen);
    }
    free(b.p);
    free(order);
    return status;
}
