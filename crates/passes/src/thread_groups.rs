//! Thread groups: which threads of the block run each statement, when the conditions of the
//! runtime `if`s around it narrow them by the thread index.
//!
//! Warp-specialized kernels give each warpgroup its own code (`with T.ws(1):` is
//! `if tx // 128 == 1:`; hand-written kernels say `if tx >= 128:`). TileLang lays out and lowers a
//! tile operation under such a condition for the threads that reach it (its "thread bounds"), and
//! so does tilec: a statement's group is the set of threads that satisfy every thread condition
//! around it. The set is found by evaluating the conditions for each thread of the block, so any
//! arithmetic on the thread index works; groups tilec can lay out are contiguous ranges of whole
//! warps. A condition that also reads something only known when the kernel runs (a loaded value,
//! a loop counter) narrows nothing that can be known: the statements under it have no group.

use std::collections::BTreeMap;

use tilec_ir::data::BinaryOp;
use tilec_ir::{DataExpr, DataId, EntityId, EntityKind, VarId, World};

/// Threads of a warp: groups are made of whole warps.
const WARP: i64 = 32;

/// The threads `start .. start + extent` of a block of `block` threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadGroup {
    pub start: i64,
    pub extent: i64,
    pub block: i64,
}

impl ThreadGroup {
    /// Whether the group is the whole block (no condition narrows it).
    pub fn is_whole(&self) -> bool {
        self.start == 0 && self.extent == self.block
    }
}

/// What is known of the threads that run one statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// A contiguous range of whole warps (the whole block when nothing narrows it).
    Known(ThreadGroup),
    /// Conditions on the thread index narrow the threads in a way that is not a range of whole
    /// warps, or mix the thread index with values known only at run time.
    Unknown,
}

/// The group of every statement of every launch of a world.
#[derive(Clone, Debug, Default)]
pub struct ThreadGroups {
    groups: BTreeMap<EntityId, Group>,
}

impl ThreadGroups {
    pub fn new(world: &World) -> ThreadGroups {
        let mut groups = ThreadGroups::default();
        for (launch, info) in world.launches.iter() {
            let block = info.thread_count();
            let all = Threads::All(block);
            let Some(thread) = info.thread_var else {
                groups.assign_all(world, launch, Group::Known(whole(block)));
                continue;
            };
            let walk = Walk {
                world,
                thread,
                block,
            };
            walk.body(world.body(launch), &all, &mut groups.groups);
        }
        groups
    }

    /// The group of `entity`; the whole block for an entity no launch contains.
    pub fn of(&self, entity: EntityId) -> Option<Group> {
        self.groups.get(&entity).copied()
    }

    /// The group of `entity` when it is a known range narrower than the block.
    pub fn narrowed(&self, entity: EntityId) -> Option<ThreadGroup> {
        match self.of(entity)? {
            Group::Known(group) if !group.is_whole() => Some(group),
            Group::Known(_) | Group::Unknown => None,
        }
    }

    /// The number of threads that run `entity`, or `block` when that is not known to be fewer.
    pub fn threads_of(&self, entity: EntityId, block: i64) -> i64 {
        self.narrowed(entity).map_or(block, |group| group.extent)
    }

    fn assign_all(&mut self, world: &World, entity: EntityId, group: Group) {
        for &child in world.body(entity) {
            self.groups.insert(child, group);
            self.assign_all(world, child, group);
        }
        if let Some(otherwise) = world.else_bodies.get(entity) {
            for &child in otherwise {
                self.groups.insert(child, group);
                self.assign_all(world, child, group);
            }
        }
    }
}

fn whole(block: i64) -> ThreadGroup {
    ThreadGroup {
        start: 0,
        extent: block,
        block,
    }
}

/// The threads that reach a statement.
#[derive(Clone, Debug)]
enum Threads {
    /// Every thread of a block of this many.
    All(i64),
    /// Thread `t` reaches it when `mask[t]`.
    Some(Vec<bool>),
    /// Not known at compile time.
    Unknown,
}

struct Walk<'w> {
    world: &'w World,
    thread: VarId,
    block: i64,
}

impl Walk<'_> {
    fn body(&self, body: &[EntityId], threads: &Threads, out: &mut BTreeMap<EntityId, Group>) {
        for &entity in body {
            out.insert(entity, self.group(threads));
            let (then, otherwise) = match self.world.kind(entity) {
                Some(EntityKind::If) => self.branches(entity, threads),
                _ => (threads.clone(), threads.clone()),
            };
            self.body(self.world.body(entity), &then, out);
            if let Some(else_body) = self.world.else_bodies.get(entity) {
                self.body(else_body, &otherwise, out);
            }
        }
    }

    /// The threads that take each branch of the runtime `if` `entity`.
    fn branches(&self, entity: EntityId, threads: &Threads) -> (Threads, Threads) {
        let Some(&cond) = self.world.conditions.get(entity) else {
            return (Threads::Unknown, Threads::Unknown);
        };
        if !self.reads_thread(cond) {
            return (threads.clone(), threads.clone());
        }
        let mask = match threads {
            Threads::All(block) => match usize::try_from(*block) {
                Ok(block) => vec![true; block],
                Err(_) => return (Threads::Unknown, Threads::Unknown),
            },
            Threads::Some(mask) => mask.clone(),
            Threads::Unknown => return (Threads::Unknown, Threads::Unknown),
        };
        let mut then = mask.clone();
        let mut otherwise = mask;
        for (slot, t) in (0..self.block).enumerate() {
            match self.eval(cond, t) {
                Some(taken) => {
                    then[slot] &= taken != 0;
                    otherwise[slot] &= taken == 0;
                }
                None => return (Threads::Unknown, Threads::Unknown),
            }
        }
        (Threads::Some(then), Threads::Some(otherwise))
    }

    fn group(&self, threads: &Threads) -> Group {
        match threads {
            Threads::All(block) => Group::Known(whole(*block)),
            Threads::Some(mask) => contiguous_warps(mask, self.block),
            Threads::Unknown => Group::Unknown,
        }
    }

    /// Whether the condition reads the thread index anywhere.
    fn reads_thread(&self, value: DataId) -> bool {
        let node = self.world.data.get(value);
        if let DataExpr::Index(e) = node {
            return self.world.exprs.vars_of(*e).contains(&self.thread);
        }
        node.operands().any(|operand| self.reads_thread(operand))
    }

    /// The value of a condition for thread `t`, when it depends on nothing else.
    fn eval(&self, value: DataId, t: i64) -> Option<i64> {
        match self.world.data.get(value) {
            DataExpr::Int { value, .. } => Some(*value),
            DataExpr::Index(e) => {
                let thread = self.thread;
                self.world
                    .exprs
                    .eval(*e, &|var| (var == thread).then_some(t))
            }
            DataExpr::Cast { value, .. } => self.eval(*value, t),
            DataExpr::Not(inner) => Some(i64::from(self.eval(*inner, t)? == 0)),
            DataExpr::Neg(inner) => self.eval(*inner, t)?.checked_neg(),
            DataExpr::Compare { op, lhs, rhs } => {
                let (a, b) = (self.eval(*lhs, t)?, self.eval(*rhs, t)?);
                Some(i64::from(op.holds(a, b)))
            }
            DataExpr::Binary { op, lhs, rhs } => {
                binary(*op, self.eval(*lhs, t)?, self.eval(*rhs, t)?)
            }
            DataExpr::Float { .. }
            | DataExpr::Load { .. }
            | DataExpr::ReadVar(_)
            | DataExpr::Call { .. }
            | DataExpr::Select { .. }
            | DataExpr::Reinterpret { .. }
            | DataExpr::Shuffle { .. }
            | DataExpr::WarpReduce { .. }
            | DataExpr::Random(_) => None,
        }
    }
}

/// Integer arithmetic as Python does it on the thread index (floor division and modulo).
fn binary(op: BinaryOp, a: i64, b: i64) -> Option<i64> {
    match op {
        BinaryOp::Add => a.checked_add(b),
        BinaryOp::Sub => a.checked_sub(b),
        BinaryOp::Mul => a.checked_mul(b),
        BinaryOp::FloorDiv => tilec_ir::expr::floor_div(a, b),
        // True division has no integer meaning here: such a condition is not a thread range.
        BinaryOp::Div => None,
        BinaryOp::Mod => tilec_ir::expr::floor_mod(a, b),
        BinaryOp::BitAnd => Some(a & b),
        BinaryOp::BitOr => Some(a | b),
        BinaryOp::BitXor => Some(a ^ b),
        BinaryOp::Shl => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
        BinaryOp::Shr => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
        BinaryOp::And => Some(i64::from(a != 0 && b != 0)),
        BinaryOp::Or => Some(i64::from(a != 0 || b != 0)),
        BinaryOp::Max => Some(a.max(b)),
        BinaryOp::Min => Some(a.min(b)),
        BinaryOp::Pow => u32::try_from(b).ok().and_then(|b| a.checked_pow(b)),
        BinaryOp::TruncMod => a.checked_rem(b),
        // A float operation: no thread range.
        BinaryOp::CopySign => None,
    }
}

/// The group of the threads `mask` holds, when they are whole warps in one run.
fn contiguous_warps(mask: &[bool], block: i64) -> Group {
    let Some(first) = mask.iter().position(|&taken| taken) else {
        return Group::Unknown;
    };
    let count = mask[first..].iter().take_while(|&&taken| taken).count();
    let (Ok(start), Ok(extent)) = (i64::try_from(first), i64::try_from(count)) else {
        return Group::Unknown;
    };
    if extent == block {
        return Group::Known(whole(block));
    }
    let rest_empty = mask[first + count..].iter().all(|&taken| !taken);
    if rest_empty && start % WARP == 0 && extent % WARP == 0 {
        Group::Known(ThreadGroup {
            start,
            extent,
            block,
        })
    } else {
        Group::Unknown
    }
}
