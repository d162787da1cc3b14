/* wbcl — portable OpenCL engine for white-box deep networks. Umbrella header:
 * include this one. Each header below documents its part of the API. (wbcl/mpi.h, the optional
 * MPI layer of -DWBCL_MPI=ON, is separate: it needs <mpi.h> and links wbcl_mpi.) */
#ifndef WBCL_WBCL_H
#define WBCL_WBCL_H

#include "wbcl/status.h"
#include "wbcl/device.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/gemm.h"
#include "wbcl/ops.h"
#include "wbcl/linalg.h"
#include "wbcl/heads.h"
#include "wbcl/ref.h"
#include "wbcl/io.h"
#include "wbcl/weights.h"
#include "wbcl/attention.h"
#include "wbcl/tssa.h"
#include "wbcl/xca.h"
#include "wbcl/aot.h"
#include "wbcl/energy.h"
#include "wbcl/ista.h"
#include "wbcl/measures.h"
#include "wbcl/redunet.h"
#include "wbcl/models.h"
#include "wbcl/circulant.h"
#include "wbcl/tuning.h"

#endif
