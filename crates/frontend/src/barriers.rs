//! Hand-written synchronisation between the threads of a block: warpgroup roles (`with T.ws(i)`),
//! mbarriers (`T.alloc_barrier`, `T.mbarrier_arrive`, `T.mbarrier_wait_parity`,
//! `T.mbarrier_expect_tx` and their `T.barrier_*` spellings), asynchronous TMA copies that complete
//! on a barrier (`T.tma_copy(..., barrier=b)`), per-thread copies (`T.ptx_cp_async` of
//! `T.access_ptr`s, `T.cp_async_barrier_noinc`) and `T.fence_proxy_async`.
//!
//! A role is a runtime `if` on the thread index, as TileLang builds it; the passes recognise such
//! conditions wherever they come from (`if tx >= 128:` too) and lay out and lower what sits under
//! them for the threads that run it.

use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::{
    BarrierRef, Code, ControlOp, DType, DataExpr, DataId, EntityKind, ExprId, Region, RegionDim,
    Scope, Span, TileOp,
};

use crate::builder::{Builder, Eval, Stop};
use crate::eval::Args;
use crate::value::Value;

/// Threads of a warpgroup, the unit `T.ws` counts in.
const WARPGROUP: i64 = 128;
/// The most mbarriers one `T.alloc_barrier` makes (they live in shared memory, 8 bytes each).
const MAX_BARRIERS: usize = 1024;
/// The most elements one `T.ptx_cp_async` copies (16 bytes of 1-byte elements).
const MAX_ELEMENT_COPY: i64 = 16;

impl Builder<'_> {
    /// The calls of this module, by their `T.` name.
    pub(crate) fn barrier_call<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let control = match name {
            "alloc_barrier" => return self.alloc_barrier(&args),
            "ws" => return self.warpgroup_role(&args),
            "tma_copy" => return self.tma_copy(&args),
            "access_ptr" => return self.access_ptr(&args),
            "ptx_cp_async" => return self.element_copy(&args),
            // `cp.async.mbarrier.arrive.noinc`: the thread arrives once its earlier `cp.async`
            // copies have landed. tilec's element copies land when they are made, so this is
            // the thread's arrival.
            "cp_async_barrier_noinc" => ControlOp::BarrierArrive {
                barrier: self.barrier_arg(&args, 0, "barrier")?,
            },
            "mbarrier_arrive" | "barrier_arrive" => ControlOp::BarrierArrive {
                barrier: self.barrier_arg(&args, 0, "mbarrier")?,
            },
            "mbarrier_wait_parity" | "barrier_wait" => ControlOp::BarrierWait {
                barrier: self.barrier_arg(&args, 0, "mbarrier")?,
                parity: self.index_arg(&args, 1, "parity")?,
            },
            "mbarrier_expect_tx" => ControlOp::BarrierExpectTx {
                barrier: self.barrier_arg(&args, 0, "mbarrier")?,
                bytes: self.index_arg(&args, 1, "tx")?,
            },
            _ => ControlOp::FenceProxyAsync,
        };
        self.add_tile_op(TileOp::Control(control), &format!("`T.{name}`"), args.span)?;
        Ok(Value::None)
    }

    /// `T.alloc_barrier(arrive_count)`: one mbarrier per count of a list, or one for an integer.
    fn alloc_barrier<'a>(&mut self, args: &Args<'a>) -> Eval<Value<'a>> {
        let span = args.span_of(0, "arrive_count");
        let counts = match self.required(args, 0, "arrive_count")? {
            Value::List(items) | Value::Tuple(items) => items
                .iter()
                .map(|item| self.arrive_count(item, span))
                .collect::<Eval<Vec<u32>>>()?,
            other => vec![self.arrive_count(&other, span)?],
        };
        if counts.is_empty() || counts.len() > MAX_BARRIERS {
            return Err(self.error(
                Code::InvalidCall,
                span,
                format!(
                    "`T.alloc_barrier` makes between 1 and {MAX_BARRIERS} barriers, found {}",
                    counts.len()
                ),
            ));
        }
        let buffer = self.add_kernel_entity(EntityKind::Buffer, "T.alloc_barrier", args.span)?;
        let extent = self.world.exprs.int(crate::value::int_of_len(counts.len()));
        self.world.shapes.set(buffer, vec![extent]);
        self.world.dtypes.set(buffer, DType::UInt64);
        self.world.scopes.set(buffer, Scope::Barrier);
        self.world.barrier_counts.set(buffer, counts);
        Ok(Value::Buffer(buffer))
    }

    /// One arrival count: a positive integer known at compile time (an mbarrier's count is fixed
    /// when it is initialised).
    fn arrive_count(&mut self, value: &Value<'_>, span: Span) -> Eval<u32> {
        match value {
            Value::Int(count) if (1..=i64::from(u32::MAX >> 12)).contains(count) => {
                // Just checked to lie in 1..=2^20 - 1.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Ok(*count as u32)
            }
            Value::Poison => Err(Stop),
            other => {
                let what = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    span,
                    format!("an mbarrier's arrival count is a positive integer, found {what}"),
                ))
            }
        }
    }

    /// A barrier argument: `mbars[i]` (one mbarrier of an array) or a barrier buffer itself (its
    /// first mbarrier, as TileLang reads a single barrier).
    fn barrier_arg(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<BarrierRef> {
        let span = args.span_of(index, name);
        let value = self.required(args, index, name)?;
        let reference = match &value {
            Value::Buffer(buffer) if self.is_barrier(*buffer) => Some(BarrierRef {
                buffer: *buffer,
                index: self.world.exprs.int(0),
            }),
            Value::Region(region) if self.is_barrier(region.buffer) => match region.dims[..] {
                [dim] if dim.extent.is_none() => Some(BarrierRef {
                    buffer: region.buffer,
                    index: dim.start,
                }),
                _ => None,
            },
            _ => None,
        };
        reference.ok_or_else(|| {
            let what = value.describe();
            self.error(
                Code::InvalidCall,
                span,
                format!("`{name}` must be a barrier from `T.alloc_barrier` (or one element of it), found {what}"),
            )
        })
    }

    fn is_barrier(&self, buffer: tilec_ir::EntityId) -> bool {
        self.world.scopes.get(buffer) == Some(&Scope::Barrier)
    }

    /// An integer argument that may be known only when the kernel runs (a parity computed from
    /// the loop counter, a byte count).
    fn index_arg(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<ExprId> {
        let span = args.span_of(index, name);
        let value = self.required(args, index, name)?;
        self.runtime_index(&value, span).ok_or_else(|| {
            let what = value.describe();
            self.error(
                Code::InvalidCall,
                span,
                format!("`{name}` must be an integer, found {what}"),
            )
        })
    }

    /// `T.tma_copy(src, dst, barrier=b)`: a copy whose bytes complete on `b` instead of being
    /// waited for; without a barrier (a store to global memory) it is an ordinary copy.
    fn tma_copy<'a>(&mut self, args: &Args<'a>) -> Eval<Value<'a>> {
        let src = self.region_arg(args, 0, "src")?;
        let dst = self.region_arg(args, 1, "dst")?;
        let barrier = match args.get(usize::MAX, "barrier") {
            None | Some(Value::None) => None,
            Some(_) => Some(self.barrier_arg(args, usize::MAX, "barrier")?),
        };
        let entity = self.add_tile_op(TileOp::Copy { src, dst }, "`T.tma_copy`", args.span)?;
        if let Some(barrier) = barrier {
            self.world.copy_barriers.set(entity, barrier);
        }
        Ok(Value::None)
    }

    /// `T.access_ptr(buffer[indices], mode, extent)`: the address of one element, which tilec keeps
    /// as that element (a point region) for the operation that takes it.
    fn access_ptr<'a>(&mut self, args: &Args<'a>) -> Eval<Value<'a>> {
        let span = args.span_of(0, "buffer");
        match self.required(args, 0, "buffer")? {
            Value::Buffer(buffer) if self.world.kind(buffer) == Some(EntityKind::Buffer) => {
                let zero = self.world.exprs.int(0);
                let dims = self.world.shapes.get(buffer).map_or(0, Vec::len);
                Ok(Value::Region(Region {
                    buffer,
                    dims: vec![
                        RegionDim {
                            start: zero,
                            extent: None,
                        };
                        dims
                    ],
                }))
            }
            Value::Region(region) if region.dims.iter().all(|dim| dim.extent.is_none()) => {
                Ok(Value::Region(region))
            }
            other => {
                let what = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    span,
                    format!("`T.access_ptr` takes a buffer or one element of one, found {what}"),
                ))
            }
        }
    }

    /// `T.ptx_cp_async(dst, src, n)`: thread by thread, `n` consecutive elements (in row-major
    /// order) from the element `src` points at to the one `dst` points at. tilec makes the copy
    /// as `n` element stores of the thread (its own `cp.async` is for the copies it plans), which
    /// land before anything after them, as a `cp.async` waited for would.
    fn element_copy<'a>(&mut self, args: &Args<'a>) -> Eval<Value<'a>> {
        let dst = self.pointer_arg(args, 0, "dst_access_ptr")?;
        let src = self.pointer_arg(args, 1, "src_access_ptr")?;
        let count_span = args.span_of(2, "num_elems");
        let count = match self.required(args, 2, "num_elems")? {
            Value::Int(count) if (1..=MAX_ELEMENT_COPY).contains(&count) => count,
            other => {
                let what = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    count_span,
                    format!(
                        "`num_elems` must be an integer from 1 to {MAX_ELEMENT_COPY} known at compile time, found {what}"
                    ),
                ));
            }
        };
        for k in 0..count {
            let target = self.element_after(&dst, k);
            let source = self.element_after(&src, k);
            self.store(target, Value::Region(source), args.span)?;
        }
        Ok(Value::None)
    }

    fn pointer_arg(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<Region> {
        match self.required(args, index, name)? {
            Value::Region(region) if region.dims.iter().all(|dim| dim.extent.is_none()) => {
                Ok(region)
            }
            other => {
                let what = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    args.span_of(index, name),
                    format!("`{name}` must be a `T.access_ptr` of one element, found {what}"),
                ))
            }
        }
    }

    /// The element `k` places after the point region `at`, in row-major order over its buffer.
    fn element_after(&mut self, at: &Region, k: i64) -> Region {
        if k == 0 {
            return at.clone();
        }
        let shape = self
            .world
            .shapes
            .get(at.buffer)
            .cloned()
            .unwrap_or_default();
        let starts: Vec<ExprId> = at.dims.iter().map(|dim| dim.start).collect();
        let exprs = &mut self.world.exprs;
        let flat = exprs.flatten_row_major(&starts, &shape);
        let step = exprs.int(k);
        let moved = exprs.add(flat, step);
        let indices = exprs.unflatten_row_major(moved, &shape);
        Region {
            buffer: at.buffer,
            dims: indices
                .into_iter()
                .map(|start| RegionDim {
                    start,
                    extent: None,
                })
                .collect(),
        }
    }

    /// `T.ws(i, ...)`: the frame of a runtime `if` that the threads of warpgroups `i, ...` take
    /// (thread `t` is in warpgroup `t // 128`).
    fn warpgroup_role<'a>(&mut self, args: &Args<'a>) -> Eval<Value<'a>> {
        let mut groups = Vec::new();
        for (value, span) in &args.positional {
            match value {
                Value::Int(group) if *group >= 0 => groups.push(*group),
                Value::Poison => return Err(Stop),
                other => {
                    let what = other.describe();
                    return Err(self.error(
                        Code::InvalidCall,
                        *span,
                        format!("`T.ws` takes warpgroup indices (integers from 0), found {what}"),
                    ));
                }
            }
        }
        if groups.is_empty() {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.ws` needs at least one warpgroup index",
            ));
        }
        let (thread, _) = self.flat_thread_index(args.span, "ws")?;
        let warpgroup = self.world.exprs.int(WARPGROUP);
        let index = self.world.exprs.floordiv(thread, warpgroup);
        let index = self.world.data.push(DataExpr::Index(index));
        let mut cond: Option<DataId> = None;
        for group in groups {
            let value = self.world.data.push(DataExpr::Int {
                value: group,
                dtype: None,
            });
            let equal = self.world.data.push(DataExpr::Compare {
                op: CompareOp::Eq,
                lhs: index,
                rhs: value,
            });
            cond = Some(match cond {
                None => equal,
                Some(earlier) => self.world.data.push(DataExpr::Binary {
                    op: BinaryOp::Or,
                    lhs: earlier,
                    rhs: equal,
                }),
            });
        }
        match cond {
            Some(cond) => Ok(Value::GuardFrame(cond)),
            None => Err(Stop),
        }
    }
}
