//! Layouts: fragment layouts, the algebra on them (decided by enumeration), and tensor-core and
//! shared-memory layouts.

pub mod fragment;

pub use fragment::{Collision, FragmentLayout, flatten, fresh_vars, points};
