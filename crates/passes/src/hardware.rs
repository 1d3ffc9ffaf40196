//! Hardware models of the GPUs tilec recommends tiles for, read from `data/gpus.toml`.
//!
//! The figures live in a data file rather than in code so that each one can carry its source
//! (measured here, or published) and a new GPU is one table, not a code change. The file is
//! compiled into the binary, so reading it is no I/O.

use serde::Deserialize;
use tilec_ir::Target;

use crate::resources::SmLimits;

/// The data file, as compiled in.
const GPUS_TOML: &str = include_str!("../data/gpus.toml");

/// One GPU: its limits, its rates and where they come from.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct GpuModel {
    pub name: String,
    /// The CUDA architecture, `sm_80` or `sm_90`.
    pub arch: String,
    /// The target whose recommendations use this model unless another is named.
    #[serde(default)]
    pub default_for: Option<String>,
    pub sms: u64,
    pub shared_memory_per_sm: u64,
    pub shared_memory_per_block: u64,
    pub reserved_shared_per_block: u64,
    pub registers_per_sm: u64,
    pub max_registers_per_thread: u64,
    pub threads_per_sm: u64,
    pub blocks_per_sm: u64,
    pub warp_size: u64,
    pub mma_shapes: Vec<String>,
    /// Device-memory bandwidth, GB/s.
    pub dram_gbs: f64,
    /// L2 to multiprocessor bandwidth, GB/s.
    pub l2_gbs: f64,
    /// Shared-memory bandwidth of all multiprocessors, GB/s.
    pub shared_gbs: f64,
    /// mma.sync fp16 rate, TFLOP/s.
    pub tensor_tflops: f64,
    /// fp32 CUDA-core rate, TFLOP/s.
    pub simt_tflops: f64,
    pub launch_us: f64,
    pub latency_us: f64,
    pub source: String,
}

#[derive(Deserialize)]
struct GpuFile {
    gpu: Vec<GpuModel>,
}

impl GpuModel {
    /// Every model of the data file, in its order.
    pub fn all() -> Vec<GpuModel> {
        // The file is part of the source tree and a unit test parses it, so a malformed file fails
        // the tests rather than a user's command; an empty list is the fallback nonetheless.
        toml::from_str::<GpuFile>(GPUS_TOML)
            .map(|file| file.gpu)
            .unwrap_or_default()
    }

    /// The model named `name` (case-insensitive, `-` and `_` ignored), or the only one whose name
    /// starts with it (`a100` for `A100-SXM4`).
    pub fn named(name: &str) -> Option<GpuModel> {
        let key = |text: &str| text.to_ascii_lowercase().replace(['-', '_', ' '], "");
        let wanted = key(name);
        let all = Self::all();
        if let Some(exact) = all.iter().find(|gpu| key(&gpu.name) == wanted) {
            return Some(exact.clone());
        }
        let mut prefixed = all
            .into_iter()
            .filter(|gpu| key(&gpu.name).starts_with(&wanted));
        let first = prefixed.next();
        if prefixed.next().is_some() {
            return None;
        }
        first
    }

    /// The model recommendations for `target` use by default.
    pub fn default_for(target: Target) -> Option<GpuModel> {
        let all = Self::all();
        let by_default = all
            .iter()
            .find(|gpu| gpu.default_for.as_deref() == Some(target.name()))
            .cloned();
        by_default.or_else(|| all.into_iter().find(|gpu| gpu.arch == target.name()))
    }

    /// The target tilec compiles for on this GPU.
    pub fn target(&self) -> Option<Target> {
        Target::from_name(&self.arch)
    }

    /// What one multiprocessor offers the blocks resident on it.
    pub fn sm_limits(&self) -> SmLimits {
        SmLimits {
            threads: self.threads_per_sm,
            blocks: self.blocks_per_sm,
            shared_memory: self.shared_memory_per_sm,
            reserved_shared_per_block: self.reserved_shared_per_block,
            registers: self.registers_per_sm,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_file_parses_and_agrees_with_the_targets_limits() {
        let all = GpuModel::all();
        let names: Vec<&str> = all.iter().map(|gpu| gpu.name.as_str()).collect();
        assert_eq!(names, ["H200", "H100-SXM", "A100-SXM4"]);
        for target in Target::ALL {
            let gpu = GpuModel::default_for(target).expect("a default model per target");
            assert_eq!(gpu.target(), Some(target));
            assert_eq!(gpu.sm_limits(), SmLimits::of(target), "{}", gpu.name);
            assert_eq!(
                gpu.shared_memory_per_block,
                target.shared_memory_per_block()
            );
        }
        assert_eq!(GpuModel::named("h100_sxm").map(|gpu| gpu.sms), Some(132));
        assert_eq!(GpuModel::named("a100").map(|gpu| gpu.sms), Some(108));
        assert!(
            GpuModel::named("h").is_none(),
            "ambiguous: H200 and H100-SXM"
        );
        assert!(GpuModel::named("v100").is_none());
    }
}
