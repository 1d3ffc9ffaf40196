//! The end-to-end tests of tilec, folded into one test binary (as rust-analyzer's and ty's are):
//! each module was its own binary before, and each binary linked the whole workspace again.
//!
//! The modules that read `../shared` (the corpus and TileLang's own examples) are conformance
//! suites; the core properties are tested on fixtures in this repository (`tests/fixtures/`,
//! `examples/`), so that a clone without `../shared` still tests something real.

mod barriers;
mod corpus;
mod fixtures;
mod gemm_dtypes;
mod gemm_operands;
mod gemm_slices;
mod generic_instances;
mod imports;
mod incremental;
mod language_ops;
mod layout_diagnostics;
mod layout_svg;
mod layouts;
mod layouts_order;
mod lowering;
mod realworld;
mod realworld_layouts;
mod realworld_ops;
mod reducers;
mod robustness;
mod runtime_scalars;
mod settings;
mod shared_plan;
mod thread_ops;
mod tidy;
mod tilelang_layouts;
mod tilelang_reference;
mod warp_ops;
mod warp_specialized;
