//! The CPU emulator of the thread program and the CUDA backend (cudarc: NVRTC, module cache, launch).
