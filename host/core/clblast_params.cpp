/* CLBlast's current tuning parameters of one kernel on one device (the values its database, or
 * an earlier CLBlastOverrideParameters, gives). CLBlast 1.5 offers this query in its C++ API
 * only (clblast::RetrieveParameters); this is the C entry point host/core/blas.c uses. */
#include <clblast.h>

#include <string>
#include <unordered_map>

extern "C" int wbcl__clblast_retrieve(cl_device_id device, const char *kernel, size_t n, const char *const *names,
                                      size_t *values);

/* Fills values[i] with parameter names[i] of `kernel` in single precision. Returns 0, or the
 * CLBlast status (negative) of a failed query, or 1 if a name is not one of the kernel's. */
extern "C" int wbcl__clblast_retrieve(cl_device_id device, const char *kernel, size_t n, const char *const *names,
                                      size_t *values)
{
    try {
        std::unordered_map<std::string, size_t> p;
        const clblast::StatusCode s = clblast::RetrieveParameters(device, kernel, clblast::Precision::kSingle, p);
        if (s != clblast::StatusCode::kSuccess) return static_cast<int>(s) < 0 ? static_cast<int>(s) : -1;
        for (size_t i = 0; i < n; i++) {
            const auto it = p.find(names[i]);
            if (it == p.end()) return 1;
            values[i] = it->second;
        }
        return 0;
    } catch (...) {
        return -1;
    }
}
