/* Status messages, the version, and the error-filling helper. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "msda_internal.h"

static const char *const status_messages[MSDA_STATUS_COUNT] = {
    [MSDA_OK] = "success",
    [MSDA_ERR_NULL_ARGUMENT] = "a required pointer is NULL",
    [MSDA_ERR_BAD_DTYPE] = "unknown data type",
    [MSDA_ERR_BAD_SIZE] = "a size (N, S, M, D, Lq, L or P) is not positive or too large",
    [MSDA_ERR_TOO_MANY_LEVELS] = "more levels than MSDA_MAX_LEVELS",
    [MSDA_ERR_BAD_SHAPE] = "a level's height or width is not positive or too large",
    [MSDA_ERR_SHAPE_SUM] = "the sum of the levels' H*W differs from S",
    [MSDA_ERR_LEVEL_START] = "level_start differs from the prefix sums of the levels' H*W",
    [MSDA_ERR_SIZE_OVERFLOW] = "a tensor's element count overflows 64-bit indexing",
    [MSDA_ERR_NO_DRIVER] = "the CUDA driver (libcuda.so.1) could not be loaded",
    [MSDA_ERR_DRIVER_TOO_OLD] = "the CUDA driver lacks an entry point the library needs",
    [MSDA_ERR_NO_CONTEXT] = "no current CUDA context on the calling thread",
    [MSDA_ERR_NO_KERNEL_IMAGE] = "no embedded device code loads on this device",
    [MSDA_ERR_DTYPE_NOT_BUILT] = "the device code was built without this data type",
    [MSDA_ERR_CUDA] = "a CUDA driver call failed",
    [MSDA_ERR_OUT_OF_MEMORY] = "out of host memory",
    [MSDA_ERR_TOO_MANY_CONTEXTS] = "too many CUDA contexts for the module cache",
    [MSDA_ERR_BAD_ARGUMENT] = "invalid argument",
};

const char *msda_status_string(msda_status status) {
    if ((int)status < 0 || (int)status >= MSDA_STATUS_COUNT || !status_messages[status])
        return "unknown status";
    return status_messages[status];
}

#ifndef MSDA_VERSION_STRING
#error "MSDA_VERSION_STRING comes from the project's VERSION file (kernels/libmsda.json: host.version_define)"
#endif
const char *msda_version(void) { return MSDA_VERSION_STRING; }

int msda_abi_version(void) { return MSDA_ABI_VERSION; }

msda_status msda_fail(msda_error *err, msda_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        err->status = status;
        err->cuda_result = 0;
        err->cuda_name[0] = '\0';
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

size_t msda_dtype_size(msda_dtype dtype) {
    switch (dtype) {
    case MSDA_F32: return 4;
    case MSDA_F64: return 8;
    case MSDA_F16:
    case MSDA_BF16: return 2;
    }
    return 0;
}

const char *msda_dtype_name(msda_dtype dtype) {
    switch (dtype) {
    case MSDA_F32: return "f32";
    case MSDA_F64: return "f64";
    case MSDA_F16: return "f16";
    case MSDA_BF16: return "bf16";
    }
    return "?";
}
