//! The TileLang language module (`T.*`): allocations, loops and launches, tile operations, math,
//! and layouts. Each call either returns a value or adds an entity to the world.

use std::rc::Rc;

use tilec_ir::{
    Access, AccessKind, AtomicSource, Code, ControlOp, DType, DataExpr, EntityId, EntityKind,
    ExprId, ExternArg, Intrinsic, LayoutAnnotation, LayoutKind, LoopKind, NamedBarrier, ReduceKind,
    Region, RegionDim, ScanOp, Scope, TileOp, VarId, WarpPolicy,
};

use crate::builder::{Block, Builder, Eval, Stop};
use crate::eval::{Args, promote};
use crate::value::{PersistentTiles, Value};
use ruff_python_ast::Operator;
use tilec_ir::Span;

mod any_all;
mod byte_view;
mod coordinates;
mod data_view;
mod dp4a;
mod extern_call;
mod float_class;
mod im2col;
mod mma_swizzle;
mod pointer_tensor;
mod reducer;
mod reinterpret;
mod thread_allreduce;
mod vector_atomic;
mod warp;
mod workspace;

/// `T.*` names tilec knows but does not implement yet, with what to say about them.
const NOT_YET: &[&str] = &["print", "gemm_sp", "transpose"];

/// Operations of Blackwell (sm_100 and later) only: tensor memory, `tcgen05` and thread-block
/// clusters as TileLang exposes them there.
fn blackwell_only(name: &str) -> bool {
    name.starts_with("tcgen05_")
        || matches!(
            name,
            "alloc_tmem" | "ClusterKernel" | "alloc_cluster_barrier" | "block_rank_in_cluster"
        )
}

impl Builder<'_> {
    /// One diagnostic per kernel for operations of hardware the target is not: the first names the
    /// hardware it needs and the target compiled for; the kernel's analysis stops there, since
    /// what follows is written for that hardware.
    fn other_hardware(&mut self, name: &str, span: Span) -> Stop {
        if std::mem::replace(&mut self.reported_hardware, true) {
            return Stop;
        }
        let (major, minor) = self.target.compute_capability;
        self.error(
            Code::NotAnalysed,
            span,
            format!(
                "`T.{name}` needs an NVIDIA Blackwell GPU (sm_100 or later), and this kernel is \
                 compiled for sm_{major}{minor}: tilec does not target Blackwell yet, so the \
                 kernel's other Blackwell operations are not reported"
            ),
        )
    }

    pub(crate) fn dsl_call<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        match name {
            "Tensor" | "Buffer" => self.tensor_type(args),
            "grid" => self.grid_frame(args),
            "StridedTensor" => self.strided_tensor_type(args),
            "Kernel" => self.kernel_frame(args),
            "Parallel" | "Pipelined" | "serial" | "Serial" | "unroll" | "Unroll" | "vectorized"
            | "Vectorized" | "parallel" => self.loop_frame(name, args),
            "alloc_shared" => self.alloc(args, Scope::Shared, "T.alloc_shared"),
            "alloc_fragment" => self.alloc(args, Scope::Fragment, "T.alloc_fragment"),
            "alloc_local" => self.alloc(args, Scope::Local, "T.alloc_local"),
            "alloc_var" => self.alloc_var(args),
            "reshape" | "view" => self.alias(name, args),
            "copy" | "clear" | "fill" | "gemm" | "cumsum" | "cummax" | "atomic_add"
            | "atomic_max" | "atomic_min" | "use_swizzle" | "annotate_layout" => {
                self.tile_op(name, args)
            }
            "async_copy" => self.async_copy(args),
            "reduce_sum" | "reduce_max" | "reduce_min" | "reduce_abssum" | "reduce_absmax" => {
                self.tile_op(name, args)
            }
            "Fragment" => self.layout(LayoutKind::Fragment, args),
            "Layout" => self.layout(LayoutKind::Layout, args),
            "make_swizzled_layout" => self.swizzled_layout(args),
            "make_mma_swizzle_layout" => self.make_mma_swizzle_layout(args),
            "get_swizzle_layout" => self.get_swizzle_layout(args),
            "get_thread_binding" | "get_block_binding" | "get_warp_idx" | "get_warp_idx_sync"
            | "get_lane_idx" | "get_warp_group_idx" | "thread_binding" => {
                self.thread_query(name, args)
            }
            "sync_threads"
            | "sync_warp"
            | "pdl_sync"
            | "pdl_trigger"
            | "thread_return"
            | "device_assert"
            | "sync_grid"
            | "named_barrier_arrive" => self.control(name, args),
            "shfl_sync"
            | "shfl_xor"
            | "shfl_down"
            | "shfl_up"
            | "tvm_warp_shuffle"
            | "tvm_warp_shuffle_down"
            | "tvm_warp_shuffle_up" => self.shuffle(name, args),
            "warp_reduce_sum" | "warp_reduce_max" | "warp_reduce_min" | "warp_reduce_bitand"
            | "warp_reduce_bitor" => self.warp_reduce(name, args),
            "rng_init" => self.rng_init(args),
            "rng_rand" | "rng_rand_float" => self.rng_draw(name, args),
            "Persistent" => self.persistent_frame(args),
            // TVMScript's frame spelling of `if`: `with T.If(c): with T.Then(): ... with
            // T.Else(): ...`, run as the `if` statement it is (`exec::exec_if_frame`).
            "If" => Ok(Value::IfFrame(Rc::new(self.required(&args, 0, "cond")?))),
            "Then" => Ok(Value::BranchFrame(true)),
            "Else" => Ok(Value::BranchFrame(false)),
            "alloc_barrier"
            | "ws"
            | "tma_copy"
            | "mbarrier_arrive"
            | "barrier_arrive"
            | "mbarrier_wait_parity"
            | "barrier_wait"
            | "mbarrier_expect_tx"
            | "fence_proxy_async"
            | "access_ptr"
            | "ptx_cp_async"
            | "cp_async_barrier_noinc" => self.barrier_call(name, args),
            // `T.wgmma_gemm` is `T.gemm` whose wait the user places (`T.wait_wgmma`). tilec's
            // gemm waits for its own results, so the later wait has nothing left to wait for.
            "wgmma_gemm" => self.tile_op("gemm", args),
            "wait_wgmma" => Ok(Value::None),
            // Hints with no effect on values: `T.assume(cond)` tells TVM's simplifier a fact the
            // caller guarantees, and `T.warpgroup_fence_operand` keeps nvcc from moving register
            // accesses across a wgmma that tilec's own code already orders.
            "assume" | "warpgroup_fence_operand" => Ok(Value::None),
            // TileLang's older and newer spellings of the tile matrix product.
            "gemm_v1" | "gemm_v2" => self.tile_op("gemm", args),
            // TIR's logical operators as functions.
            "And" | "Or" => {
                let lhs = self.required(&args, 0, "a")?;
                let rhs = self.required(&args, 1, "b")?;
                let op = if name == "And" {
                    tilec_ir::data::BinaryOp::And
                } else {
                    tilec_ir::data::BinaryOp::Or
                };
                self.logical(op, lhs, rhs, args.span)
            }
            "isnan" | "isinf" | "isfinite" => self.float_class(name, args),
            "max_value" | "min_value" => self.extreme_value(name, args),
            // tilec's element copies complete when they are made (its own `cp.async` pipelines
            // are planned by tilec), so the groups of `T.Parallel(..., prefer_async=True)` have
            // nothing left in flight to commit or wait for.
            "ptx_commit_group" | "ptx_wait_group" => Ok(Value::None),
            "infinity" => {
                let dtype = self.dtype_arg(&args, 0, "dtype")?;
                Ok(self.data(
                    DataExpr::Float {
                        bits: f64::INFINITY.to_bits(),
                        dtype: Some(dtype),
                    },
                    Some(dtype),
                ))
            }
            "Cast" | "cast" => {
                let (dtype_index, value_index) = if name == "Cast" { (0, 1) } else { (1, 0) };
                let dtype = self.dtype_arg(&args, dtype_index, "dtype")?;
                let value = self.required(&args, value_index, "value")?;
                let (id, _) = self.data_expr(&value, args.span)?;
                Ok(self.data(DataExpr::Cast { dtype, value: id }, Some(dtype)))
            }
            "ceildiv" | "floordiv" | "floormod" => self.integer_op(name, args),
            // `T.Select` is TIR's spelling of `T.if_then_else` (both operands are evaluated).
            "if_then_else" | "Select" => {
                let cond = self.required(&args, 0, "cond")?;
                let then = self.required(&args, 1, "true_value")?;
                let otherwise = self.required(&args, 2, "false_value")?;
                self.select(cond, then, otherwise, args.span)
            }
            "max" | "min" => {
                let values = args
                    .positional
                    .into_iter()
                    .map(|(value, _)| value)
                    .collect();
                self.min_max(name == "min", values, args.span)
            }
            // TileLang's `clamp` is `min(max(x, lo), hi)`, element by element.
            "clamp" => {
                let value = self.required(&args, 0, "dst")?;
                let low = self.required(&args, 1, "min_val")?;
                let high = self.required(&args, 2, "max_val")?;
                let floor = self.min_max(false, vec![value, low], args.span)?;
                self.min_max(true, vec![floor, high], args.span)
            }
            // Hints for how a warp-specialized kernel splits registers between its warp groups
            // (`setmaxnreg`). tilec's code never rebalances registers, so there is nothing to
            // disable or set: the results are the same either way.
            "disable_warp_group_reg_alloc"
            | "no_set_max_nreg"
            | "set_max_nreg"
            | "inc_max_nreg"
            | "dec_max_nreg"
            | "annotate_producer_reg_dealloc"
            | "annotate_consumer_reg_alloc" => Ok(Value::None),
            // Attributes of the function (no aliasing, pass options such as TileLang's copy
            // vector width) and an L2 persistence window for a buffer's accesses: they steer
            // TileLang's code generation or the cache, never what the kernel computes.
            // Hints to TileLang's compiler: function attributes and compiler flags set from inside
            // the kernel.
            "func_attr" | "annotate_l2_hit_ratio" | "annotate_compile_flags" => Ok(Value::None),
            "annotate_pass_configs" => self.annotate_pass_configs(&args),
            // TVM's function spellings of Python's bitwise operators.
            "shift_left" | "shift_right" | "bitwise_and" | "bitwise_or" | "bitwise_xor" => {
                let op = match name {
                    "shift_left" => Operator::LShift,
                    "shift_right" => Operator::RShift,
                    "bitwise_and" => Operator::BitAnd,
                    "bitwise_or" => Operator::BitOr,
                    _ => Operator::BitXor,
                };
                let lhs = self.required(&args, 0, "a")?;
                let rhs = self.required(&args, 1, "b")?;
                self.binary(op, lhs, rhs, args.span)
            }
            "bitwise_not" => {
                let value = self.required(&args, 0, "a")?;
                self.invert_data(value, args.span)
            }
            "const" => self.eager_const(args),
            "empty" => self.eager_empty(args),
            "alloc_global" => self.alloc_global(args),
            "make_tensor" => self.make_tensor(args),
            "any_of" | "all_of" => self.any_or_all_of(name, args),
            "reinterpret" => self.reinterpret(args),
            "atomic_addx2" => self.vector_atomic_add(name, 2, args),
            "atomic_addx4" => self.vector_atomic_add(name, 4, args),
            "im2col" | "c2d_im2col" => self.im2col(args),
            "index_to_coordinates" => self.index_to_coordinates(args),
            "dynamic" | "symbolic" => {
                let Some(Value::Str(symbol)) = args.get(0, "name").cloned() else {
                    return Err(self.error(
                        Code::InvalidCall,
                        args.span,
                        "`T.dynamic` takes the symbol's name as a string",
                    ));
                };
                // `T.dynamic("m, n")` makes one symbol per name, as a tuple.
                let names: Vec<&str> = symbol
                    .split([',', ' '])
                    .filter(|name| !name.is_empty())
                    .collect();
                let mut symbols: Vec<Value<'a>> = names
                    .iter()
                    .map(|name| {
                        let var = self.world.exprs.var(name, None);
                        Value::Index(self.world.exprs.var_expr(var))
                    })
                    .collect();
                Ok(match symbols.len() {
                    1 => symbols.remove(0),
                    _ => Value::tuple(symbols),
                })
            }
            "prim_func" | "macro" => Ok(args
                .positional
                .into_iter()
                .next()
                .map_or(Value::None, |(v, _)| v)),
            "dtype" => Ok(Value::DType(self.dtype_arg(&args, 0, "dtype")?)),
            // The fp8 dtype of the platform: CUDA's E4M3FN or E5M2 (AMD's FNUZ formats are not
            // targets of tilec).
            "determine_fp8_type" => match args.get(0, "fp8_format") {
                None => Ok(Value::DType(DType::Float8E4M3)),
                Some(Value::Str(format)) if &**format == "e4m3" => {
                    Ok(Value::DType(DType::Float8E4M3))
                }
                Some(Value::Str(format)) if &**format == "e5m2" => {
                    Ok(Value::DType(DType::Float8E5M2))
                }
                Some(_) => Err(self.error(
                    Code::InvalidCall,
                    args.span_of(0, "fp8_format"),
                    "`determine_fp8_type` takes \"e4m3\" or \"e5m2\"",
                )),
            },
            "comm_reducer" => self.comm_reducer(args),
            "attr" => self.attr_frame(args),
            "tvm_thread_allreduce" => self.thread_allreduce(args),
            // `T.evaluate(call)`: the call has been made (and its statement added) already.
            "evaluate" => Ok(Value::None),
            "call_extern" => self.call_extern(args),
            "import_source" => self.import_source(args),
            "dp4a" => self.dp4a(args),
            "alloc_reducer" => self.alloc_reducer(args),
            "finalize_reducer" => self.finalize_reducer(args),
            "reducer_init" => self.reducer_init(args),
            "reducer_update" => self.reducer_update(args),
            _ if Intrinsic::from_name(name).is_some() => self.intrinsic(name, args),
            _ if blackwell_only(name) => Err(self.other_hardware(name, args.span)),
            _ if NOT_YET.contains(&name) => Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!("`T.{name}` is not supported by tilec yet"),
            )),
            _ => Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!("`T.{name}` is not a TileLang operation tilec knows"),
            )),
        }
    }

    /// The `T.Kernel` launch the statement being evaluated belongs to.
    fn enclosing_launch(&self) -> Option<EntityId> {
        let mut entity = match self.block? {
            Block::Body(entity) | Block::Else(entity) => entity,
        };
        loop {
            if self.world.kind(entity) == Some(EntityKind::Kernel) {
                return Some(entity);
            }
            entity = *self.world.parents.get(entity)?;
        }
    }

    /// The launch's flat thread index (made when first asked for) and its threads per dimension.
    pub(crate) fn flat_thread_index(&mut self, span: Span, what: &str) -> Eval<(ExprId, Vec<i64>)> {
        let Some(launch) = self.enclosing_launch() else {
            return Err(self.outside_launch(span, &format!("`T.{what}`")));
        };
        let (existing, threads, count) = match self.world.launches.get(launch) {
            Some(info) => (info.thread_var, info.threads.clone(), info.thread_count()),
            None => return Err(Stop),
        };
        let var = match existing {
            Some(var) => var,
            None => {
                let var = self.world.exprs.var("tx", Some(count));
                if let Some(info) = self.world.launches.get_mut(launch) {
                    info.thread_var = Some(var);
                }
                var
            }
        };
        Ok((self.world.exprs.var_expr(var), threads))
    }

    /// `threadIdx.{x,y,z}` (dimension `dim`) of a block of `threads`, from the flat index:
    /// dimension `d` is `flat // (threads[0] * ... * threads[d - 1]) % threads[d]`, and a
    /// dimension the launch does not have is 0.
    fn thread_dimension(&mut self, flat: ExprId, threads: &[i64], dim: usize) -> ExprId {
        let Some(&extent) = threads.get(dim) else {
            return self.world.exprs.int(0);
        };
        let stride: i64 = threads[..dim].iter().product();
        let stride = self.world.exprs.int(stride);
        let mut index = self.world.exprs.floordiv(flat, stride);
        if dim + 1 < threads.len() {
            let extent = self.world.exprs.int(extent);
            index = self.world.exprs.floormod(index, extent);
        }
        index
    }

    /// `T.get_thread_binding(dim)`, `T.get_block_binding(dim)`, `T.get_warp_idx(warp_size)`,
    /// `T.get_warp_idx_sync`, `T.get_lane_idx(warp_size)`, `T.get_warp_group_idx` and
    /// `T.thread_binding(start, stop, thread)`: the executing thread's (or block's) position as an
    /// integer expression.
    fn thread_query<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        match name {
            "get_block_binding" => {
                let dim = self.dimension_arg(&args, 0, "dim")?;
                Ok(Value::Index(self.block_dimension(dim, args.span, name)?))
            }
            "get_thread_binding" => {
                let dim = self.dimension_arg(&args, 0, "dim")?;
                let (flat, threads) = self.flat_thread_index(args.span, name)?;
                Ok(Value::Index(self.thread_dimension(flat, &threads, dim)))
            }
            "thread_binding" => self.thread_binding(args),
            _ => {
                let warp_size = self.int_arg(&args, 0, "warp_size", 32)?;
                let group = self.int_arg(&args, 1, "warps_per_group", 4)?;
                if warp_size <= 0 || group <= 0 {
                    return Err(self.error(
                        Code::InvalidCall,
                        args.span,
                        format!("`T.{name}` needs a positive warp size and group size"),
                    ));
                }
                let (flat, _) = self.flat_thread_index(args.span, name)?;
                let index = match name {
                    "get_lane_idx" => {
                        let size = self.world.exprs.int(warp_size);
                        self.world.exprs.floormod(flat, size)
                    }
                    "get_warp_group_idx" => {
                        let size = self.world.exprs.int(warp_size.saturating_mul(group));
                        self.world.exprs.floordiv(flat, size)
                    }
                    _ => {
                        let size = self.world.exprs.int(warp_size);
                        self.world.exprs.floordiv(flat, size)
                    }
                };
                Ok(Value::Index(index))
            }
        }
    }

    /// A dimension argument: 0, 1 or 2 (x, y, z).
    fn dimension_arg(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<usize> {
        let dim = self.int_arg(args, index, name, 0)?;
        match usize::try_from(dim) {
            Ok(dim) if dim < 3 => Ok(dim),
            _ => Err(self.error(
                Code::InvalidCall,
                args.span_of(index, name),
                format!("`{name}` must be 0, 1 or 2 (x, y or z), found {dim}"),
            )),
        }
    }

    /// `blockIdx.{x,y,z}`: the launch's block variable, or 0 for a dimension its grid lacks.
    fn block_dimension(&mut self, dim: usize, span: Span, what: &str) -> Eval<ExprId> {
        let Some(launch) = self.enclosing_launch() else {
            return Err(self.outside_launch(span, &format!("`T.{what}`")));
        };
        let var = self
            .world
            .launches
            .get(launch)
            .and_then(|info| info.block_vars.get(dim).copied());
        Ok(match var {
            Some(var) => self.world.exprs.var_expr(var),
            None => self.world.exprs.int(0),
        })
    }

    /// `T.thread_binding(start, stop, thread="threadIdx.x")`: TIR's loop bound to a launch
    /// dimension. Inside `T.Kernel` that dimension is already launched with its extent, so the
    /// binding is the dimension's index; tilec accepts it over the dimension's whole extent.
    fn thread_binding<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let first = self.loop_bound(&args, 0, "start")?;
        let (start, stop) = match args.get(1, "stop") {
            Some(Value::Str(_)) | None | Some(Value::None) => (self.world.exprs.int(0), first),
            Some(_) => (first, self.loop_bound(&args, 1, "stop")?),
        };
        let thread = match (args.get(1, "stop"), args.get(2, "thread")) {
            (Some(Value::Str(tag)), _) | (_, Some(Value::Str(tag))) => tag.to_string(),
            _ => {
                return Err(self.error(
                    Code::InvalidCall,
                    args.span,
                    "`T.thread_binding` needs `thread=\"threadIdx.x\"` (or y, z, or blockIdx.*)",
                ));
            }
        };
        let (is_block, dim) = match thread.as_str() {
            "threadIdx.x" => (false, 0),
            "threadIdx.y" => (false, 1),
            "threadIdx.z" => (false, 2),
            "blockIdx.x" => (true, 0),
            "blockIdx.y" => (true, 1),
            "blockIdx.z" => (true, 2),
            other => {
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(2, "thread"),
                    format!("unknown thread tag {other:?} (threadIdx.x/y/z or blockIdx.x/y/z)"),
                ));
            }
        };
        let (index, extent) = if is_block {
            let index = self.block_dimension(dim, args.span, "thread_binding")?;
            let extent = self.enclosing_launch().and_then(|launch| {
                let grid = self.world.launches.get(launch)?.grid.get(dim).copied();
                Some(grid.and_then(|e| self.world.exprs.as_int(e)).unwrap_or(1))
            });
            (index, extent)
        } else {
            let (flat, threads) = self.flat_thread_index(args.span, "thread_binding")?;
            let extent = threads.get(dim).copied().unwrap_or(1);
            (self.thread_dimension(flat, &threads, dim), Some(extent))
        };
        let count = self.world.exprs.sub(stop, start);
        let whole = self.world.exprs.as_int(start) == Some(0)
            && extent.is_some()
            && self.world.exprs.as_int(count) == extent;
        if !whole {
            return Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!(
                    "tilec supports `T.thread_binding` over the whole `{thread}` of the launch \
                     (0 to {}), which the kernel's `T.Kernel` gives it",
                    extent.map_or("its extent".to_owned(), |e| e.to_string())
                ),
            ));
        }
        Ok(Value::ThreadBinding(index))
    }

    /// `T.Persistent(domain, wave_size, index, group_size=8, num_stages=0)`: the frame of a loop
    /// over the tiles of `domain` that `wave_size` blocks share, this block being `index` (see
    /// `Builder::persistent_loop`). `num_stages` only asks TileLang to pipeline across tiles.
    fn persistent_frame<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let domain_value = self.required(&args, 0, "domain")?;
        let items = match &domain_value {
            Value::List(items) | Value::Tuple(items) => items.as_ref().clone(),
            other => vec![other.clone()],
        };
        let mut domain = Vec::new();
        for item in &items {
            match self.index_expr(item) {
                Some(extent) => {
                    self.check_extent(
                        extent,
                        1,
                        i64::MAX,
                        args.span_of(0, "domain"),
                        "a tile domain extent",
                    )?;
                    domain.push(extent);
                }
                None => {
                    let what = item.describe();
                    return Err(self.error(
                        Code::InvalidCall,
                        args.span_of(0, "domain"),
                        format!(
                            "the extents of a `T.Persistent` domain must be integers, found {what}"
                        ),
                    ));
                }
            }
        }
        if domain.is_empty() {
            return Err(self.error(
                Code::InvalidCall,
                args.span_of(0, "domain"),
                "`T.Persistent` needs a tile domain",
            ));
        }
        let wave_size = self.loop_bound(&args, 1, "wave_size")?;
        self.check_extent(
            wave_size,
            1,
            i64::MAX,
            args.span_of(1, "wave_size"),
            "`wave_size`",
        )?;
        let index = self.loop_bound(&args, 2, "index")?;
        let group_size = match args.get(3, "group_size") {
            None | Some(Value::None) => self.world.exprs.int(8),
            Some(_) => self.loop_bound(&args, 3, "group_size")?,
        };
        self.check_extent(
            group_size,
            1,
            i64::MAX,
            args.span_of(3, "group_size"),
            "`group_size`",
        )?;
        Ok(Value::PersistentFrame(Rc::new(PersistentTiles {
            domain,
            wave_size,
            index,
            group_size,
        })))
    }

    /// `T.sync_threads()`, `T.sync_warp()`, `T.sync_grid()`, `T.pdl_sync()`, `T.pdl_trigger()`,
    /// `T.thread_return()` and `T.device_assert(cond, msg)`.
    fn control<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let op = match name {
            "sync_threads" => ControlOp::SyncThreads {
                named: self.named_barrier(&args, false)?,
            },
            "named_barrier_arrive" => match self.named_barrier(&args, true)? {
                Some(named) => ControlOp::NamedBarrierArrive(named),
                None => return Err(Stop),
            },
            "sync_warp" => ControlOp::SyncWarp,
            "pdl_sync" => ControlOp::PdlSync,
            "pdl_trigger" => ControlOp::PdlTrigger,
            "thread_return" => ControlOp::ThreadReturn,
            "sync_grid" => ControlOp::SyncGrid,
            _ => {
                let cond = self.required(&args, 0, "cond")?;
                let (cond, _) = self.data_expr(&cond, args.span_of(0, "cond"))?;
                let message = match args.get(1, "msg") {
                    None | Some(Value::None) => String::new(),
                    Some(Value::Str(text)) => text.to_string(),
                    Some(Value::Poison) => return Err(Stop),
                    Some(other) => {
                        let what = other.describe();
                        return Err(self.error(
                            Code::InvalidCall,
                            args.span_of(1, "msg"),
                            format!("`msg` must be a string, found {what}"),
                        ));
                    }
                };
                ControlOp::DeviceAssert { cond, message }
            }
        };
        self.add_tile_op(TileOp::Control(op), &format!("`T.{name}`"), args.span)?;
        Ok(Value::None)
    }

    /// The `barrier_id` and `arrive_count` of `T.sync_threads(...)` (both or neither; `None`
    /// without them) or of `T.named_barrier_arrive(...)` (`required`): a hardware barrier id
    /// below 16 and a thread count that is a positive multiple of 32, as `bar.sync` takes.
    fn named_barrier(&mut self, args: &Args<'_>, required: bool) -> Eval<Option<NamedBarrier>> {
        let id = self.int_arg(args, 0, "barrier_id", -1)?;
        let threads = self.int_arg(args, 1, "arrive_count", -1)?;
        if id < 0 && threads < 0 && !required {
            return Ok(None);
        }
        let id = u32::try_from(id).ok().filter(|&id| id < 16);
        let threads = u32::try_from(threads)
            .ok()
            .filter(|&threads| threads > 0 && threads.is_multiple_of(32));
        match (id, threads) {
            (Some(id), Some(threads)) => Ok(Some(NamedBarrier { id, threads })),
            (None, _) => Err(self.error(
                Code::InvalidCall,
                args.span_of(0, "barrier_id"),
                "`barrier_id` must be a hardware barrier id known at compile time, 0 to 15",
            )),
            (_, None) => Err(self.error(
                Code::InvalidCall,
                args.span_of(1, "arrive_count"),
                "`arrive_count` must be a positive multiple of 32 known at compile time (the \
                 threads of whole warps that reach the barrier)",
            )),
        }
    }

    pub(crate) fn required<'a>(
        &mut self,
        args: &Args<'a>,
        index: usize,
        name: &str,
    ) -> Eval<Value<'a>> {
        match args.get(index, name) {
            Some(Value::Poison) => Err(Stop),
            Some(value) => Ok(value.clone()),
            None => Err(self.error(
                Code::InvalidCall,
                args.span,
                format!("missing argument `{name}`"),
            )),
        }
    }

    /// A dtype argument in any spelling: `T.float16`, `"float16"`, `"float"`, `buf.dtype`.
    pub(crate) fn dtype_arg(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<DType> {
        let span = args.span_of(index, name);
        match args.get(index, name) {
            Some(Value::DType(dtype)) => Ok(*dtype),
            Some(Value::Str(text)) => DType::from_name(text).ok_or_else(|| {
                self.error(Code::DtypeMismatch, span, format!("unknown dtype {text:?}"))
            }),
            Some(Value::Poison) => Err(Stop),
            // A value tilec does not evaluate (a dtype of `T` it does not model, a tensor
            // parameter, an object) may well be a dtype in TileLang: tilec's limit, not the user's
            // error.
            Some(
                other @ (Value::ModuleFn(..)
                | Value::PendingTensor
                | Value::Opaque(_)
                | Value::Tensor(_)
                | Value::Object(_)
                | Value::Method(..)),
            ) => {
                let what = other.describe();
                Err(self.error(
                    Code::NotAnalysed,
                    span,
                    format!("tilec cannot evaluate this dtype: it is {what} here"),
                ))
            }
            Some(other) => {
                let what = other.describe();
                Err(self.error(
                    Code::DtypeMismatch,
                    span,
                    format!("expected a dtype, found {what}"),
                ))
            }
            None => Err(self.error(
                Code::InvalidCall,
                span,
                format!("missing argument `{name}`"),
            )),
        }
    }

    fn int_arg(&mut self, args: &Args<'_>, index: usize, name: &str, default: i64) -> Eval<i64> {
        match args.get(index, name) {
            None | Some(Value::None) => Ok(default),
            Some(Value::Int(value)) => Ok(*value),
            Some(Value::Bool(value)) => Ok(i64::from(*value)),
            Some(Value::Poison) => Err(Stop),
            Some(other) => {
                let what = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    args.span_of(index, name),
                    format!("`{name}` must be an int known at compile time, found {what}"),
                ))
            }
        }
    }

    fn bool_arg(&mut self, args: &Args<'_>, index: usize, name: &str, default: bool) -> Eval<bool> {
        match args.get(index, name) {
            None => Ok(default),
            Some(Value::Poison) => Err(Stop),
            Some(value) => value.truthy().ok_or_else(|| {
                self.error(
                    Code::InvalidCall,
                    args.span_of(index, name),
                    format!("`{name}` must be known at compile time"),
                )
            }),
        }
    }

    /// A shape: a tuple or list of extents, or one extent.
    fn shape_of(&mut self, value: &Value<'_>, span: Span) -> Eval<Vec<ExprId>> {
        let items: Vec<Value<'_>> = match value {
            Value::Tuple(items) | Value::List(items) => items.to_vec(),
            Value::Poison => return Err(Stop),
            single => vec![single.clone()],
        };
        let mut shape = Vec::with_capacity(items.len());
        for item in &items {
            match self.index_expr(item) {
                Some(extent) => shape.push(extent),
                None if matches!(item, Value::Poison) => return Err(Stop),
                None => {
                    let what = item.describe();
                    return Err(self.error(
                        Code::ShapeMismatch,
                        span,
                        format!("a shape's extents must be integers, found {what}"),
                    ));
                }
            }
        }
        Ok(shape)
    }

    fn tensor_type<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        if let Some(Value::DataPointer(base)) = args.get(2, "data") {
            return self.view_of_data(*base, &args);
        }
        let shape = self.required(&args, 0, "shape")?;
        let dtype = match args.get(1, "dtype") {
            None => DType::Float32,
            Some(_) => self.dtype_arg(&args, 1, "dtype")?,
        };
        Ok(Value::TensorType {
            shape: items_of(shape),
            dtype,
            strides: None,
        })
    }

    /// `T.StridedTensor(shape, strides, dtype)`: a tensor whose rows lie `strides` elements apart
    /// (a slice of a larger tensor, a padded leading dimension).
    fn strided_tensor_type<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let shape = self.required(&args, 0, "shape")?;
        let strides = self.required(&args, 1, "strides")?;
        let dtype = match args.get(2, "dtype") {
            None => DType::Float32,
            Some(_) => self.dtype_arg(&args, 2, "dtype")?,
        };
        Ok(Value::TensorType {
            shape: items_of(shape),
            dtype,
            strides: Some(items_of(strides)),
        })
    }

    fn kernel_frame<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let mut grid = Vec::new();
        for (position, (value, span)) in args.positional.iter().enumerate() {
            match self.index_expr(value) {
                Some(extent) => {
                    self.check_extent(extent, 1, i64::MAX, *span, "a grid extent")?;
                    self.check_grid_limit(extent, position, *span);
                    grid.push(extent);
                }
                None => {
                    let what = value.describe();
                    return Err(self.error(
                        Code::InvalidCall,
                        *span,
                        format!("grid extents must be integers, found {what}"),
                    ));
                }
            }
        }
        if grid.is_empty() {
            // `T.Kernel(threads=128)`: TileLang launches a grid of one block (its own tests of
            // single-block operations are written so).
            grid.push(self.world.exprs.int(1));
        }
        let threads = match args.keyword("threads") {
            None => vec![128],
            Some(Value::Int(count)) => vec![*count],
            Some(Value::Tuple(items) | Value::List(items)) => {
                let counts: Option<Vec<i64>> = items
                    .iter()
                    .map(|item| match item {
                        Value::Int(count) => Some(*count),
                        _ => None,
                    })
                    .collect();
                counts.ok_or_else(|| {
                    self.error(
                        Code::InvalidCall,
                        args.span,
                        "`threads` must be ints known at compile time",
                    )
                })?
            }
            Some(Value::Poison) => return Err(Stop),
            Some(other) => {
                let what = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(usize::MAX, "threads"),
                    format!("`threads` must be an int known at compile time, found {what}"),
                ));
            }
        };
        if threads.iter().any(|&count| count <= 0) || threads.iter().product::<i64>() > 1024 {
            // A representative value tilec assumed (`BLOCK_N=128` with
            // `threads=(BLOCK_N, reduce_threads)`) may be what makes the block too large.
            self.reject_assumptions();
            return Err(self.error(
                Code::InvalidCall,
                args.span_of(usize::MAX, "threads"),
                "a block has between 1 and 1024 threads",
            ));
        }
        let prelude = match args.keyword("prelude") {
            None | Some(Value::None) => None,
            Some(Value::Str(text)) => Some(Some(text.clone())),
            Some(Value::Opaque(_)) => Some(None),
            Some(other) => {
                let found = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(usize::MAX, "prelude"),
                    format!("`prelude` is CUDA source, a string, found {found}"),
                ));
            }
        };
        Ok(Value::KernelFrame {
            grid,
            threads,
            prelude,
        })
    }

    /// An extent known at compile time must lie in `least..=most`: a zero or negative size (or a
    /// grid beyond CUDA's) is the user's mistake, said here rather than failing in lowering.
    fn check_extent(
        &mut self,
        extent: ExprId,
        least: i64,
        most: i64,
        span: Span,
        what: &str,
    ) -> Eval<()> {
        let value = self.world.exprs.as_int(extent);
        if value.is_some_and(|value| value < least || value > most) {
            // An empty grid or tile is what representative values make of a pooling window's
            // output size (`(l_in + 2 * pad - kernel) // stride + 1` with every size 128).
            if self.rejected_statements.is_empty() && value.is_some_and(|value| value < least) {
                self.rejected_small_extent = Some(span);
            }
            self.reject_assumptions();
        }
        match value {
            Some(value) if value < least => Err(self.error(
                Code::InvalidCall,
                span,
                format!("{what} must be at least {least}, found {value}"),
            )),
            Some(value) if value > most => Err(self.error(
                Code::InvalidCall,
                span,
                format!("{what} can be at most {most}, found {value}"),
            )),
            _ => Ok(()),
        }
    }

    /// Marks the statements being executed as rejecting the representative values they use, as
    /// a failed `assert` does: the build is repeated with the next candidate for one of them
    /// (see `build_instance`). A failure that does not depend on assumed values recurs with every
    /// candidate and is reported as it is.
    pub(crate) fn reject_assumptions(&mut self) {
        if self.strict && self.rejected_statements.is_empty() {
            self.rejected_statements = self.stmt_stack.clone();
            self.rejection_diagnostic = Some(self.diagnostics.len());
        }
    }

    /// A register buffer that no GPU holds (more than 2^20 elements, the checks' limit) is, in a
    /// generic instance, most often the doing of the values tilec assumed (`hidden_size` = 128
    /// where the kernel is called with 4): the build is then retried with other candidates, and
    /// the checks report the buffer if it stays too large. (Shared memory is counted per launch,
    /// by `reject_oversized_shared`.)
    fn reject_oversized_buffer(&mut self, buffer: EntityId) {
        const LARGEST_REGISTER_BUFFER: u64 = 1 << 20;
        if self.world.assumed_args.is_empty()
            || !matches!(
                self.world.scopes.get(buffer),
                Some(Scope::Fragment | Scope::Local)
            )
        {
            return;
        }
        let elements = self.world.shapes.get(buffer).map_or(0, |shape| {
            shape
                .iter()
                .map(|&extent| self.world.exprs.as_int(extent).unwrap_or(1))
                .map(|extent| u64::try_from(extent).unwrap_or(0))
                .fold(1u64, u64::saturating_mul)
        });
        if elements > LARGEST_REGISTER_BUFFER && self.strict && self.rejected_statements.is_empty()
        {
            // No diagnostic follows here (the checks report the buffer), so none is marked as
            // the rejection's.
            self.rejected_statements = self.stmt_stack.clone();
        }
    }

    /// Records where a launch allocates shared memory: when the launches do not fit with the
    /// values tilec assumed, the ints these allocations read are the ones to shrink (see
    /// `reject_oversized_shared`).
    fn note_shared_allocation(&mut self, buffer: EntityId, span: Span) {
        if matches!(self.world.scopes.get(buffer), Some(Scope::Shared)) {
            self.shared_allocations.push(span);
        }
    }

    /// Marks the build as rejecting its assumed values because its shared buffers pass what a
    /// block of any GPU holds (128 for a chunk, a head dimension and a tile where the kernel's
    /// callers pass 64): the next build tries smaller values of the ints the allocations read,
    /// and the checks report the launch, as assumed values, if none fits.
    pub(crate) fn reject_oversized_shared(&mut self) {
        if !self.strict || self.shared_allocations.is_empty() {
            return;
        }
        // No diagnostic is the rejection's: the checks report the launch. The build is over, so
        // the allocations stand for the statements that failed.
        self.rejected_statements = self.shared_allocations.clone();
        self.rejected_oversized_shared = self.shared_allocations.clone();
    }

    /// A `T.Parallel` loop whose (iteration, thread) pairs pass what layout inference lays out
    /// (2^24, `tilec_passes::check::MAX_PARALLEL_LOOP_WORK`) is, in a generic instance, most
    /// often the doing of the values tilec assumed (a 128 × 64 × 64 tile where the kernel runs
    /// 4 × 4 ones): the build is retried with other candidates, and the checks report the loop
    /// if it stays too large.
    pub(crate) fn reject_oversized_loop(&mut self, extents: &[ExprId]) {
        const MOST_LOOP_WORK: u64 = 1 << 24;
        if self.world.assumed_args.is_empty() {
            return;
        }
        let threads = self
            .enclosing_launch()
            .and_then(|launch| self.world.launches.get(launch))
            .map_or(1, |launch| {
                launch
                    .threads
                    .iter()
                    .map(|&t| u64::try_from(t).unwrap_or(1))
                    .product::<u64>()
            });
        let iterations = extents
            .iter()
            .map(|&extent| self.world.exprs.as_int(extent).unwrap_or(1))
            .map(|extent| u64::try_from(extent).unwrap_or(0))
            .fold(1u64, u64::saturating_mul);
        if iterations.saturating_mul(threads) > MOST_LOOP_WORK
            && self.strict
            && self.rejected_statements.is_empty()
        {
            // The checks report the loop; no diagnostic here is the rejection's.
            self.rejected_statements = self.stmt_stack.clone();
        }
    }

    /// CUDA launches at most 2^31 - 1 blocks along x and 65535 along y and z. TileLang compiles a
    /// larger grid (only its launch fails), so this is a warning, not an error.
    fn check_grid_limit(&mut self, extent: ExprId, position: usize, span: Span) {
        let (axis, most) = match position {
            0 => ("x", i64::from(i32::MAX)),
            1 => ("y", 65535),
            _ => ("z", 65535),
        };
        if let Some(value) = self.world.exprs.as_int(extent)
            && value > most
        {
            let _ = self.report(tilec_ir::Diagnostic::warning(
                Code::InvalidCall,
                tilec_ir::Anchor::Span(span),
                format!(
                    "this grid has {value} blocks along {axis}, but CUDA launches at most {most}: \
                     launching it fails"
                ),
            ));
        }
    }

    /// `T.Parallel(*extents)`, and the loops of one variable over `start..stop` (or `0..start`
    /// when `stop` is left out, positional or keywords) as TileLang spells them: `T.Pipelined`,
    /// `T.serial` / `T.Serial`, `T.unroll` / `T.Unroll`, `T.vectorized` / `T.Vectorized` and the
    /// lower-case TIR `T.parallel`.
    fn loop_frame<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let mut extents = Vec::new();
        let bounds: Vec<(Value<'a>, Span)> = if name == "Parallel" {
            args.positional.clone()
        } else {
            [(0, "start"), (1, "stop")]
                .into_iter()
                .filter_map(|(index, key)| {
                    let value = args.get(index, key)?;
                    (!matches!(value, Value::None))
                        .then(|| (value.clone(), args.span_of(index, key)))
                })
                .collect()
        };
        let take = if name == "Parallel" { bounds.len() } else { 1 };
        // A parallel loop of no iterations has no layout; a serial one simply does not run.
        let least = i64::from(name == "Parallel" || (name == "parallel" && bounds.len() < 2));
        for (value, span) in bounds.iter().take(take) {
            match self.runtime_index(value, *span) {
                Some(extent) => {
                    self.check_extent(extent, least, i64::MAX, *span, "a loop extent")?;
                    extents.push(extent);
                }
                None => {
                    let what = value.describe();
                    return Err(self.error(
                        Code::InvalidCall,
                        *span,
                        format!("loop extents must be integers, found {what}"),
                    ));
                }
            }
        }
        let mut step = None;
        if matches!(name, "serial" | "Serial" | "unroll" | "Unroll") {
            match args.get(2, "step") {
                None | Some(Value::None) | Some(Value::Int(1)) => {}
                Some(Value::Poison) => return Err(Stop),
                Some(&Value::Int(value)) if value != 0 && bounds.len() >= 2 => {
                    step = Some(value);
                }
                Some(_) => {
                    return Err(self.error(
                        Code::NotAnalysed,
                        args.span_of(2, "step"),
                        format!(
                            "a `T.{name}` loop whose step is not a non-zero integer known at \
                             compile time is not supported by tilec"
                        ),
                    ));
                }
            }
        }
        let kind = match name {
            "Parallel" | "parallel" => LoopKind::Parallel,
            "Pipelined" => LoopKind::Pipelined {
                num_stages: self.int_arg(&args, 2, "num_stages", 0)?,
            },
            // A vectorized TIR loop runs its iterations as one vector operation where the target
            // allows and as unrolled scalar code where not: the same values either way, so tilec
            // unrolls it.
            "unroll" | "Unroll" | "vectorized" | "Vectorized" => LoopKind::Unroll,
            _ => LoopKind::Serial,
        };
        if name != "Parallel" && bounds.len() >= 2 {
            // `T.serial(start, stop)`: iterate `stop - start` times from `start`.
            let start = extents[0];
            let (stop, stop_span) = &bounds[1];
            let Some(stop) = self.runtime_index(stop, *stop_span) else {
                return Err(self.error(
                    Code::InvalidCall,
                    args.span,
                    "loop bounds must be integers",
                ));
            };
            let span = self.world.exprs.sub(stop, start);
            // `T.serial(start, stop, step)` runs `ceil((stop - start) / step)` times (none when
            // that is negative), as Python's `range`.
            let count = match step {
                Some(step) => {
                    let exprs = &mut self.world.exprs;
                    let (span, by) = if step > 0 {
                        (span, exprs.int(step))
                    } else {
                        (exprs.neg(span), exprs.int(step.saturating_neg()))
                    };
                    let count = exprs.ceildiv(span, by);
                    let zero = exprs.int(0);
                    exprs.max(count, zero)
                }
                None => span,
            };
            if kind == LoopKind::Parallel {
                // The lower-case TIR `parallel` is TileLang's parallel loop (`ForKind::kParallel`),
                // which must run at least once to have a layout.
                self.check_extent(count, 1, i64::MAX, bounds[1].1, "a loop extent")?;
            }
            let step = step.map(|step| self.world.exprs.int(step));
            return Ok(Value::LoopFrame {
                kind,
                extents: vec![count],
                start: Some(start),
                step,
            });
        }
        if extents.is_empty() {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                format!("`T.{name}` needs a loop extent"),
            ));
        }
        Ok(Value::LoopFrame {
            kind,
            extents,
            start: None,
            step: None,
        })
    }

    /// `T.grid(*extents)`: TIR's nest of serial loops, one per extent, outermost first.
    fn grid_frame<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let mut extents = Vec::new();
        for (value, span) in &args.positional {
            match self.runtime_index(value, *span) {
                Some(extent) => {
                    self.check_extent(extent, 0, i64::MAX, *span, "a loop extent")?;
                    extents.push(extent);
                }
                None => {
                    let what = value.describe();
                    return Err(self.error(
                        Code::InvalidCall,
                        *span,
                        format!("loop extents must be integers, found {what}"),
                    ));
                }
            }
        }
        if extents.is_empty() {
            return Err(self.error(Code::InvalidCall, args.span, "`T.grid` needs a loop extent"));
        }
        Ok(Value::LoopFrame {
            kind: LoopKind::Serial,
            extents,
            start: None,
            step: None,
        })
    }

    /// One bound of a `T.thread_binding`: an integer expression.
    fn loop_bound(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<ExprId> {
        let span = args.span_of(index, name);
        match args.get(index, name) {
            Some(Value::Poison) => Err(Stop),
            Some(value) => match self.index_expr(value) {
                Some(bound) => Ok(bound),
                None => {
                    let what = value.describe();
                    Err(self.error(
                        Code::InvalidCall,
                        span,
                        format!("loop bounds must be integers, found {what}"),
                    ))
                }
            },
            None => Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.thread_binding` needs an extent",
            )),
        }
    }

    pub(crate) fn alloc<'a>(
        &mut self,
        args: Args<'a>,
        default_scope: Scope,
        what: &str,
    ) -> Eval<Value<'a>> {
        let shape_value = self.required(&args, 0, "shape")?;
        let shape = self.shape_of(&shape_value, args.span_of(0, "shape"))?;
        for &extent in &shape {
            self.check_extent(
                extent,
                1,
                i64::MAX,
                args.span_of(0, "shape"),
                "a buffer extent",
            )?;
        }
        let dtype = self.dtype_arg(&args, 1, "dtype")?;
        let scope = match args.get(2, "scope") {
            Some(Value::Str(name)) => Scope::from_name(name).ok_or_else(|| {
                self.error(
                    Code::InvalidCall,
                    args.span_of(2, "scope"),
                    format!("unknown scope {name:?}"),
                )
            })?,
            _ => default_scope,
        };
        let buffer = self.add_kernel_entity(EntityKind::Buffer, what, args.span)?;
        self.world.shapes.set(buffer, shape);
        self.world.dtypes.set(buffer, dtype);
        self.world.scopes.set(buffer, scope);
        self.reject_oversized_buffer(buffer);
        self.note_shared_allocation(buffer, args.span);
        Ok(Value::Buffer(buffer))
    }

    /// `T.reshape(buffer, shape)` and `T.view(buffer, shape=None, dtype=None)`: a buffer with a
    /// new shape over the same elements. A view that changes the dtype reinterprets bytes, which
    /// tilec does not model yet.
    fn alias<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let what = format!("T.{name}");
        let base = match self.required(&args, 0, "src")? {
            Value::Buffer(buffer) if self.world.kind(buffer) != Some(EntityKind::Var) => buffer,
            other => {
                let found = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(0, "src"),
                    format!("`{what}` takes a buffer, found {found}"),
                ));
            }
        };
        let base = self.world.storage_of(base);
        let base_dtype = self.world.dtypes.get(base).copied();
        if name == "view"
            && let Some(Value::DType(_) | Value::Str(_)) = args.get(2, "dtype")
        {
            let dtype = self.dtype_arg(&args, 2, "dtype")?;
            if Some(dtype) != base_dtype {
                return self.byte_view(base, dtype, &args);
            }
        }
        let shape = match args.get(1, "shape") {
            None | Some(Value::None) if name == "view" => {
                self.world.shapes.get(base).cloned().unwrap_or_default()
            }
            _ => {
                let value = self.required(&args, 1, "shape")?;
                self.shape_of(&value, args.span_of(1, "shape"))?
            }
        };
        self.check_alias_size(&what, base, &shape, args.span_of(1, "shape"))?;
        let alias = self.add_kernel_entity(EntityKind::Buffer, &what, args.span)?;
        self.world.shapes.set(alias, shape);
        if let Some(dtype) = base_dtype {
            self.world.dtypes.set(alias, dtype);
        }
        if let Some(&scope) = self.world.scopes.get(base) {
            self.world.scopes.set(alias, scope);
        }
        self.world.aliases.set(alias, base);
        Ok(Value::Buffer(alias))
    }

    /// An alias must cover exactly its base's elements, when both counts are known.
    fn check_alias_size(
        &mut self,
        what: &str,
        base: EntityId,
        shape: &[ExprId],
        span: Span,
    ) -> Eval<()> {
        let count = |builder: &Self, dims: &[ExprId]| -> Option<i64> {
            dims.iter()
                .map(|&d| builder.world.exprs.as_int(d))
                .try_fold(1i64, |acc, d| acc.checked_mul(d?))
        };
        let base_shape = self.world.shapes.get(base).cloned().unwrap_or_default();
        match (count(self, shape), count(self, &base_shape)) {
            (Some(new), Some(old)) if new != old => Err(self.error(
                Code::ShapeMismatch,
                span,
                format!(
                    "`{what}` to {new} elements of a buffer of {old} (`{}`): the shapes must hold the same number of elements",
                    self.world.name(base)
                ),
            )),
            _ => Ok(()),
        }
    }

    fn alloc_var<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let dtype = self.dtype_arg(&args, 0, "dtype")?;
        let var = self.add_kernel_entity(EntityKind::Var, "T.alloc_var", args.span)?;
        self.world.shapes.set(var, Vec::new());
        self.world.dtypes.set(var, dtype);
        self.world.scopes.set(var, Scope::LocalVar);
        // `init=` is a store right after the declaration, where the declaration stands: a
        // declaration is no statement of the thread program, so a value attached to it was
        // dropped and the first read saw an unwritten register (the emulator said so; the GPU
        // read garbage).
        if let Some(init) = args.get(1, "init").cloned() {
            let target = Region {
                buffer: var,
                dims: Vec::new(),
            };
            self.store(target, init, args.span)?;
        }
        Ok(Value::Buffer(var))
    }

    /// `T.clear(v)` / `T.fill(v, x)` on a `T.alloc_var` scalar: a store of zero or `x` to it, as
    /// TileLang fills the one element of its buffer.
    fn fill_var<'a>(&mut self, var: EntityId, name: &str, args: &Args<'a>) -> Eval<Value<'a>> {
        let value = match name {
            "clear" => Value::Int(0),
            _ => self.required(args, 1, "value")?,
        };
        let target = Region {
            buffer: var,
            dims: Vec::new(),
        };
        self.store(target, value, args.span)?;
        Ok(Value::None)
    }

    /// A tile-op operand: a whole buffer or a region of one.
    pub(crate) fn region_arg(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<Region> {
        let span = args.span_of(index, name);
        match args.get(index, name) {
            Some(Value::Buffer(buffer)) if self.world.kind(*buffer) != Some(EntityKind::Var) => {
                Ok(self.world.full_region(*buffer))
            }
            Some(Value::Region(region)) => Ok(region.clone()),
            Some(Value::Poison) => Err(Stop),
            // TileLang gives a `T.alloc_var` a one-element buffer, which its tile operations take
            // (a reduction into a scalar); tilec keeps variables apart from buffers so far.
            Some(Value::Buffer(_)) => Err(self.error(
                Code::NotAnalysed,
                span,
                format!(
                    "`{name}` is a `T.alloc_var` variable: tilec takes tile operations on \
                     buffers and regions, not on variables yet"
                ),
            )),
            Some(other) => {
                let what = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    span,
                    format!("`{name}` must be a buffer or a region of one, found {what}"),
                ))
            }
            None => Err(self.error(
                Code::InvalidCall,
                args.span,
                format!("missing argument `{name}`"),
            )),
        }
    }

    /// `T.async_copy(src, dst)`: TileLang's explicitly asynchronous copy from global to shared
    /// memory (`cp.async` with a commit, no wait; the kernel synchronises with
    /// `T.ptx_wait_group` and a barrier). tilec makes it the same copy as `T.copy`, whose stores
    /// land at once, as its `T.ptx_cp_async` does: every wait the kernel makes then finds nothing
    /// in flight, and its results are those of the asynchronous copy once waited for.
    fn async_copy<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let src = self.region_arg(&args, 0, "src")?;
        let dst = self.region_arg(&args, 1, "dst")?;
        if is_element(&src) && is_element(&dst) {
            self.store(dst, Value::Region(src), args.span)?;
            return Ok(Value::None);
        }
        let scope =
            |builder: &Self, region: &Region| builder.world.scopes.get(region.buffer).copied();
        let from_global = scope(self, &src) == Some(Scope::Global);
        let to_shared = matches!(scope(self, &dst), Some(Scope::Shared | Scope::SharedDyn));
        if !(from_global && to_shared) {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.async_copy` copies from global memory to shared memory (it is a `cp.async`)",
            ));
        }
        self.add_tile_op(TileOp::Copy { src, dst }, "`T.async_copy`", args.span)?;
        Ok(Value::None)
    }

    fn tile_op<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        if matches!(name, "clear" | "fill")
            && let Some(Value::Buffer(var)) = args.get(0, "buffer")
            && self.world.kind(*var) == Some(EntityKind::Var)
        {
            return self.fill_var(*var, name, &args);
        }
        let op = match name {
            "copy" => {
                let src = self.region_arg(&args, 0, "src")?;
                let dst = self.region_arg(&args, 1, "dst")?;
                if is_element(&src) && is_element(&dst) {
                    self.store(dst, Value::Region(src), args.span)?;
                    return Ok(Value::None);
                }
                TileOp::Copy { src, dst }
            }
            "clear" => {
                let dst = self.region_arg(&args, 0, "buffer")?;
                let value = self.world.data.push(DataExpr::Int {
                    value: 0,
                    dtype: None,
                });
                TileOp::Fill {
                    dst,
                    value,
                    clear: true,
                }
            }
            "fill" => {
                let dst = self.region_arg(&args, 0, "buffer")?;
                let value = self.required(&args, 1, "value")?;
                let (value, _) = self.data_expr(&value, args.span_of(1, "value"))?;
                TileOp::Fill {
                    dst,
                    value,
                    clear: false,
                }
            }
            "gemm" => self.gemm(&args)?,
            "cumsum" | "cummax" => {
                let src = self.region_arg(&args, 0, "src")?;
                let dst = match args.get(1, "dst") {
                    None | Some(Value::None) => src.clone(),
                    Some(_) => self.region_arg(&args, 1, "dst")?,
                };
                let dim = axis(self.int_arg(&args, 2, "dim", 0)?, &src);
                TileOp::Scan {
                    op: if name == "cummax" {
                        ScanOp::Max
                    } else {
                        ScanOp::Sum
                    },
                    src,
                    dst,
                    dim,
                    reverse: self.bool_arg(&args, 3, "reverse", false)?,
                }
            }
            "atomic_add" | "atomic_max" | "atomic_min"
                if self.bool_arg(&args, 3, "return_prev", false)? =>
            {
                return self.atomic_returning(name, args);
            }
            "atomic_add" | "atomic_max" | "atomic_min" => {
                let dst = self.region_arg(&args, 0, "dst")?;
                let value = self.required(&args, 1, "value")?;
                let src = match value {
                    Value::Buffer(buffer) => AtomicSource::Region(self.world.full_region(buffer)),
                    Value::Region(region) if region.dims.iter().any(|dim| dim.extent.is_some()) => {
                        AtomicSource::Region(region)
                    }
                    other => {
                        AtomicSource::Value(self.data_expr(&other, args.span_of(1, "value"))?.0)
                    }
                };
                TileOp::Atomic {
                    op: atomic_op(name),
                    dst,
                    src,
                    prev: None,
                }
            }
            "use_swizzle" => {
                let order = match args.get(1, "order") {
                    Some(Value::Str(order)) => order.to_string(),
                    _ => "row".to_owned(),
                };
                TileOp::UseSwizzle {
                    panel_size: self.int_arg(&args, 0, "panel_size", 10)?,
                    column_major: order == "column" || order == "col",
                    enable: self.bool_arg(&args, 2, "enable", true)?,
                }
            }
            "annotate_layout" => return self.annotate_layout(args),
            _ => {
                let kind = match name {
                    "reduce_sum" => ReduceKind::Sum,
                    "reduce_max" => ReduceKind::Max,
                    "reduce_min" => ReduceKind::Min,
                    "reduce_abssum" => ReduceKind::AbsSum,
                    _ => ReduceKind::AbsMax,
                };
                return self.reduce(name, kind, &args);
            }
        };
        self.add_tile_op(op, &format!("`T.{name}`"), args.span)?;
        Ok(Value::None)
    }

    /// `T.reduce_*(src, dst, dim, clear)`. A reduction runs between fragments; as TileLang's
    /// `reduce` macro does, a shared source is first copied into a fragment temporary named
    /// `<src>_frag`, and a shared destination is reduced into a temporary `<dst>_frag` (loaded
    /// from it first when `clear=False`) that is then copied back. The temporaries are ordinary
    /// fragments, so layout inference lays them out like any other.
    fn reduce<'a>(&mut self, name: &str, kind: ReduceKind, args: &Args<'a>) -> Eval<Value<'a>> {
        let src = self.region_arg(args, 0, "buffer")?;
        let dst = self.region_arg(args, 1, "out")?;
        let dim = axis(self.int_arg(args, 2, "dim", -1)?, &src);
        let clear = self.bool_arg(args, 3, "clear", true)?;
        let what = format!("`T.{name}`");
        let src_frag = match self.is_shared(src.buffer) {
            true => {
                let temporary = self.fragment_temporary(&src, args.span)?;
                let load = TileOp::Copy {
                    src,
                    dst: temporary.clone(),
                };
                self.add_tile_op(load, &what, args.span)?;
                temporary
            }
            false => src,
        };
        let dst_frag = match self.is_shared(dst.buffer) {
            true => Some(self.fragment_temporary(&dst, args.span)?),
            false => None,
        };
        if let (Some(temporary), false) = (&dst_frag, clear) {
            let load = TileOp::Copy {
                src: dst.clone(),
                dst: temporary.clone(),
            };
            self.add_tile_op(load, &what, args.span)?;
        }
        let op = TileOp::Reduce {
            kind,
            src: src_frag,
            dst: dst_frag.clone().unwrap_or_else(|| dst.clone()),
            dim,
            clear,
        };
        self.add_tile_op(op, &what, args.span)?;
        if let Some(temporary) = dst_frag {
            let store = TileOp::Copy {
                src: temporary,
                dst,
            };
            self.add_tile_op(store, &what, args.span)?;
        }
        Ok(Value::None)
    }

    fn is_shared(&self, buffer: EntityId) -> bool {
        matches!(
            self.world.scopes.get(buffer),
            Some(Scope::Shared | Scope::SharedDyn)
        )
    }

    /// A fragment with the extents of `region` (1 where it takes one index), named after the
    /// region's buffer as TileLang names its reduction temporaries.
    fn fragment_temporary(&mut self, region: &Region, span: Span) -> Eval<Region> {
        let one = self.world.exprs.int(1);
        let shape: Vec<ExprId> = region
            .dims
            .iter()
            .map(|d| d.extent.unwrap_or(one))
            .collect();
        let temporary =
            self.add_kernel_entity(EntityKind::Buffer, "a reduction's fragment", span)?;
        let name = format!("{}_frag", self.world.name(region.buffer));
        self.world.names.set(temporary, name);
        self.world.shapes.set(temporary, shape);
        if let Some(&dtype) = self.world.dtypes.get(region.buffer) {
            self.world.dtypes.set(temporary, dtype);
        }
        self.world.scopes.set(temporary, Scope::Fragment);
        Ok(self.world.full_region(temporary))
    }

    /// `T.atomic_add(dst[i], value, return_prev=True)`: an element's atomic addition whose value
    /// is the element before it, received in a scalar of the element's dtype (as `T.alloc_var`
    /// makes one) that the call evaluates to.
    fn atomic_returning<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let dst = self.region_arg(&args, 0, "dst")?;
        if dst.dims.iter().any(|dim| dim.extent.is_some()) {
            return Err(self.error(
                Code::InvalidCall,
                args.span_of(0, "dst"),
                "`return_prev=True` returns one element's old value: `dst` must be one element",
            ));
        }
        let value = self.required(&args, 1, "value")?;
        let (value, _) = self.data_expr(&value, args.span_of(1, "value"))?;
        let dtype = self.world.dtypes.get(dst.buffer).copied();
        let prev = self.add_kernel_entity(
            EntityKind::Var,
            &format!("the old value of `T.{name}`"),
            args.span,
        )?;
        self.world.shapes.set(prev, Vec::new());
        if let Some(dtype) = dtype {
            self.world.dtypes.set(prev, dtype);
        }
        self.world.scopes.set(prev, Scope::LocalVar);
        let op = TileOp::Atomic {
            op: atomic_op(name),
            dst,
            src: AtomicSource::Value(value),
            prev: Some(prev),
        };
        self.add_tile_op(op, &format!("`T.{name}`"), args.span)?;
        Ok(Value::Buffer(prev))
    }

    fn gemm(&mut self, args: &Args<'_>) -> Eval<TileOp> {
        let policy = match args.get(5, "policy") {
            None | Some(Value::None) => WarpPolicy::Square,
            Some(Value::Policy(policy)) => *policy,
            // `T.GemmWarpPolicy` is an `IntEnum`: its members are the ints 0, 1 and 2.
            Some(Value::Int(0)) => WarpPolicy::Square,
            Some(Value::Int(1)) => WarpPolicy::FullRow,
            Some(Value::Int(2)) => WarpPolicy::FullCol,
            Some(Value::Poison) => return Err(Stop),
            Some(other) => {
                let what = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(5, "policy"),
                    format!(
                        "`policy` must be a `T.GemmWarpPolicy` (or its value 0, 1 or 2), found \
                         {what}"
                    ),
                ));
            }
        };
        let c = self.region_arg(args, 2, "C")?;
        let clear_accum = match args.get(6, "clear_accum") {
            Some(value) if value.truthy().is_none() && !matches!(value, Value::Poison) => {
                let value = value.clone();
                self.clear_when(&value, &c, args.span_of(6, "clear_accum"))?;
                false
            }
            _ => self.bool_arg(args, 6, "clear_accum", false)?,
        };
        Ok(TileOp::Gemm {
            a: self.region_arg(args, 0, "A")?,
            b: self.region_arg(args, 1, "B")?,
            c,
            transpose_a: self.bool_arg(args, 3, "transpose_A", false)?,
            transpose_b: self.bool_arg(args, 4, "transpose_B", false)?,
            policy,
            clear_accum,
            k_pack: self.int_arg(args, 7, "k_pack", 1)?,
        })
    }

    /// `clear_accum=` known only when the kernel runs (`clear_accum=(j == 0)` in an unrolled
    /// loop): the accumulator is cleared under that condition, then accumulated into, which is
    /// what the gemm's own clearing does.
    fn clear_when(&mut self, cond: &Value<'_>, dst: &Region, span: Span) -> Eval<()> {
        let (cond, _) = self.data_expr(cond, span)?;
        let guard = self.add_kernel_entity(EntityKind::If, "`clear_accum=`", span)?;
        self.world.conditions.set(guard, cond);
        let zero = self.world.data.push(DataExpr::Int {
            value: 0,
            dtype: None,
        });
        let clear = TileOp::Fill {
            dst: dst.clone(),
            value: zero,
            clear: true,
        };
        self.in_block(Block::Body(guard), |builder| {
            builder
                .add_tile_op(clear, "`clear_accum=`", span)
                .map(|_| ())
        })
    }

    /// Adds a tile-op entity with its accesses.
    pub(crate) fn add_tile_op(&mut self, op: TileOp, what: &str, span: Span) -> Eval<EntityId> {
        let entity = self.add_kernel_entity(EntityKind::TileOp, what, span)?;
        let accesses = tile_op_accesses(&op, &self.world.data);
        self.forget_bindings_written(&accesses);
        self.world.accesses.set(entity, accesses);
        self.world.ops.set(entity, op);
        Ok(entity)
    }

    fn annotate_layout<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let Some(Value::Dict(entries)) = args.get(0, "layout_map").cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.annotate_layout` takes a dict from buffers to layouts",
            ));
        };
        for (key, value) in entries.iter() {
            let (Value::Buffer(buffer), Value::Layout(layout)) = (key, value) else {
                return Err(self.error(
                    Code::InvalidCall,
                    args.span,
                    "`T.annotate_layout` maps buffers to `T.Fragment(...)` or `T.Layout(...)`",
                ));
            };
            let op = TileOp::AnnotateLayout {
                buffer: *buffer,
                layout: (**layout).clone(),
            };
            self.add_tile_op(op, "`T.annotate_layout`", args.span)?;
        }
        Ok(Value::None)
    }

    /// `tilelang.layout.make_swizzled_layout(buf)`: a swizzled storage layout for a shared tile,
    /// built by the shared-layout pass from the buffer's shape and dtype.
    fn swizzled_layout<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let Some(Value::Buffer(buffer)) = args.get(0, "buffer").cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`make_swizzled_layout` takes the shared buffer to lay out",
            ));
        };
        let shape = self.world.const_shape(buffer).unwrap_or_default();
        Ok(Value::Layout(Rc::new(LayoutAnnotation {
            kind: LayoutKind::Swizzled,
            shape,
            vars: Vec::new(),
            outputs: Vec::new(),
            replica: None,
        })))
    }

    /// `T.annotate_pass_configs({key: value})`: the pass configurations of `@tilelang.jit(
    /// pass_configs=...)`, given from inside the kernel.
    fn annotate_pass_configs<'a>(&mut self, args: &Args<'a>) -> Eval<Value<'a>> {
        let Some(Value::Dict(entries)) = args.get(0, "configs") else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.annotate_pass_configs` takes a dict of pass configurations",
            ));
        };
        for (key, value) in entries.iter() {
            if let (Value::Str(key), Some(value)) = (key, value.to_const()) {
                self.world.pass_configs.push((key.to_string(), value));
            }
        }
        Ok(Value::None)
    }

    /// `T.Fragment(shape, forward_fn=f)` / `T.Layout(shape, f)`: `f` is called on fresh index
    /// variables, so the layout is recorded as formulas over the buffer's logical indices.
    fn layout<'a>(&mut self, kind: LayoutKind, args: Args<'a>) -> Eval<Value<'a>> {
        let shape_value = self.required(&args, 0, "shape")?;
        let shape_ids = self.shape_of(&shape_value, args.span)?;
        let shape: Option<Vec<i64>> = shape_ids
            .iter()
            .map(|&id| self.world.exprs.as_int(id))
            .collect();
        let Some(shape) = shape else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "a layout's shape must be known at compile time",
            ));
        };
        if kind == LayoutKind::Fragment
            && args.get(1, "forward_fn").is_none()
            && args.keyword("forward_thread_fn").is_some()
        {
            return self.fragment_of_thread_fn(shape, &args);
        }
        let function = match kind {
            LayoutKind::Fragment => args.get(1, "forward_fn"),
            LayoutKind::Layout => args
                .get(1, "forward_fn")
                .or_else(|| args.keyword("forward_index_fn")),
            LayoutKind::Swizzled => None,
        };
        let Some(function) = function.filter(|f| is_callable(f)).cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "a layout needs its function (`forward_fn=`)",
            ));
        };
        let vars = self.layout_vars(&shape);
        let replica = match kind {
            LayoutKind::Fragment => self.fragment_replica(&args)?,
            LayoutKind::Layout | LayoutKind::Swizzled => None,
        };
        let mut arguments = vars.clone();
        arguments.extend(replica.map(|(rep, _)| rep));
        let outputs = self.call_layout_fn(function, &arguments, args.span)?;
        Ok(Value::Layout(Rc::new(LayoutAnnotation {
            kind,
            shape,
            vars,
            outputs,
            replica,
        })))
    }

    /// `replicate=n` of a `T.Fragment`: for `n > 1`, the replica variable (`rep`, over `0..n`)
    /// that TileLang passes to the layout function after the indices, and `n`.
    fn fragment_replica(&mut self, args: &Args<'_>) -> Eval<Option<(VarId, i64)>> {
        match args.get(3, "replicate") {
            None | Some(Value::Int(1)) => Ok(None),
            Some(&Value::Int(n)) if n > 1 => Ok(Some((self.world.exprs.var("rep", Some(n)), n))),
            Some(other) => {
                let found = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    args.span,
                    format!(
                        "`replicate=` of a `T.Fragment` is how many threads hold each element, \
                         a positive integer known at compile time; found {found}"
                    ),
                ))
            }
        }
    }

    /// One index variable per dimension of a layout's shape (`i`, `j`, ...), bounded by it.
    fn layout_vars(&mut self, shape: &[i64]) -> Vec<VarId> {
        let names = ["i", "j", "k", "l", "m", "n"];
        shape
            .iter()
            .enumerate()
            .map(|(dim, &extent)| {
                self.world
                    .exprs
                    .var(names.get(dim).unwrap_or(&"x"), Some(extent))
            })
            .collect()
    }

    /// Calls a layout function (a `def`, a lambda, a `functools.partial` of one) on the index
    /// variables: the integer expressions it returns (one or a tuple of them).
    fn call_layout_fn<'a>(
        &mut self,
        function: Value<'a>,
        vars: &[VarId],
        span: Span,
    ) -> Eval<Vec<ExprId>> {
        let positional = vars
            .iter()
            .map(|&var| (Value::Index(self.world.exprs.var_expr(var)), span))
            .collect();
        let result = self.call_value(
            function,
            Args {
                positional,
                keywords: Vec::new(),
                span,
            },
            span,
        )?;
        let items = match result {
            Value::Tuple(items) | Value::List(items) => items.to_vec(),
            single => vec![single],
        };
        items
            .iter()
            .map(|item| self.index_expr(item))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                self.error(
                    Code::InvalidCall,
                    span,
                    "a layout function must return integer expressions",
                )
            })
    }

    /// `T.Fragment(shape, forward_thread_fn=t, forward_index_fn=f)`: the thread of each element
    /// from `t`, its register from `f` or, without one, as TileLang infers it: the dimensions the
    /// thread does not use, flattened row-major (`forward_thread_fn=lambda i, j: i` keeps row `i`
    /// on thread `i`, its elements in registers `j`). TileLang also splits dimensions the thread
    /// uses only in part; tilec checks that the pairs (thread, register) tell every element apart
    /// and says plainly when they do not.
    fn fragment_of_thread_fn<'a>(&mut self, shape: Vec<i64>, args: &Args<'a>) -> Eval<Value<'a>> {
        let vars = self.layout_vars(&shape);
        let replica = self.fragment_replica(args)?;
        // The thread function takes the replica after the indices; the index function does not.
        let mut thread_arguments = vars.clone();
        thread_arguments.extend(replica.map(|(rep, _)| rep));
        let call = |builder: &mut Self, key: &str, arguments: &[VarId]| match args
            .keyword(key)
            .filter(|f| is_callable(f))
            .cloned()
        {
            Some(function) => builder
                .call_layout_fn(function, arguments, args.span)
                .map(Some),
            None => Ok(None),
        };
        let Some(thread) = call(self, "forward_thread_fn", &thread_arguments)? else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`forward_thread_fn=` must be a function of the fragment's indices",
            ));
        };
        let [thread] = thread[..] else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`forward_thread_fn=` returns one thread index",
            ));
        };
        let index = match call(self, "forward_index_fn", &vars)? {
            Some(index) => index,
            None => {
                let used = self.world.exprs.vars_of(thread);
                let (unused, extents): (Vec<ExprId>, Vec<ExprId>) = vars
                    .iter()
                    .zip(&shape)
                    .filter(|(var, _)| !used.contains(var))
                    .map(|(&var, &extent)| {
                        (self.world.exprs.var_expr(var), self.world.exprs.int(extent))
                    })
                    .unzip();
                vec![self.world.exprs.flatten_row_major(&unused, &extents)]
            }
        };
        let rep = replica.map(|(rep, _)| rep);
        if !self.tells_elements_apart(&shape, (&vars, rep), thread, &index) {
            return Err(self.error(
                Code::NotAnalysed,
                args.span,
                "this `T.Fragment`'s thread uses only part of a dimension, so tilec cannot infer \
                 which register holds each element: give `forward_index_fn=` as well",
            ));
        }
        let mut outputs = vec![thread];
        outputs.extend(index);
        Ok(Value::Layout(Rc::new(LayoutAnnotation {
            kind: LayoutKind::Fragment,
            shape,
            vars,
            outputs,
            replica,
        })))
    }

    /// Whether no two elements of `shape` share a (thread, register) pair, tried point by point
    /// (fragments that tilec compiles have at most 2^20 elements); for a replicated fragment,
    /// among the first replicas (`rep` = 0).
    fn tells_elements_apart(
        &self,
        shape: &[i64],
        (vars, rep): (&[VarId], Option<VarId>),
        thread: ExprId,
        index: &[ExprId],
    ) -> bool {
        let total: i64 = shape.iter().product();
        if total > 1 << 20 {
            return false;
        }
        let mut seen = rustc_hash::FxHashSet::default();
        let mut point = vec![0i64; shape.len()];
        for _ in 0..total {
            let value_of = |var: VarId| {
                let first_replica = (Some(var) == rep).then_some(0);
                vars.iter()
                    .position(|&v| v == var)
                    .map(|dim| point[dim])
                    .or(first_replica)
            };
            let pair: Option<Vec<i64>> = std::iter::once(thread)
                .chain(index.iter().copied())
                .map(|e| self.world.exprs.eval(e, &value_of))
                .collect();
            let Some(pair) = pair else { return false };
            if !seen.insert(pair) {
                return false;
            }
            for dim in (0..shape.len()).rev() {
                point[dim] += 1;
                if point[dim] < shape[dim] {
                    break;
                }
                point[dim] = 0;
            }
        }
        true
    }

    pub(crate) fn intrinsic<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let Some(intrinsic) = Intrinsic::from_name(name) else {
            return Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!("`T.{name}` is not supported by tilec"),
            ));
        };
        if args.positional.len() != intrinsic.arity() {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                format!("`T.{name}` takes {} argument(s)", intrinsic.arity()),
            ));
        }
        let mut ids = Vec::new();
        let mut dtype = None;
        for (value, span) in &args.positional {
            let (id, arg_dtype) = self.data_expr(value, *span)?;
            ids.push(id);
            dtype = promote(dtype, arg_dtype);
        }
        if intrinsic == Intrinsic::TruncMod {
            self.integer_operands(&format!("`T.{name}`"), dtype, args.span)?;
        }
        Ok(self.data(
            DataExpr::Call {
                intrinsic,
                args: ids,
            },
            dtype,
        ))
    }

    /// An operation defined on integers only (a remainder, bitwise arithmetic) on operands of
    /// `dtype`: a float there is the kernel's error, as TVM reports it, and in a generic instance
    /// it rejects the assumed dtype (`dtype` = float16 for an index tensor), so that the next
    /// candidate is tried.
    pub(crate) fn integer_operands(
        &mut self,
        what: &str,
        dtype: Option<DType>,
        span: Span,
    ) -> Eval<()> {
        match dtype {
            Some(dtype) if dtype.is_float() => {
                self.reject_assumptions();
                let float_dtypes = self.world.assumed_args.iter().filter(|assumed| {
                    matches!(assumed.value, tilec_ir::ConstValue::DType(dtype) if dtype.is_float())
                });
                let names: Vec<String> = float_dtypes.map(|a| a.name.clone()).collect();
                self.rejected_names.extend(names);
                Err(self.error(
                    Code::DtypeMismatch,
                    span,
                    format!("{what} takes integers, found {dtype} operands"),
                ))
            }
            _ => Ok(()),
        }
    }

    /// `T.float32(1.0)` is a typed constant; `T.float16(x)` of a runtime value is a cast.
    pub(crate) fn typed_constant<'a>(&mut self, dtype: DType, args: Args<'a>) -> Eval<Value<'a>> {
        let value = self.required(&args, 0, "value")?;
        let node = match value {
            Value::Float(v) => DataExpr::Float {
                bits: v.to_bits(),
                dtype: Some(dtype),
            },
            Value::Int(v) if dtype.is_float() => DataExpr::Float {
                bits: (v as f64).to_bits(),
                dtype: Some(dtype),
            },
            Value::Int(v) => DataExpr::Int {
                value: v,
                dtype: Some(dtype),
            },
            other => {
                let (id, _) = self.data_expr(&other, args.span)?;
                DataExpr::Cast { dtype, value: id }
            }
        };
        Ok(self.data(node, Some(dtype)))
    }

    fn integer_op<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let a = self.required(&args, 0, "a")?;
        let b = self.required(&args, 1, "b")?;
        match (&a, &b) {
            (Value::Int(x), Value::Int(y)) if *y != 0 => {
                let value = match name {
                    "ceildiv" => crate::eval::python_floordiv(x.saturating_add(y - 1), *y),
                    "floordiv" => crate::eval::python_floordiv(*x, *y),
                    _ => crate::eval::python_mod(*x, *y),
                };
                value
                    .map(Value::Int)
                    .ok_or_else(|| self.error(Code::MetaError, args.span, "integer overflow"))
            }
            _ => match (
                self.runtime_index(&a, args.span),
                self.runtime_index(&b, args.span),
            ) {
                (Some(x), Some(y)) => {
                    let arena = &mut self.world.exprs;
                    let id = match name {
                        "ceildiv" => arena.ceildiv(x, y),
                        "floordiv" => arena.floordiv(x, y),
                        _ => arena.floormod(x, y),
                    };
                    Ok(self.index_value(id))
                }
                _ => Err(self.error(
                    Code::InvalidCall,
                    args.span,
                    format!("`T.{name}` takes two integers"),
                )),
            },
        }
    }

    /// Eager style: `M, N = T.const("M, N")` takes each symbol's value from the instance's arguments;
    /// a symbol without one stays symbolic, so the kernel is still checked as far as it can be.
    fn eager_const<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let Some(Value::Str(names)) = args.get(0, "names").cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.const` takes the symbols' names as a string (\"M, N\")",
            ));
        };
        let mut values = Vec::new();
        for name in names.split([',', ' ']).filter(|name| !name.is_empty()) {
            let value = match self.consts.get(name) {
                Some(value) => Value::from_const(value),
                None => self.generic_const(name),
            };
            values.push(value);
        }
        Ok(if values.len() == 1 {
            values.remove(0)
        } else {
            Value::tuple(values)
        })
    }

    /// Eager style: `C = T.empty(shape, dtype)` declares an output tensor.
    fn eager_empty<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let shape_value = self.required(&args, 0, "shape")?;
        let shape = self.shape_of(&shape_value, args.span)?;
        let dtype = match args.get(1, "dtype") {
            None => DType::Float32,
            Some(_) => self.dtype_arg(&args, 1, "dtype")?,
        };
        let param = self.add_param(shape, dtype);
        self.world.outputs.push(param);
        Ok(Value::Buffer(param))
    }

    /// Adds a tensor parameter (global memory) at the top level of the world.
    pub(crate) fn add_param(&mut self, shape: Vec<ExprId>, dtype: DType) -> EntityId {
        let saved = self.block.take();
        let param = self.add_entity(EntityKind::Param);
        self.block = saved;
        self.world.shapes.set(param, shape);
        self.world.dtypes.set(param, dtype);
        self.world.scopes.set(param, Scope::Global);
        self.world.params.push(param);
        param
    }
}

/// The dimension `dim` of a reduction or scan over `src` names, counted from 0: a negative `dim`
/// counts from the end, as in Python (`dim=-1` is the last). This is the one place it is
/// normalised, so that the checks, layout inference and lowering read a plain index. A `dim` out
/// of range either way is kept as written, for the shape check to report in the user's terms.
fn axis(dim: i64, src: &Region) -> i64 {
    let rank = i64::try_from(src.dims.len()).unwrap_or(i64::MAX);
    if (-rank..0).contains(&dim) {
        dim + rank
    } else {
        dim
    }
}

/// The accesses of a tile op, for the Accesses column.
fn tile_op_accesses(op: &TileOp, data: &tilec_ir::DataArena) -> Vec<Access> {
    let access = |kind, region: &Region| Access {
        kind,
        region: region.clone(),
    };
    match op {
        TileOp::Copy { src, dst } => vec![
            access(AccessKind::Read, src),
            access(AccessKind::Write, dst),
        ],
        TileOp::Fill { dst, .. } => vec![access(AccessKind::Write, dst)],
        TileOp::Gemm {
            a,
            b,
            c,
            clear_accum,
            ..
        } => vec![
            access(AccessKind::Read, a),
            access(AccessKind::Read, b),
            access(
                if *clear_accum {
                    AccessKind::Write
                } else {
                    AccessKind::ReadWrite
                },
                c,
            ),
        ],
        TileOp::Reduce {
            src, dst, clear, ..
        } => vec![
            access(AccessKind::Read, src),
            access(
                if *clear {
                    AccessKind::Write
                } else {
                    AccessKind::ReadWrite
                },
                dst,
            ),
        ],
        TileOp::Scan { src, dst, .. } => vec![
            access(AccessKind::Read, src),
            access(AccessKind::Write, dst),
        ],
        TileOp::Atomic {
            op: _,
            dst,
            src,
            prev,
        } => {
            let mut accesses = vec![access(AccessKind::ReadWrite, dst)];
            match src {
                AtomicSource::Region(region) => accesses.push(access(AccessKind::Read, region)),
                AtomicSource::Value(value) => accesses.extend(load_accesses(data, *value)),
            }
            if let Some(prev) = prev {
                let old = Region {
                    buffer: *prev,
                    dims: Vec::new(),
                };
                accesses.push(access(AccessKind::Write, &old));
            }
            accesses
        }
        TileOp::Control(ControlOp::DeviceAssert { cond, .. }) => load_accesses(data, *cond),
        TileOp::ThreadAllReduce { source, result, .. } => {
            let mut accesses = load_accesses(data, *source);
            accesses.push(access(AccessKind::Write, result));
            accesses
        }
        TileOp::Control(ControlOp::RngInit {
            seed,
            subsequence,
            offset,
        }) => [seed, subsequence, offset]
            .into_iter()
            .flat_map(|&operand| load_accesses(data, operand))
            .collect(),
        TileOp::FinalizeReducer { .. } => Vec::new(),
        TileOp::ExternCall(call) => call
            .args
            .iter()
            .flat_map(|arg| match arg {
                ExternArg::Pointer { reach, .. } => vec![access(AccessKind::ReadWrite, reach)],
                ExternArg::Value(value) => load_accesses(data, *value),
            })
            .collect(),
        TileOp::UseSwizzle { .. }
        | TileOp::AnnotateLayout { .. }
        | TileOp::Control(_)
        | TileOp::ImportSource { .. } => Vec::new(),
    }
}

/// One read access per element load in a data expression.
pub(crate) fn load_accesses(data: &tilec_ir::DataArena, value: tilec_ir::DataId) -> Vec<Access> {
    let mut loads = Vec::new();
    data.loads(value, &mut loads);
    loads
        .into_iter()
        .map(|(buffer, indices)| Access {
            kind: AccessKind::Read,
            region: Region {
                buffer,
                dims: indices
                    .into_iter()
                    .map(|start| RegionDim {
                        start,
                        extent: None,
                    })
                    .collect(),
            },
        })
        .collect()
}

/// The items of a shape or strides argument: a tuple or list, or one value for a 1-D tensor.
fn items_of(value: Value<'_>) -> Rc<Vec<Value<'_>>> {
    match value {
        Value::Tuple(items) | Value::List(items) => items,
        single => Rc::new(vec![single]),
    }
}

/// Whether a layout's function argument can be called: a `def` or lambda of the code, or a
/// `functools.partial` of one (`forward_fn=partial(smem_layout, vs=8)`).
fn is_callable(value: &Value<'_>) -> bool {
    matches!(value, Value::Function(_) | Value::Partial(_))
}

/// Whether a copy operand is one element (`A[i, j]`): a copy from one element to another is a
/// store of it, as TileLang makes it (`T.copy(A[i, j], B[i, j])` in a `T.Parallel` loop).
fn is_element(region: &Region) -> bool {
    region.dims.iter().all(|dim| dim.extent.is_none())
}

/// The update of `T.atomic_add`, `T.atomic_max` or `T.atomic_min`, by the operation's name.
fn atomic_op(name: &str) -> tilec_ir::thread::AtomicOp {
    match name {
        "atomic_max" => tilec_ir::thread::AtomicOp::Max,
        "atomic_min" => tilec_ir::thread::AtomicOp::Min,
        _ => tilec_ir::thread::AtomicOp::Add,
    }
}

/// The dtype a name of the language module stands for: a dtype's spelling (`T.float16`), or
/// `T.ptr`, the element of a table of device pointers, which tilec reads as the 64-bit unsigned
/// integer it is (see `T.make_tensor`).
pub(crate) fn language_dtype(name: &str) -> Option<DType> {
    match name {
        "ptr" => Some(DType::UInt64),
        _ => DType::from_name(name),
    }
}
