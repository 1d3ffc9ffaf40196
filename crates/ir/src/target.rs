//! The GPU architectures tilec compiles for, and the per-block limits checks compare against.

use std::fmt;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Target {
    /// Ampere (A100): mma.sync, cp.async.
    Sm80,
    /// Hopper (H100, H200): wgmma, TMA. The default: it is the GPU the project measures on.
    #[default]
    Sm90,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::Sm80, Target::Sm90];

    pub fn name(self) -> &'static str {
        match self {
            Target::Sm80 => "sm_80",
            Target::Sm90 => "sm_90",
        }
    }

    /// Accepts `sm_80`, `sm80`, `80`, and the same for 90.
    pub fn from_name(name: &str) -> Option<Target> {
        match name.trim_start_matches("sm").trim_start_matches('_') {
            "80" => Some(Target::Sm80),
            "90" | "90a" => Some(Target::Sm90),
            _ => None,
        }
    }

    /// The most dynamic shared memory one block may use (the opt-in maximum), in bytes.
    pub fn shared_memory_per_block(self) -> u64 {
        match self {
            Target::Sm80 => 163 * 1024,
            Target::Sm90 => 227 * 1024,
        }
    }
}

impl Target {
    /// Shared memory of one streaming multiprocessor that blocks can use, in bytes.
    pub fn shared_memory_per_sm(self) -> u64 {
        match self {
            Target::Sm80 => 164 * 1024,
            Target::Sm90 => 228 * 1024,
        }
    }

    /// Shared memory the driver reserves for each resident block (both architectures).
    pub fn reserved_shared_memory_per_block(self) -> u64 {
        1024
    }

    /// Resident threads one multiprocessor can hold.
    pub fn threads_per_sm(self) -> u64 {
        2048
    }

    /// Resident blocks one multiprocessor can hold.
    pub fn blocks_per_sm(self) -> u64 {
        32
    }

    /// 32-bit registers of one multiprocessor.
    pub fn registers_per_sm(self) -> u64 {
        65536
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
