/* wbcl — host arrays and the file formats they travel in: NumPy .npy and safetensors.
 *
 * Pure C, no OpenCL. Readers are defensive (every size is bounds- and overflow-checked, the
 * parsers are fuzzed); writers never leave a partial file behind: they write a temporary file
 * in the destination's directory and rename() it over the destination only when complete.
 *
 * Error reporting: every fallible call takes `char *err, size_t errlen`. On failure it writes one
 * line (no newline) naming the file and the problem into err, truncated to errlen, and returns
 * the status. err may be NULL or errlen 0 when no message is wanted. Nothing is printed.
 * Files and buffers are little-endian; big-endian hosts are handled by swapping.
 * All functions are thread-safe on distinct objects; the const ones also on shared objects. */
#ifndef WBCL_IO_H
#define WBCL_IO_H

#include <stddef.h>
#include <stdint.h>

#include "wbcl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of a host array. */
typedef enum wbcl_elem {
    WBCL_ELEM_F32,  /* IEEE binary32                      */
    WBCL_ELEM_F64,  /* IEEE binary64                      */
    WBCL_ELEM_F16,  /* IEEE binary16, stored as uint16_t  */
    WBCL_ELEM_BF16, /* bfloat16, stored as uint16_t       */
    WBCL_ELEM_I32,  /* int32_t                            */
    WBCL_ELEM_I64   /* int64_t                            */
} wbcl_elem;

#define WBCL_ARRAY_MAX_DIMS 8

/* A dense C-order (row-major) array in host memory. It owns `data` (free with wbcl_array_free).
 * ndim 0 is a scalar (1 element); a dimension of 0 gives an empty array (numel 0).
 * Invariant: nbytes == numel * wbcl_elem_size(elem); after a successful alloc/read, data != NULL
 * even when nbytes == 0. Entries of shape beyond ndim are 0. */
typedef struct wbcl_array {
    wbcl_elem elem;
    int ndim;
    size_t shape[WBCL_ARRAY_MAX_DIMS];
    void *data;
    size_t nbytes;
} wbcl_array;

/* Allocates a zero-filled array of the given element type and shape (shape may be NULL when
 * ndim == 0). Fails with WBCL_ERROR_INVALID_ARGUMENT (a NULL, or shape NULL with ndim > 0),
 * WBCL_ERROR_DTYPE (bad elem), WBCL_ERROR_SHAPE (ndim outside 0..8, or element/byte count
 * overflowing size_t) or WBCL_ERROR_OUT_OF_MEMORY. On failure *a is zeroed. */
wbcl_status wbcl_array_alloc(wbcl_array *a, wbcl_elem elem, int ndim, const size_t *shape,
                             char *err, size_t errlen);

/* Frees a->data and leaves *a zeroed. NULL-safe (a == NULL and a->data == NULL are fine). */
void wbcl_array_free(wbcl_array *a);

/* Number of elements: the product of shape[0..ndim-1] (1 for ndim 0). 0 for NULL, for ndim
 * outside 0..8, or if the product overflows size_t. */
size_t wbcl_array_numel(const wbcl_array *a);

/* Bytes per element (4, 8, 2, 2, 4, 8); 0 for a value outside the enum. */
size_t wbcl_elem_size(wbcl_elem e);

/* Constant name of an element type as safetensors spells it: "F32", "F64", "F16", "BF16",
 * "I32", "I64"; "invalid" for a value outside the enum. Never NULL. */
const char *wbcl_elem_name(wbcl_elem e);

/* Decodes one IEEE binary16 / bfloat16 value exactly (subnormals, infinities, NaN included). */
float wbcl_f16_to_f32(uint16_t h);
float wbcl_bf16_to_f32(uint16_t b);
/* Encodes a float as IEEE binary16, rounding to nearest with ties to even (the rounding of
 * OpenCL's vstore_half_rte): subnormal halves are produced exactly, magnitudes from 65520 up
 * become +-inf, inf stays inf, NaN stays a quiet NaN with its sign. Independent of the host's
 * rounding mode. */
uint16_t wbcl_f32_to_f16(float f);

/* Converts any element type to a newly malloc'd float32 buffer of numel elements (never NULL on
 * success, even for numel 0; caller frees with free()). F16/BF16 are decoded exactly, F64 is
 * rounded to nearest (out-of-range magnitudes become +-inf), integers are converted (rounded to
 * nearest above 2^24). Fails with WBCL_ERROR_INVALID_ARGUMENT (NULL, or an array violating the
 * invariant above), WBCL_ERROR_DTYPE, WBCL_ERROR_SHAPE or WBCL_ERROR_OUT_OF_MEMORY; *out is
 * set to NULL on failure. */
wbcl_status wbcl_array_to_f32(const wbcl_array *a, float **out, char *err, size_t errlen);

/* ---- NumPy .npy ------------------------------------------------------------------------------ */

/* Reads a .npy file (format version 1.0, 2.0 or 3.0; C order; dtypes '<f4', '<f8', '<i4', '<i8',
 * '<f2') into *out (caller frees with wbcl_array_free). *out is zeroed on failure.
 * Errors: WBCL_ERROR_INVALID_ARGUMENT (NULL path/out), WBCL_ERROR_IO (cannot open/read, not a
 * regular file), WBCL_ERROR_FORMAT (bad magic/version, header beyond the file, malformed header
 * dict, Fortran order, truncated data or trailing bytes), WBCL_ERROR_DTYPE (big-endian, object,
 * structured or any other dtype), WBCL_ERROR_SHAPE (negative or overflowing shape, more than 8
 * dimensions), WBCL_ERROR_OUT_OF_MEMORY. */
wbcl_status wbcl_npy_read(const char *path, wbcl_array *out, char *err, size_t errlen);

/* As wbcl_npy_read, from the len bytes at buf (buf may be NULL when len is 0). name_for_messages
 * names the source in error messages (NULL -> "<memory>"). The data are copied. */
wbcl_status wbcl_npy_read_mem(const void *buf, size_t len, const char *name_for_messages,
                              wbcl_array *out, char *err, size_t errlen);

/* Writes a as a version 1.0 .npy file (C order, little-endian). Elements F32, F64, I32, I64 only
 * (others: WBCL_ERROR_DTYPE). The array is validated before the file system is touched
 * (WBCL_ERROR_INVALID_ARGUMENT / _SHAPE / _DTYPE); the file is written to a temporary name in the
 * same directory and renamed over path, so on any failure (WBCL_ERROR_IO) an existing file at
 * path is left untouched and no temporary file remains. */
wbcl_status wbcl_npy_write(const char *path, const wbcl_array *a, char *err, size_t errlen);

/* Convenience: writes float32 data of the given shape (ndim 0..8; data may be NULL only when the
 * shape has 0 elements) exactly as wbcl_npy_write does. */
wbcl_status wbcl_npy_write_f32(const char *path, int ndim, const size_t *shape, const float *data,
                               char *err, size_t errlen);

/* ---- safetensors ----------------------------------------------------------------------------- */

/* A parsed safetensors file: tensor names, dtypes, shapes and offsets, plus __metadata__. */
typedef struct wbcl_safetensors wbcl_safetensors;

/* Opens and validates a safetensors file: 8-byte little-endian header length N (N <= file size
 * - 8, N <= 100,000,000), N bytes of JSON object, then the data. Every entry must have a dtype,
 * a shape (<= 8 non-negative integers, overflow-checked) and data_offsets [begin, end] with
 * begin <= end <= data size and end - begin == numel * element size. As the reference
 * implementation requires, the offsets must tile the data region exactly: sorted by offsets, the
 * first tensor begins at 0, each begins where the previous one ends and the last ends at the end of
 * the file (empty tensors [k, k] may sit anywhere on that chain; with no tensors the data region
 * must be empty). Overlapping tensors, a gap between two, bytes before the first or after the last
 * are WBCL_ERROR_FORMAT; the message names the file, the tensor(s) and their data_offsets, e.g.
 * "FILE: tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) overlap",
 * "FILE: gap between tensors 'a' (data_offsets [0, 4]) and 'b' (data_offsets [8, 12]): bytes
 * [4, 8) belong to no tensor", "FILE: tensor 'a' (data_offsets [4, 8]) is the first in the data
 * region but does not start at 0: ...", "FILE: the tensors cover 8 of the data region's 12 bytes:
 * the last, 'b' (data_offsets [4, 8]), is followed by 4 bytes that belong to no tensor".
 * Names are stored with the prefixes "module." and "_orig_mod." stripped (repeatedly); two
 * entries with the same stripped name are an error. "__metadata__", if present, must be an
 * object of string values.
 * Tensors of dtypes the library does not convert (BOOL, U8, I8, I16, U16, U32, U64, F8_E4M3,
 * F8_E5M2) are validated and listed but fail in wbcl_safetensors_get with WBCL_ERROR_DTYPE;
 * any other dtype string fails here with WBCL_ERROR_DTYPE.
 * Only the header is read here; tensor data are read by wbcl_safetensors_get (the file stays
 * open until close). On failure *out is NULL. Errors: WBCL_ERROR_INVALID_ARGUMENT, _IO,
 * _FORMAT, _DTYPE, _SHAPE, _OUT_OF_MEMORY; messages name the file and the tensor key. */
wbcl_status wbcl_safetensors_open(const char *path, wbcl_safetensors **out, char *err, size_t errlen);

/* As wbcl_safetensors_open, from the len bytes at buf, which are copied (buf may be freed after
 * the call). name_for_messages names the source in messages (NULL -> "<memory>"). */
wbcl_status wbcl_safetensors_open_mem(const void *buf, size_t len, const char *name_for_messages,
                                      wbcl_safetensors **out, char *err, size_t errlen);

/* Closes the file and frees everything. NULL-safe. */
void wbcl_safetensors_close(wbcl_safetensors *st);

/* Number of tensors (the __metadata__ entry is not a tensor). 0 for NULL. */
size_t wbcl_safetensors_count(const wbcl_safetensors *st);

/* Name of tensor i (0 <= i < count) in header order, with "module." / "_orig_mod." prefixes
 * stripped. Valid until close. NULL for NULL st or i out of range. */
const char *wbcl_safetensors_name(const wbcl_safetensors *st, size_t i);

/* Copies tensor `name` into a newly allocated *out (caller frees with wbcl_array_free; *out is
 * zeroed on failure). `name` is matched after stripping the same prefixes. Absent name:
 * WBCL_ERROR_FORMAT with "FILE: missing tensor 'NAME'". Unsupported dtype: WBCL_ERROR_DTYPE.
 * Read failure: WBCL_ERROR_IO. Also WBCL_ERROR_INVALID_ARGUMENT, _OUT_OF_MEMORY. */
wbcl_status wbcl_safetensors_get(const wbcl_safetensors *st, const char *name, wbcl_array *out,
                                 char *err, size_t errlen);

/* 1 if a tensor of that (stripped) name exists, else 0 (also for NULL arguments). */
int wbcl_safetensors_has(const wbcl_safetensors *st, const char *name);

/* Value of __metadata__[key], or NULL if absent (or NULL arguments). Valid until close. */
const char *wbcl_safetensors_metadata(const wbcl_safetensors *st, const char *key);

/* Writes n tensors (names[i] -> *arrays[i]; F32, F64, F16, BF16, I32, I64) and optional
 * __metadata__ string pairs (n_meta may be 0, and the key/value arrays then NULL) as a
 * safetensors file readable by the Python/Rust safetensors package. Names are written as given
 * and must be non-NULL, valid UTF-8, not "__metadata__", and distinct even after prefix stripping;
 * metadata keys must be distinct valid UTF-8, values valid UTF-8. Everything is validated before
 * the file system is touched (WBCL_ERROR_INVALID_ARGUMENT / _SHAPE / _DTYPE); then the file is
 * written to a temporary name in the same directory and renamed over path, so on any failure
 * (WBCL_ERROR_IO) an existing file at path is left untouched and no temporary file remains. */
wbcl_status wbcl_safetensors_write(const char *path, size_t n, const char *const *names,
                                   const wbcl_array *const *arrays, size_t n_meta,
                                   const char *const *meta_keys, const char *const *meta_values,
                                   char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
