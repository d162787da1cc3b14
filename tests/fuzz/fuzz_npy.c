/* libFuzzer target: the .npy reader on arbitrary bytes. Build and run: see README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "wbcl/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wbcl_array a;
    char err[256];
    if (wbcl_npy_read_mem(data, size, "fuzz.npy", &a, err, sizeof err) == WBCL_SUCCESS) {
        /* touch every element through the converter */
        float *f = NULL;
        if (wbcl_array_to_f32(&a, &f, err, sizeof err) == WBCL_SUCCESS)
            free(f);
        if (wbcl_array_numel(&a) * wbcl_elem_size(a.elem) != a.nbytes)
            abort();
    } else if (a.data != NULL) {
        abort(); /* failed reads must leave a zeroed array */
    }
    wbcl_array_free(&a);
    return 0;
}
