//! The CPU emulator of the thread program and the CUDA backend (cudarc: NVRTC, module cache, launch),
//! with the host tensors both of them read and write.
//!
//! Invariants of this crate:
//! - It decides nothing about layouts or lowering: it runs a [`tilec_ir::ThreadProgram`] as given.
//! - Nothing here panics on a program, an input or a missing driver: failures are values.

pub mod compare;
pub mod cuda;
pub mod emulator;
pub mod files;
pub mod inputs;
pub mod npy;
pub mod tensor;
pub mod tuned;

pub use compare::{Comparison, FP8_WGMMA_TOLERANCE, compare, tolerance_for, tolerance_in};
pub use cuda::{CudaDevice, GpuInfo, Unavailable};
pub use emulator::{
    BlockOrder, EmulatorError, EmulatorReport, run_program, run_program_observed,
    run_program_within,
};
pub use tensor::HostTensor;
