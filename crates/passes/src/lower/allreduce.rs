//! The thread all-reduce of lowering: partial results held by threads that differ only in some
//! bits of the thread index are combined so that every one of those threads ends with the whole
//! result. XOR shuffles combine partners within a warp, a shared-memory workspace combines them
//! across warps. `T.reduce_*` uses it for the threads holding parts of one line, and
//! `T.tvm_thread_allreduce` for the threads of the dimensions it names.

use tilec_ir::data::BinaryOp;
use tilec_ir::thread::{BufferDecl, Memory, Place, Stmt, Value, ValueId};
use tilec_ir::{AccessKind, DType, DataId, EntityId, Region};

use crate::layout::fragment::{NO_THREAD, Owners};

use super::{Lowering, Unlowerable, sync};

impl Lowering<'_> {
    /// `T.tvm_thread_allreduce`: each thread stores into `result` the `combiner` fold of `source`
    /// over the threads that differ from it only in the thread dimensions `dims`. Those threads
    /// differ in whole bits of the flat thread index when each reduced dimension's extent and
    /// stride are powers of two, which is what the XOR all-reduce needs; other shapes are reported.
    pub(super) fn thread_all_reduce(
        &mut self,
        combiner: BinaryOp,
        source: DataId,
        result: &Region,
        dims: &[usize],
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let masks = self.thread_dimension_masks(dims)?;
        let dtype = self.element_dtype(result.buffer);
        let value = self.value_as(source, dtype)?;
        let partial = self.temporary("allreduce", dtype, 1);
        let zero = self.program.exprs.int(0);
        out.push(Stmt::Store {
            place: Place {
                buffer: partial,
                index: zero,
            },
            value,
        });
        let (warp, block): (Vec<u32>, Vec<u32>) = masks.into_iter().partition(|&m| m < 32);
        self.all_reduce_shuffles(combiner, partial, 1, &warp, dtype, out);
        if !block.is_empty() {
            self.all_reduce_shared(combiner, partial, 1, &block, dtype, out);
        }
        let reduced = self.program.add_value(Value::Load {
            buffer: partial,
            index: zero,
        });
        let indices: Vec<_> = result.dims.iter().map(|dim| dim.start).collect();
        let (buffer, index) = self.address(result.buffer, &indices)?;
        out.push(Stmt::Store {
            place: Place { buffer, index },
            value: reduced,
        });
        Ok(())
    }

    /// `T.finalize_reducer`: the copies of each element of the reducer fragment `buffer`, held by
    /// the threads its layout replicates the element over, are combined in place, register by
    /// register, so that every copy holds the combination of all contributions.
    pub(super) fn finalize_reducer(
        &mut self,
        buffer: EntityId,
        combiner: BinaryOp,
        init: Option<DataId>,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let Some(storage) = self.fragments.get(&buffer).cloned() else {
            return Err(Unlowerable::new(
                "a reducer that is not laid out as a fragment",
            ));
        };
        let owners = storage.layout.owners(&self.program.exprs);
        let masks = replica_masks(&owners)?;
        let id = self.buffer_of(buffer)?;
        let dtype = self.element_dtype(buffer);
        let slots = storage.local_size().max(0);
        let (warp, block): (Vec<u32>, Vec<u32>) = masks.into_iter().partition(|&m| m < 32);
        self.all_reduce_shuffles(combiner, id, slots, &warp, dtype, out);
        if !block.is_empty() {
            self.all_reduce_shared(combiner, id, slots, &block, dtype, out);
        }
        // Every copy holds the total now; the starting value joins each of them once.
        if let Some(init) = init {
            let start = self.value_as(init, dtype)?;
            for slot in 0..slots {
                let index = self.program.exprs.int(slot);
                let total = self.program.add_value(Value::Load { buffer: id, index });
                let value = self.combine_op(combiner, start, total, dtype);
                out.push(Stmt::Store {
                    place: Place { buffer: id, index },
                    value,
                });
            }
        }
        Ok(())
    }

    /// The bits of the flat thread index that the thread dimensions `dims` occupy, one mask per
    /// bit: dimension `d` starts at the product of the extents below it.
    fn thread_dimension_masks(&self, dims: &[usize]) -> Result<Vec<u32>, Unlowerable> {
        // The dimensions are the launch's; a group's threads are numbered from 0 on their own.
        if self.group.is_some() {
            return Err(Unlowerable::new(
                "a thread all-reduce inside a group of the block's threads (`T.ws`): tilec \
                 combines the launch's thread dimensions",
            ));
        }
        // The launch's threads per dimension: the program's own block is flat.
        let block: Vec<i64> = self
            .world
            .launches
            .get(self.launch)
            .map(|launch| launch.threads.clone())
            .unwrap_or_default();
        let mut masks = Vec::new();
        for &dim in dims {
            let extent = block.get(dim).copied().unwrap_or(1);
            let stride: i64 = block.iter().take(dim).product();
            let power = |n: i64| n > 0 && n & (n - 1) == 0;
            if !power(extent) || !power(stride) {
                return Err(Unlowerable::new(format!(
                    "a thread all-reduce over thread dimension {dim} of a block of {block:?} \
                     threads: tilec combines threads that differ in whole bits of the thread \
                     index, which needs power-of-two extents below and along that dimension"
                )));
            }
            let mut bit = stride;
            while bit < stride * extent {
                masks.push(u32::try_from(bit).unwrap_or(u32::MAX));
                bit *= 2;
            }
        }
        masks.sort_unstable();
        masks.dedup();
        Ok(masks)
    }

    /// `combiner(lhs, rhs)` as a value of `dtype`.
    pub(super) fn combine_op(
        &mut self,
        combiner: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
        dtype: DType,
    ) -> ValueId {
        self.program.add_value(Value::Binary {
            op: combiner,
            lhs,
            rhs,
            dtype,
        })
    }

    /// Combines `partial[0..slots]` across the lanes that differ in the bits of `masks` (each
    /// below 32): one XOR shuffle per mask, after which every such lane holds the same result.
    pub(super) fn all_reduce_shuffles(
        &mut self,
        combiner: BinaryOp,
        partial: tilec_ir::thread::BufferId,
        slots: i64,
        masks: &[u32],
        dtype: DType,
        out: &mut Vec<Stmt>,
    ) {
        for &mask in masks {
            for slot in 0..slots {
                let index = self.program.exprs.int(slot);
                let mine = self.program.add_value(Value::Load {
                    buffer: partial,
                    index,
                });
                let theirs = self.program.add_value(Value::ShuffleXor {
                    value: mine,
                    mask,
                    dtype,
                });
                let combined = self.combine_op(combiner, mine, theirs, dtype);
                out.push(Stmt::Store {
                    place: Place {
                        buffer: partial,
                        index,
                    },
                    value: combined,
                });
            }
        }
    }

    /// Combines partials across warps: every thread writes its partials to a workspace, and after
    /// a barrier each thread folds its group's entries in thread order, so every member gets the
    /// same bits.
    pub(super) fn all_reduce_shared(
        &mut self,
        combiner: BinaryOp,
        partial: tilec_ir::thread::BufferId,
        slots: i64,
        masks: &[u32],
        dtype: DType,
        out: &mut Vec<Stmt>,
    ) {
        let workspace = self.workspace(dtype, slots * self.threads);
        let mut accesses = sync::Accesses::default();
        accesses.add(workspace, AccessKind::ReadWrite);
        self.sync.before(&accesses, out);
        let t = self.program.exprs.var_expr(self.program.thread);
        for slot in 0..slots {
            let slot_index = self.program.exprs.int(slot);
            let base = self.program.exprs.int(slot * self.threads);
            let at = self.program.exprs.add(base, t);
            let mine = self.program.add_value(Value::Load {
                buffer: partial,
                index: slot_index,
            });
            out.push(Stmt::Store {
                place: Place {
                    buffer: workspace,
                    index: at,
                },
                value: mine,
            });
        }
        out.push(Stmt::Barrier);
        // The group's lowest member: the thread index with every mask bit cleared.
        let mut low = t;
        for &mask in masks {
            let m = self.program.exprs.int(i64::from(mask));
            let two = self.program.exprs.int(2);
            let shifted = self.program.exprs.floordiv(t, m);
            let bit = self.program.exprs.floormod(shifted, two);
            let value = self.program.exprs.mul(bit, m);
            low = self.program.exprs.sub(low, value);
        }
        let members = subset_sums(masks);
        for slot in 0..slots {
            let slot_index = self.program.exprs.int(slot);
            let mut first = true;
            for &member in &members {
                let offset = self.program.exprs.int(slot * self.threads + member);
                let at = self.program.exprs.add(low, offset);
                let entry = self.program.add_value(Value::Load {
                    buffer: workspace,
                    index: at,
                });
                let value = if first {
                    entry
                } else {
                    let acc = self.program.add_value(Value::Load {
                        buffer: partial,
                        index: slot_index,
                    });
                    self.combine_op(combiner, acc, entry, dtype)
                };
                first = false;
                out.push(Stmt::Store {
                    place: Place {
                        buffer: partial,
                        index: slot_index,
                    },
                    value,
                });
            }
        }
        self.sync.after(&accesses);
    }

    /// A shared-memory scratch area for cross-warp reductions, placed after the planned buffers;
    /// an earlier reduction's, large enough, when areas are shared.
    pub(super) fn workspace(&mut self, dtype: DType, elements: i64) -> tilec_ir::thread::BufferId {
        if let Some(&(_, _, reused)) = self
            .reduce_workspaces
            .iter()
            .filter(|_| self.share_reduce_workspaces)
            .find(|(kind, size, _)| *kind == dtype && *size >= elements)
        {
            return reused;
        }
        let bytes = elements * i64::try_from(dtype.bytes()).unwrap_or(i64::MAX);
        let offset = (self.program.shared_bytes + 15) / 16 * 16;
        self.program.shared_bytes = offset + (bytes + 15) / 16 * 16;
        let name = self.unique_name("reduce_workspace");
        let count = self.program.exprs.int(elements);
        let buffer = self.program.add_buffer(BufferDecl {
            name,
            dtype,
            memory: Memory::Shared { offset },
            shape: vec![count],
            elements: count,
            strides: None,
        });
        self.reduce_workspaces.push((dtype, elements, buffer));
        buffer
    }
}

/// The single-bit XOR masks between the threads holding copies of one element: the copies of
/// every element must sit on one coset of the masks' span, so that XOR partners combine copies
/// of the same element.
fn replica_masks(owners: &Owners) -> Result<Vec<u32>, Unlowerable> {
    let not_partners = || {
        Unlowerable::new(
            "a reducer whose copies of one element are not held by a group of XOR partner \
             threads",
        )
    };
    let Some(&first) = owners.of(0).first() else {
        return Ok(Vec::new());
    };
    let union = owners.of(0).iter().fold(0i64, |acc, &t| acc | (t ^ first));
    let masks: Vec<u32> = (0..31)
        .map(|b| 1u32 << b)
        .filter(|&m| union & i64::from(m) != 0)
        .collect();
    for ordinal in 0..owners.elements() {
        let group = owners.of(ordinal);
        let base = group.first().copied().unwrap_or(NO_THREAD);
        let coset = group.len() == 1usize << masks.len()
            && group.windows(2).all(|pair| pair[0] < pair[1])
            && group.iter().all(|&t| t >= 0 && (t ^ base) & !union == 0);
        if base == NO_THREAD || !coset {
            return Err(not_partners());
        }
    }
    Ok(masks)
}

/// Every sum of a subset of `masks` (distinct bits), ascending.
fn subset_sums(masks: &[u32]) -> Vec<i64> {
    let mut sums = vec![0i64];
    for &mask in masks {
        let more: Vec<i64> = sums.iter().map(|&s| s + i64::from(mask)).collect();
        sums.extend(more);
    }
    sums.sort_unstable();
    sums
}
