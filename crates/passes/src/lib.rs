//! Compiler passes over the kernel world: semantic checks now; layout inference, resource estimates,
//! lowering to the thread program and CUDA emission as they land.
//!
//! Invariants of this crate:
//! - Every pass is a pure function of a [`World`](tilec_ir::World) (and a target): no I/O, no caches,
//!   no salsa. The database in `tilec-db` decides what to memoize.
//! - Passes anchor diagnostics at entities, never at byte offsets: positions live outside the world.
//! - Nothing here panics on any world the front end can build.

pub mod check;
pub mod cuda;
pub mod hardware;
pub mod layout;
pub mod liveness;
pub mod lower;
pub mod options;
pub mod regions;
pub mod resources;
pub mod roofline;
pub mod thread_groups;

pub use check::check_world;
pub use options::CodegenOptions;
