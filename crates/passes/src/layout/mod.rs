//! Layouts: fragment layouts, the algebra on them (decided by enumeration), tensor-core layouts,
//! and their inference over a kernel world.

pub mod algebra;
mod derive;
mod diagnose;
pub mod fragment;
pub mod infer;
pub mod shared;
pub mod shared_infer;
pub mod tensor_core;
mod validate;
pub(crate) mod vectorize;

pub use algebra::{Access, FragmentInverse, IndexMap, RepeatOn, RepeatOrder, Uncontained};
pub use fragment::{Collision, FragmentLayout, flatten, fresh_vars, points};
pub use infer::{Inferred, Layouts, LoopPlan, Origin, infer_layouts, plan_loops};
pub use shared::{BankSwizzle, SharedLayout, Swizzle, gemm_operand_layout, merge_swizzles};
pub use shared_infer::{SharedAssigned, SharedOrigin};
pub use tensor_core::{
    GemmInstruction, gemm_operand_a_layout, select_gemm_instruction, wgmma_partition,
};
