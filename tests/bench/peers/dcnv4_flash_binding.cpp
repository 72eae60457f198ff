// DCNv4's flash MSDA forward and backward as a module of their own: its vision.cpp also binds the
// DCNv4 convolution, whose CUDA file the bench does not need and which would double the build.
#include <torch/extension.h>

#include "cuda/flash_deform_attn_cuda.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("flash_deform_attn_forward", &flash_deform_attn_cuda_forward);
    m.def("flash_deform_attn_backward", &flash_deform_attn_cuda_backward);
}
