//! Layouts: fragment layouts, the algebra on them (decided by enumeration), tensor-core layouts,
//! and their inference over a kernel world.

mod derive;
mod diagnose;
pub mod fragment;
pub mod infer;
pub mod tensor_core;
mod vectorize;

pub use fragment::{Collision, FragmentLayout, flatten, fresh_vars, points};
pub use infer::{Inferred, Layouts, Origin, infer_layouts};
