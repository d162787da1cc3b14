/* libFuzzer target: the safetensors reader on arbitrary bytes, then every tensor fetched and
 * converted to float32. Build and run: see README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wbcl_safetensors *st = NULL;
    char err[256];
    if (wbcl_safetensors_open_mem(data, size, "fuzz.safetensors", &st, err, sizeof err) !=
        WBCL_SUCCESS) {
        if (st)
            abort(); /* failed opens must return NULL */
        return 0;
    }
    size_t n = wbcl_safetensors_count(st);
    /* an accepted file's tensors tile its data region: when every tensor can be fetched, their
     * sizes add up to the bytes after the header (the input is >= 8 bytes once accepted) */
    uint64_t hlen = 0, covered = 0;
    int all = 1;
    for (int k = 7; k >= 0; --k)
        hlen = hlen << 8 | data[k];
    for (size_t i = 0; i < n; ++i) {
        const char *name = wbcl_safetensors_name(st, i);
        if (!name || !wbcl_safetensors_has(st, name))
            abort();
        wbcl_array a;
        if (wbcl_safetensors_get(st, name, &a, err, sizeof err) != WBCL_SUCCESS)
            all = 0;
        else {
            covered += a.nbytes;
            float *f = NULL;
            if (wbcl_array_to_f32(&a, &f, err, sizeof err) == WBCL_SUCCESS)
                free(f);
        }
        wbcl_array_free(&a);
    }
    if (all && covered != size - 8 - hlen)
        abort();
    (void)wbcl_safetensors_metadata(st, "format");
    (void)wbcl_safetensors_get(st, "module.absent", NULL, err, sizeof err);
    wbcl_safetensors_close(st);
    return 0;
}
