//! Proxy fences in front of the barriers that publish shared memory to the async proxy.
//!
//! wgmma reads its shared operands, and a TMA store reads its box, through the async proxy. A
//! thread's generic writes to that memory (stores, vector copies, landed cp.asyncs, atomics) become
//! visible to the async proxy only through `fence.proxy.async` followed by a barrier, so such a
//! barrier needs a fence in front of it.
//!
//! A fence costs as much as waiting for the thread's outstanding memory operations (attention's
//! epilogue measured 0.1 % of its cycles in two fences: BENCHMARKS.md, 2026-11-25), so a barrier
//! gets one only where it may publish such a write: walking back from the barrier through its own
//! statement list, the fence is needed when a statement writes generically to shared bytes the
//! async proxy reads somewhere in the kernel, and is not needed when a barrier comes first (that
//! barrier carries its own fence if it needs one). Reaching the start of the list (the top of a
//! loop body, whose previous iteration is not followed) needs the fence too, so the walk errs only
//! towards a fence too many.

use tilec_ir::thread::{BufferId, Memory, Stmt, ThreadProgram, WgmmaA, for_each_stmt};
use tilec_ir::visit::VisitorMut;

/// The byte ranges of shared memory the async proxy reads: wgmma operands and TMA store boxes.
struct AsyncReadSpace {
    ranges: Vec<SharedRange>,
}

/// Where a shared buffer lies in the block's shared memory; `None` bytes for a buffer whose size
/// is not a constant, which is taken to overlap everything.
#[derive(Clone, Copy)]
struct SharedRange {
    start: i64,
    bytes: Option<i64>,
}

impl SharedRange {
    fn of(program: &ThreadProgram, buffer: BufferId) -> Option<SharedRange> {
        let decl = program.buffer(buffer);
        let Memory::Shared { offset } = decl.memory else {
            return None;
        };
        let elements = program.exprs.as_int(decl.elements);
        let element_bytes = i64::try_from(decl.dtype.bytes()).ok();
        Some(SharedRange {
            start: offset,
            bytes: elements.zip(element_bytes).map(|(n, b)| n * b),
        })
    }

    fn overlaps(self, other: SharedRange) -> bool {
        match (self.bytes, other.bytes) {
            (Some(a), Some(b)) => self.start < other.start + b && other.start < self.start + a,
            _ => true,
        }
    }
}

impl AsyncReadSpace {
    fn of(program: &ThreadProgram, stmts: &[Stmt]) -> AsyncReadSpace {
        let mut buffers = Vec::new();
        for_each_stmt(stmts, &mut |stmt| match stmt {
            Stmt::Wgmma { a, b, .. } => {
                buffers.push(b.buffer);
                if let WgmmaA::Shared(a) = a {
                    buffers.push(a.buffer);
                }
            }
            Stmt::TmaStore { src, .. } => buffers.push(src.buffer),
            _ => {}
        });
        let ranges = buffers
            .into_iter()
            .filter_map(|buffer| SharedRange::of(program, buffer))
            .collect();
        AsyncReadSpace { ranges }
    }

    /// Whether `stmt`, or a statement nested in it, writes generically to shared memory the async
    /// proxy reads.
    fn written_by(&self, program: &ThreadProgram, stmt: &Stmt) -> bool {
        let mut writes = false;
        for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
            let written = match s {
                Stmt::Store { place: dst, .. }
                | Stmt::Atomic { place: dst, .. }
                | Stmt::VectorCopy { dst, .. }
                | Stmt::AsyncCopy { dst, .. } => Some(dst.buffer),
                _ => None,
            };
            let read_async = written
                .and_then(|buffer| SharedRange::of(program, buffer))
                .is_some_and(|range| self.ranges.iter().any(|r| r.overlaps(range)));
            writes |= read_async;
        });
        writes
    }
}

/// Puts a proxy fence in front of every barrier (block-wide or named) that may publish a generic
/// write of memory the async proxy reads (see the module documentation).
pub(super) fn fence_barriers(program: &ThreadProgram, stmts: &mut Vec<Stmt>) {
    let space = AsyncReadSpace::of(program, stmts);
    if space.ranges.is_empty() {
        return;
    }
    Fencer {
        program,
        space: &space,
    }
    .visit_body(stmts);
}

/// Fences the barriers of every statement list, nested ones included.
struct Fencer<'a> {
    program: &'a ThreadProgram,
    space: &'a AsyncReadSpace,
}

impl VisitorMut for Fencer<'_> {
    fn visit_body(&mut self, stmts: &mut Vec<Stmt>) {
        let mut fenced: Vec<Stmt> = Vec::with_capacity(stmts.len());
        for mut stmt in std::mem::take(stmts) {
            let publishes = if matches!(stmt, Stmt::Barrier | Stmt::NamedBarrier { .. }) {
                publishes_async_reads(self.program, self.space, &fenced)
            } else {
                arrives(&stmt) && writes_async_reads(self.program, self.space, &fenced)
            };
            if publishes {
                fenced.push(Stmt::FenceProxyAsync);
            }
            self.visit_stmt(&mut stmt);
            fenced.push(stmt);
        }
        *stmts = fenced;
    }
}

/// Whether a barrier after `before` (the statements ahead of it in its list) may publish a write
/// the async proxy reads: one of them writes such memory after the last barrier, or no barrier
/// comes before the list's start.
fn publishes_async_reads(program: &ThreadProgram, space: &AsyncReadSpace, before: &[Stmt]) -> bool {
    for stmt in before.iter().rev() {
        if matches!(stmt, Stmt::Barrier | Stmt::NamedBarrier { .. }) {
            return false;
        }
        if space.written_by(program, stmt) {
            return true;
        }
    }
    true
}

/// Whether `stmt` is an arrival on an mbarrier or a named barrier (`bar.arrive`), or a statement
/// block that starts with one: it hands what the arriving threads wrote to the threads that wait
/// there, which may read it through the async proxy (a producer's copies, then its arrival on the
/// stage's "full" barrier, then the consumers' wgmma).
fn arrives(stmt: &Stmt) -> bool {
    if let Stmt::Block { body, .. } = stmt {
        return body.first().is_some_and(arrives);
    }
    matches!(
        stmt,
        Stmt::MbarrierArrive { .. } | Stmt::NamedBarrierArrive { .. }
    )
}

/// Whether one of `before` (the statements ahead of an arrival in its list) writes generically to
/// memory the async proxy reads, after the last barrier. Unlike a barrier, an arrival at the
/// start of its list is not fenced: it publishes only what its own list wrote, and a fence on
/// every arrival at the top of a loop body would stall each stage of tilec's own pipelines.
fn writes_async_reads(program: &ThreadProgram, space: &AsyncReadSpace, before: &[Stmt]) -> bool {
    for stmt in before.iter().rev() {
        if matches!(
            stmt,
            Stmt::Barrier | Stmt::NamedBarrier { .. } | Stmt::FenceProxyAsync
        ) {
            return false;
        }
        if space.written_by(program, stmt) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use tilec_ir::thread::{BufferDecl, BufferId, Memory, Place, Stmt, Value};
    use tilec_ir::{DType, ExprArena, ThreadProgram};

    use super::fence_barriers;

    /// A program whose shared memory holds `tile` (bytes 0..256, which a TMA store reads),
    /// `other` (256..512) and `alias` (128..384, overlapping both).
    struct Fixture {
        program: ThreadProgram,
        tile: BufferId,
        other: BufferId,
        alias: BufferId,
    }

    impl Fixture {
        fn new() -> Fixture {
            let mut exprs = ExprArena::new();
            let thread = exprs.var("tx", Some(128));
            let block_index = [0, 1, 2].map(|k| exprs.var(&format!("b{k}"), Some(1)));
            let one = exprs.int(1);
            let mut program = ThreadProgram {
                name: "fences".to_owned(),
                exprs,
                values: Vec::new(),
                buffers: Vec::new(),
                params: Vec::new(),
                scalars: Vec::new(),
                grid: [one; 3],
                block: [128, 1, 1],
                thread,
                block_index,
                persistent: None,
                shared_bytes: 512,
                tensor_maps: Vec::new(),
                extern_sources: Vec::new(),
                body: Vec::new(),
            };
            let mut shared = |name: &str, offset: i64| {
                let elements = program.exprs.int(128);
                program.add_buffer(BufferDecl {
                    name: name.to_owned(),
                    dtype: DType::Float16,
                    memory: Memory::Shared { offset },
                    shape: vec![elements],
                    elements,
                    strides: None,
                })
            };
            let tile = shared("tile", 0);
            let other = shared("other", 256);
            let alias = shared("alias", 128);
            Fixture {
                program,
                tile,
                other,
                alias,
            }
        }

        fn store(&mut self, buffer: BufferId) -> Stmt {
            let value = self.program.add_value(Value::Float {
                bits: 0.0f64.to_bits(),
                dtype: DType::Float16,
            });
            Stmt::Store {
                place: Place {
                    buffer,
                    index: self.program.exprs.int(0),
                },
                value,
            }
        }

        fn tma_store(&mut self) -> Stmt {
            Stmt::TmaStore {
                map: 0,
                src: Place {
                    buffer: self.tile,
                    index: self.program.exprs.int(0),
                },
                coords: Vec::new(),
            }
        }

        /// `stmts` after the pass, one word per statement, nested lists in brackets.
        fn fenced(&self, mut stmts: Vec<Stmt>) -> String {
            fence_barriers(&self.program, &mut stmts);
            self.render(&stmts)
        }

        fn render(&self, stmts: &[Stmt]) -> String {
            let words: Vec<String> = stmts
                .iter()
                .map(|stmt| match stmt {
                    Stmt::Store { place, .. } => {
                        format!("store({})", self.program.buffer(place.buffer).name)
                    }
                    Stmt::Barrier => "barrier".to_owned(),
                    Stmt::FenceProxyAsync => "FENCE".to_owned(),
                    Stmt::TmaStore { .. } => "tma_store".to_owned(),
                    Stmt::MbarrierArrive { .. } => "arrive".to_owned(),
                    Stmt::Block { body, .. } | Stmt::For { body, .. } => {
                        format!("[{}]", self.render(body))
                    }
                    other => format!("{other:?}"),
                })
                .collect();
            words.join(" ")
        }
    }

    fn block(body: Vec<Stmt>) -> Stmt {
        Stmt::Block {
            origin: None,
            label: String::new(),
            body,
        }
    }

    #[test]
    fn only_barriers_that_may_publish_async_read_memory_are_fenced() {
        let mut f = Fixture::new();
        let stmts = vec![
            f.store(f.tile),
            Stmt::Barrier,
            f.tma_store(),
            f.store(f.other),
            Stmt::Barrier,
            f.store(f.alias),
            Stmt::Barrier,
        ];
        assert_eq!(
            f.fenced(stmts),
            "store(tile) FENCE barrier tma_store store(other) barrier store(alias) FENCE barrier"
        );
    }

    #[test]
    fn writes_nested_in_earlier_statements_count_and_the_start_of_a_list_fences() {
        let mut f = Fixture::new();
        let stmts = vec![
            block(vec![f.store(f.tile), f.store(f.other)]),
            block(vec![f.store(f.other)]),
            Stmt::Barrier,
            block(vec![Stmt::Barrier, f.store(f.other), Stmt::Barrier]),
            f.tma_store(),
        ];
        assert_eq!(
            f.fenced(stmts),
            "[store(tile) store(other)] [store(other)] FENCE barrier \
             [FENCE barrier store(other) barrier] tma_store"
        );
    }

    #[test]
    fn an_arrival_after_writes_the_async_proxy_reads_is_fenced_one_at_a_list_start_is_not() {
        let mut f = Fixture::new();
        let one = f.program.exprs.int(1);
        let zero = f.program.exprs.int(0);
        let barrier = f.program.add_buffer(BufferDecl {
            name: "full".to_owned(),
            dtype: DType::UInt64,
            memory: Memory::Shared { offset: 512 },
            shape: vec![one],
            elements: one,
            strides: None,
        });
        let arrive = || Stmt::MbarrierArrive {
            barrier: Place {
                buffer: barrier,
                index: zero,
            },
            expect_bytes: None,
        };
        let stmts = vec![
            block(vec![arrive()]),
            f.store(f.other),
            arrive(),
            f.store(f.tile),
            block(vec![arrive()]),
            f.tma_store(),
        ];
        assert_eq!(
            f.fenced(stmts),
            "[arrive] store(other) arrive store(tile) FENCE [arrive] tma_store"
        );
    }

    #[test]
    fn without_async_reads_nothing_is_fenced() {
        let mut f = Fixture::new();
        let stmts = vec![f.store(f.tile), Stmt::Barrier];
        assert_eq!(f.fenced(stmts), "store(tile) barrier");
    }
}
