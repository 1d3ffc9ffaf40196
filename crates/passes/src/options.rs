//! What code is generated for: the target architecture and the TileLang pass configs that switch
//! its Hopper features off (`tl.disable_wgmma`, `tl.disable_tma_lower`,
//! `tl.disable_warp_specialized`), plus tilec's own `tilec.disable_gemm_overlap`,
//! `tilec.disable_epilogue_staging` and `tilec.disable_persistent`, and the opt-in
//! `tilec.tma_store`.

use tilec_ir::{ConstValue, Target};

/// The choices every pass that depends on the architecture reads. On sm_80 every Hopper feature is
/// off whatever the configs say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CodegenOptions {
    pub target: Target,
    /// `T.gemm` may run on `wgmma` (sm_90 unless `tl.disable_wgmma`).
    pub wgmma: bool,
    /// Pipelined global → shared copies may run on TMA with mbarriers (sm_90 unless
    /// `tl.disable_tma_lower`).
    pub tma: bool,
    /// A pipelined loop whose copies run on TMA may get a producer warpgroup of its own (sm_90
    /// unless `tl.disable_warp_specialized`, and only where TMA is on).
    pub warp_specialized: bool,
    /// A warp-specialized loop whose consumer warpgroups (two or more) run two gemms with other
    /// work between them (attention) gets FlashAttention-3's schedule: each iteration's first gemm
    /// issued with the previous iteration's second, the warpgroups taking turns at issuing them
    /// (`lower/overlap.rs`). The schedule rests on wgmma's asynchronous issue, so it needs wgmma
    /// as well as warp specialization; on unless `tilec.disable_gemm_overlap` is set.
    pub overlap_gemms: bool,
    /// A tensor-core gemm's accumulator stored to global memory goes through a padded shared tile,
    /// leaving as 16-byte vectors (`lower/epilogue.rs`). On unless
    /// `tilec.disable_epilogue_staging` is set.
    pub stage_epilogues: bool,
    /// A warp-specialized gemm launch becomes persistent: one block per multiprocessor walks the
    /// tiles, its producer loading the next tile's stages while the consumers store the last one
    /// (`lower/persistent.rs`). On where warp specialization is, unless `tilec.disable_persistent`
    /// is set.
    pub persistent: bool,
    /// A shared → global `T.copy` whose shared layout a TMA box reproduces is stored by one thread
    /// through a tensor map (`cp.async.bulk.tensor`, `lower/tma.rs`) instead of by every thread.
    /// Opt-in with `tilec.tma_store` (and only where TMA is on): on attention's output it
    /// measured no faster than the threads' own stores (BENCHMARKS.md).
    pub tma_store: bool,
}

impl CodegenOptions {
    /// The options for `target` under a kernel's effective pass configs. A config counts as set
    /// when its value is truthy (`True`, a non-zero number or a non-empty string), as Python
    /// would read it.
    pub fn new(target: Target, pass_configs: &[(String, ConstValue)]) -> CodegenOptions {
        let set = |key: &str| {
            pass_configs
                .iter()
                .any(|(name, value)| name == key && is_truthy(value))
        };
        let hopper = target == Target::Sm90;
        let tma = hopper && !set("tl.disable_tma_lower");
        let warp_specialized = tma && !set("tl.disable_warp_specialized");
        let wgmma = hopper && !set("tl.disable_wgmma");
        CodegenOptions {
            target,
            wgmma,
            tma,
            warp_specialized,
            overlap_gemms: wgmma && warp_specialized && !set("tilec.disable_gemm_overlap"),
            stage_epilogues: !set("tilec.disable_epilogue_staging"),
            persistent: warp_specialized && !set("tilec.disable_persistent"),
            tma_store: tma && set("tilec.tma_store"),
        }
    }

    /// The options of a target with no pass configs.
    pub fn for_target(target: Target) -> CodegenOptions {
        CodegenOptions::new(target, &[])
    }
}

fn is_truthy(value: &ConstValue) -> bool {
    match value {
        ConstValue::None => false,
        ConstValue::Bool(flag) => *flag,
        ConstValue::Int(n) => *n != 0,
        ConstValue::Float(_) => value.as_f64().is_some_and(|x| x != 0.0),
        ConstValue::Str(text) => !text.is_empty(),
        ConstValue::DType(_) => true,
        ConstValue::Tuple(items) | ConstValue::List(items) => !items.is_empty(),
        ConstValue::Dict(items) => !items.is_empty(),
        // A pass config only known at run time turns nothing on.
        ConstValue::RunTime => false,
        ConstValue::Callable(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_configs_switch_wgmma_off_on_hopper_only() {
        assert!(CodegenOptions::for_target(Target::Sm90).wgmma);
        assert!(!CodegenOptions::for_target(Target::Sm80).wgmma);
        let off = [("tl.disable_wgmma".to_owned(), ConstValue::Bool(true))];
        assert!(!CodegenOptions::new(Target::Sm90, &off).wgmma);
        let kept = [("tl.disable_wgmma".to_owned(), ConstValue::Bool(false))];
        assert!(CodegenOptions::new(Target::Sm90, &kept).wgmma);
    }

    #[test]
    fn tma_and_warp_specialization_have_their_own_switches() {
        let hopper = CodegenOptions::for_target(Target::Sm90);
        assert!(hopper.tma && hopper.warp_specialized);
        let ampere = CodegenOptions::for_target(Target::Sm80);
        assert!(!ampere.tma && !ampere.warp_specialized);
        let no_tma = [("tl.disable_tma_lower".to_owned(), ConstValue::Int(1))];
        let options = CodegenOptions::new(Target::Sm90, &no_tma);
        assert!(options.wgmma && !options.tma && !options.warp_specialized);
        let no_ws = [(
            "tl.disable_warp_specialized".to_owned(),
            ConstValue::Bool(true),
        )];
        let options = CodegenOptions::new(Target::Sm90, &no_ws);
        assert!(options.tma && !options.warp_specialized);
    }

    #[test]
    fn gemm_overlap_is_on_by_default_and_needs_warp_specialization_and_wgmma() {
        assert!(CodegenOptions::for_target(Target::Sm90).overlap_gemms);
        assert!(!CodegenOptions::for_target(Target::Sm80).overlap_gemms);
        let off = [(
            "tilec.disable_gemm_overlap".to_owned(),
            ConstValue::Bool(true),
        )];
        assert!(!CodegenOptions::new(Target::Sm90, &off).overlap_gemms);
        let single_role = [(
            "tl.disable_warp_specialized".to_owned(),
            ConstValue::Bool(true),
        )];
        assert!(!CodegenOptions::new(Target::Sm90, &single_role).overlap_gemms);
        let mma_sync = [("tl.disable_wgmma".to_owned(), ConstValue::Bool(true))];
        assert!(!CodegenOptions::new(Target::Sm90, &mma_sync).overlap_gemms);
    }

    #[test]
    fn tma_stores_are_opt_in_and_need_tma() {
        assert!(!CodegenOptions::for_target(Target::Sm90).tma_store);
        let on = ("tilec.tma_store".to_owned(), ConstValue::Bool(true));
        assert!(CodegenOptions::new(Target::Sm90, std::slice::from_ref(&on)).tma_store);
        assert!(!CodegenOptions::new(Target::Sm80, std::slice::from_ref(&on)).tma_store);
        let no_tma = ("tl.disable_tma_lower".to_owned(), ConstValue::Bool(true));
        assert!(!CodegenOptions::new(Target::Sm90, &[on, no_tma]).tma_store);
    }

    #[test]
    fn epilogue_staging_is_on_by_default_on_both_targets() {
        assert!(CodegenOptions::for_target(Target::Sm90).stage_epilogues);
        assert!(CodegenOptions::for_target(Target::Sm80).stage_epilogues);
        let off = [(
            "tilec.disable_epilogue_staging".to_owned(),
            ConstValue::Bool(true),
        )];
        assert!(!CodegenOptions::new(Target::Sm90, &off).stage_epilogues);
        assert!(!CodegenOptions::new(Target::Sm80, &off).stage_epilogues);
    }

    #[test]
    fn persistence_is_on_by_default_and_needs_warp_specialization() {
        assert!(CodegenOptions::for_target(Target::Sm90).persistent);
        assert!(!CodegenOptions::for_target(Target::Sm80).persistent);
        let off = [(
            "tilec.disable_persistent".to_owned(),
            ConstValue::Bool(true),
        )];
        assert!(!CodegenOptions::new(Target::Sm90, &off).persistent);
        let single_role = [(
            "tl.disable_warp_specialized".to_owned(),
            ConstValue::Bool(true),
        )];
        assert!(!CodegenOptions::new(Target::Sm90, &single_role).persistent);
    }
}
