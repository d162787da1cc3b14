/* wbcl — status codes shared by every fallible call.
 *
 * Every function that can fail returns a wbcl_status. WBCL_SUCCESS is 0, so
 * `if (st) ...` tests for failure. The full human-readable message of the last
 * failure lives in the context (wbcl_context_last_error) or, for calls that
 * need no context (file I/O, device listing), in a caller-supplied buffer. */
#ifndef WBCL_STATUS_H
#define WBCL_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wbcl_status {
    WBCL_SUCCESS = 0,
    WBCL_ERROR_INVALID_ARGUMENT, /* NULL pointer, bad enum, bad parameter value        */
    WBCL_ERROR_SHAPE,            /* zero, mismatched or overflowing dimensions          */
    WBCL_ERROR_DTYPE,            /* element type not supported here                     */
    WBCL_ERROR_NO_DEVICE,        /* no OpenCL platform/device, or selector matched none */
    WBCL_ERROR_DEVICE_LIMIT,     /* exceeds a device limit (max allocation, memory)     */
    WBCL_ERROR_OUT_OF_MEMORY,    /* host allocation failed                              */
    WBCL_ERROR_OPENCL,           /* an OpenCL call failed (message names the error)     */
    WBCL_ERROR_BUILD,            /* kernel program failed to build (message has log)    */
    WBCL_ERROR_IO,               /* file could not be opened, read or written           */
    WBCL_ERROR_FORMAT,           /* file is malformed or of an unsupported format       */
    WBCL_ERROR_UNSUPPORTED,      /* feature not available on this device/build          */
    WBCL_ERROR_NUMERIC,          /* numerical failure: non-finite input, non-SPD matrix */
    WBCL_ERROR_CONTEXT_MISMATCH, /* tensor belongs to a different context               */
    WBCL_ERROR_PEER              /* another participant of a distributed call failed    */
} wbcl_status;

/* Short constant name of a status, e.g. "WBCL_ERROR_SHAPE". Never NULL. */
const char *wbcl_status_name(wbcl_status status);

#ifdef __cplusplus
}
#endif
#endif
