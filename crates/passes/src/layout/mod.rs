//! Layouts: fragment layouts, the algebra on them (decided by enumeration), and tensor-core and
//! shared-memory layouts.

mod derive;
mod diagnose;
pub mod fragment;
pub mod infer;
pub mod tensor_core;
mod vectorize;

pub use fragment::{Collision, FragmentLayout, flatten, fresh_vars, points};
pub use infer::{Inferred, Layouts, Origin, infer_layouts};
