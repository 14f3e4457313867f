//! The CUDA backend: the driver loaded at run time (cudarc's `dynamic-loading`), devices and
//! their primary contexts, device memory, and the kernels of `kernels/*.cu` compiled by NVRTC.
//! Nothing here is reached on a host without libcuda: [`probe`] says so in one line first.
