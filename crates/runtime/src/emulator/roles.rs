//! Warp specialization: the two roles of a `WarpRoles` statement run concurrently and meet only at
//! mbarriers and named barriers, and so do the branches of a hand-written warp-specialized `if` /
//! `else if` chain whose branches wait on mbarriers (`exec_concurrent_branches`); plus the
//! statements that only roles use (`bar.sync` with a thread count, `setmaxnreg`).
//!
//! Each role runs as a task: a resumable interpreter of its statement list with its own variable
//! environment, `let` shadowing and site stack, swapped into the machine while it runs. Only
//! statements that contain an `MbarrierWait` need to be resumable: the task interprets those with
//! an explicit stack of statement-list frames (loops, branches, blocks) and hands every other
//! statement to the ordinary recursive `exec`, so code without waits runs exactly as it does
//! outside roles. The threads of one role still run in lockstep.
//!
//! The scheduler is deterministic. It starts with the producer and runs a task until it finishes or
//! blocks on a wait whose phase has not completed, then switches to the other task, and so on.
//! Running the producer as far ahead as it can go exposes missing waits: without its wait on the
//! consumers' "empty" barrier, the producer issues the next copy into a stage whose previous copy
//! is still in flight, which is reported. When no unfinished task can make progress the block is
//! deadlocked, which is reported with every blocked wait.

use tilec_ir::thread::{Stmt, ValueId, for_each_stmt};
use tilec_ir::{EntityId, ExprId, VarId};

use super::error::{BlockedWait, EmulatorError, ErrorKind, Fault, WaitOn};
use super::exec::Machine;
use super::index::{Binding, Env};
use super::memory::{ROLES, RoleClock};
use super::named::Arrival;

const WARPGROUP: usize = 128;

/// An enclosing statement block: its origin and label.
type Site<'p> = (Option<EntityId>, &'p str);

/// The part of the machine that belongs to one task: what it has bound, shadowed and entered, and
/// its role's clock.
#[derive(Debug)]
struct Context<'p> {
    env: Env,
    shadowed: Vec<(usize, Binding)>,
    sites: Vec<Site<'p>>,
    clock: Option<RoleClock>,
}

/// What to do when a statement list of a task ends (after its `let`s are undone).
#[derive(Debug)]
pub(super) enum Exit<'p> {
    /// Nothing: the list is a role's body or the last branch of an `if` to run.
    Done,
    /// Leave a statement block.
    Block,
    /// Run iteration `next` of a loop, or restore the loop variable after the last one.
    Loop {
        slot: usize,
        next: i64,
        extent: i64,
        outer: Binding,
    },
    /// Run the `otherwise` branch of an `if` with the threads whose condition failed.
    Otherwise {
        stmts: &'p [Stmt],
        threads: Vec<u32>,
    },
}

/// A statement list being run by a task: the next statement, the threads running it, and the
/// depth of the shadowing stack when it started.
#[derive(Debug)]
pub(super) struct ListFrame<'p> {
    pub(super) stmts: &'p [Stmt],
    pub(super) next: usize,
    pub(super) active: Vec<u32>,
    shadowed: usize,
    exit: Exit<'p>,
}

impl<'p> ListFrame<'p> {
    pub(super) fn new(
        stmts: &'p [Stmt],
        active: Vec<u32>,
        shadowed: usize,
        exit: Exit<'p>,
    ) -> Self {
        ListFrame {
            stmts,
            next: 0,
            active,
            shadowed,
            exit,
        }
    }
}

/// One role as a resumable program; it has finished when no frame is left.
#[derive(Debug)]
struct Task<'p> {
    role: &'static str,
    frames: Vec<ListFrame<'p>>,
    context: Context<'p>,
    /// A branch of hand-written warp-specialized code: a wait that passes starts a race epoch, as
    /// one outside roles does (`mbarrier.rs`), since such code also hands data over through plain
    /// stores, which the role clocks do not order.
    epoch_at_waits: bool,
    /// The named barrier the task has reached and waits at, with the phases it had completed.
    named_wait: Option<(u32, u64)>,
}

/// The names of the branches of a hand-written warp-specialized `if` chain, in order.
const BRANCHES: [&str; ROLES] = [
    "first branch",
    "second branch",
    "third branch",
    "fourth branch",
];

/// A wait that blocks a task: the wait, the first thread it blocks and where it is.
#[derive(Debug)]
pub(super) struct Blocked<'p> {
    wait: BlockedWait,
    thread: u32,
    site: Option<Site<'p>>,
}

/// What one step of a task did.
pub(super) enum Step<'p> {
    Ran,
    Blocked(Blocked<'p>),
    Finished,
}

/// Whether a statement is or contains an `MbarrierWait` or a named barrier's `bar.sync`, so that
/// a task must be able to stop in it.
pub(super) fn contains_wait(stmt: &Stmt) -> bool {
    let mut found = false;
    for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
        found |= matches!(s, Stmt::MbarrierWait { .. } | Stmt::NamedBarrier { .. })
    });
    found
}

/// Whether the threads of `branch`, `threads` of them, need other threads running beside them:
/// they wait on an mbarrier, or reach a named barrier that more threads than theirs complete.
pub(super) fn needs_other_threads(branch: &[Stmt], threads: usize) -> bool {
    let mut found = false;
    for_each_stmt(branch, &mut |s| {
        found |= matches!(s, Stmt::MbarrierWait { .. })
            || matches!(
                s,
                Stmt::NamedBarrier { threads: needed, .. }
                    | Stmt::NamedBarrierArrive { threads: needed, .. }
                    if *needed as usize > threads
            );
    });
    found
}

impl<'p> Machine<'p, '_> {
    /// `WarpRoles`: threads below `consumers` run `consumer`, the others `producer`, as two tasks
    /// (see the module documentation). The statement ends when both have finished.
    pub(super) fn exec_warp_roles(
        &mut self,
        consumers: u32,
        (consumer, producer): (&'p [Stmt], &'p [Stmt]),
        active: &[u32],
    ) -> Result<(), Fault> {
        self.check_roles(consumers, active)?;
        let (consumer_threads, producer_threads): (Vec<u32>, Vec<u32>) =
            active.iter().partition(|&&thread| thread < consumers);
        let [producer_clock, consumer_clock, ..] = self.memory.start_roles();
        let mut tasks = [
            self.spawn(("producer", producer_clock), producer, producer_threads),
            self.spawn(("consumer", consumer_clock), consumer, consumer_threads),
        ];
        self.run_tasks(&mut tasks)
    }

    /// A hand-written warp-specialized `if` chain (`if tx < 128: ... elif tx >= 256: ...`) whose
    /// branches wait on mbarriers: on the GPU the branches' warps run side by side and meet only
    /// at mbarriers and named barriers, so each branch runs as a task of its own, as the roles of
    /// `WarpRoles` do; the statement ends when all have finished.
    pub(super) fn exec_concurrent_branches(
        &mut self,
        branches: Vec<(&'p [Stmt], Vec<u32>)>,
    ) -> Result<(), Fault> {
        let clocks = self.memory.start_roles();
        let mut tasks: Vec<Task<'p>> = branches
            .into_iter()
            .zip(clocks)
            .zip(BRANCHES)
            .map(|(((stmts, threads), clock), name)| {
                let mut task = self.spawn((name, clock), stmts, threads);
                task.epoch_at_waits = true;
                task
            })
            .collect();
        self.run_tasks(&mut tasks)
    }

    /// Runs tasks in turn, each until it finishes or blocks, until all have finished; a round in
    /// which none makes progress is a deadlock naming every blocked wait.
    fn run_tasks(&mut self, tasks: &mut [Task<'p>]) -> Result<(), Fault> {
        loop {
            let mut progressed = false;
            let mut blocked = Vec::new();
            for task in tasks.iter_mut().filter(|task| !task.frames.is_empty()) {
                let (ran, waiting) = self.resume(task)?;
                progressed |= ran;
                blocked.extend(waiting);
            }
            if tasks.iter().all(|task| task.frames.is_empty()) {
                return Ok(());
            }
            if !progressed {
                return Err(self.deadlock(blocked));
            }
        }
    }

    fn check_roles(&self, consumers: u32, active: &[u32]) -> Result<(), Fault> {
        if active.len() != self.threads {
            let message = "warp roles executed by only part of the block (under an `if` or \
                           inside another role)";
            return Err(self.malformed_fault(message));
        }
        let consumers = consumers as usize;
        if !consumers.is_multiple_of(WARPGROUP)
            || !self.threads.is_multiple_of(WARPGROUP)
            || consumers > self.threads
        {
            let message = format!(
                "warp roles with {consumers} consumer threads in a block of {}: both must be \
                 multiples of {WARPGROUP}",
                self.threads
            );
            return Err(self.malformed_fault(&message));
        }
        Ok(())
    }

    /// A task of role `role` running `stmts` with `threads`, starting from the machine's current
    /// bindings.
    fn spawn(
        &self,
        (role, clock): (&'static str, RoleClock),
        stmts: &'p [Stmt],
        threads: Vec<u32>,
    ) -> Task<'p> {
        let frames = if threads.is_empty() || stmts.is_empty() {
            Vec::new()
        } else {
            vec![ListFrame::new(stmts, threads, 0, Exit::Done)]
        };
        let context = Context {
            env: self.env.clone(),
            shadowed: Vec::new(),
            sites: self.sites.clone(),
            clock: Some(clock),
        };
        Task {
            role,
            frames,
            context,
            epoch_at_waits: false,
            named_wait: None,
        }
    }

    fn swap_context(&mut self, context: &mut Context<'p>) {
        std::mem::swap(&mut self.env, &mut context.env);
        std::mem::swap(&mut self.shadowed, &mut context.shadowed);
        std::mem::swap(&mut self.sites, &mut context.sites);
        std::mem::swap(&mut self.memory.clock, &mut context.clock);
    }

    /// Runs `task` until it finishes or blocks: whether it made progress, and the wait it blocks
    /// on if it did not finish.
    fn resume(&mut self, task: &mut Task<'p>) -> Result<(bool, Option<Blocked<'p>>), Fault> {
        self.swap_context(&mut task.context);
        let mut progressed = false;
        let outcome = loop {
            let waits = (task.role, task.epoch_at_waits);
            match self.step(waits, &mut task.frames, &mut task.named_wait) {
                Ok(Step::Ran) => progressed = true,
                Ok(Step::Blocked(blocked)) => break Ok((progressed, Some(blocked))),
                Ok(Step::Finished) => break Ok((progressed, None)),
                Err(fault) => break Err(fault),
            }
        };
        self.swap_context(&mut task.context);
        outcome
    }

    /// Runs the next statement of the innermost frame, or ends the frame.
    fn step(
        &mut self,
        (role, epoch_at_waits): (&'static str, bool),
        frames: &mut Vec<ListFrame<'p>>,
        named_wait: &mut Option<(u32, u64)>,
    ) -> Result<Step<'p>, Fault> {
        let Some(top) = frames.last_mut() else {
            return Ok(Step::Finished);
        };
        let Some(stmt) = top.stmts.get(top.next) else {
            if let Some(frame) = frames.pop() {
                self.end_list(frame, frames);
            }
            return Ok(Step::Ran);
        };
        if !contains_wait(stmt) {
            top.next += 1;
            self.exec(stmt, &top.active)?;
            return Ok(Step::Ran);
        }
        match stmt {
            Stmt::MbarrierWait { barrier, parity } => {
                let wait = (barrier.buffer, barrier.index, *parity);
                match self.try_mbarrier_wait(wait, role, &top.active)? {
                    None => {
                        if epoch_at_waits {
                            self.memory.barrier();
                        }
                        self.begin_statement(top.active.len());
                        top.next += 1;
                        Ok(Step::Ran)
                    }
                    Some((wait, thread)) => Ok(Step::Blocked(Blocked {
                        wait,
                        thread,
                        site: self.sites.last().copied(),
                    })),
                }
            }
            Stmt::NamedBarrier { id, threads } => {
                let (id, threads) = (*id, *threads);
                let completed = match named_wait.take() {
                    Some((waiting, completed)) if waiting == id => Some(completed),
                    _ => match self.named_arrive(id, threads, &top.active)? {
                        Arrival::Completed => None,
                        Arrival::Waiting(completed) => Some(completed),
                    },
                };
                if let Some(completed) = completed
                    && !self.named_passed(id, completed)
                {
                    *named_wait = Some((id, completed));
                    let arrived = self.named_arrived(id);
                    return Ok(Step::Blocked(Blocked {
                        wait: BlockedWait {
                            role,
                            on: WaitOn::NamedBarrier {
                                id,
                                arrived,
                                threads,
                            },
                        },
                        thread: top.active.first().copied().unwrap_or(0),
                        site: self.sites.last().copied(),
                    }));
                }
                if epoch_at_waits {
                    self.memory.barrier();
                }
                self.begin_statement(top.active.len());
                top.next += 1;
                Ok(Step::Ran)
            }
            Stmt::For {
                var, extent, body, ..
            } => self.enter_for((*var, *extent, body), frames),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => self.enter_if(*cond, (then, otherwise), frames),
            Stmt::Block {
                origin,
                label,
                body,
            } => {
                let active = self.enter_statement(frames);
                self.sites.push((*origin, label.as_str()));
                let shadowed = self.shadowed.len();
                frames.push(ListFrame::new(body, active, shadowed, Exit::Block));
                Ok(Step::Ran)
            }
            Stmt::WarpRoles { .. } => Err(self.malformed_fault("warp roles inside a role")),
            _ => Err(self.malformed_fault("a wait inside a statement that cannot hold one")),
        }
    }

    /// Counts the innermost frame's next statement as executed and moves past it; returns the
    /// threads executing it.
    pub(super) fn enter_statement(&mut self, frames: &mut [ListFrame<'p>]) -> Vec<u32> {
        let Some(top) = frames.last_mut() else {
            return Vec::new();
        };
        top.next += 1;
        self.begin_statement(top.active.len());
        top.active.clone()
    }

    /// A loop whose body contains a wait: its body becomes a frame, iteration by iteration.
    pub(super) fn enter_for(
        &mut self,
        (var, extent, body): (VarId, ExprId, &'p [Stmt]),
        frames: &mut Vec<ListFrame<'p>>,
    ) -> Result<Step<'p>, Fault> {
        let active = self.enter_statement(frames);
        let slot = self.var_slot(var)?;
        let extent = self.loop_extent(extent)?;
        if extent > 0
            && let Some(binding) = self.env.vars.get_mut(slot)
        {
            let outer = std::mem::replace(binding, Binding::Uniform(0));
            let exit = Exit::Loop {
                slot,
                next: 1,
                extent,
                outer,
            };
            frames.push(ListFrame::new(body, active, self.shadowed.len(), exit));
        }
        Ok(Step::Ran)
    }

    /// An `if` whose branches contain a wait: the threads split as in `exec_if`, and the `then`
    /// branch runs first, then `otherwise`.
    pub(super) fn enter_if(
        &mut self,
        cond: ValueId,
        (then, otherwise): (&'p [Stmt], &'p [Stmt]),
        frames: &mut Vec<ListFrame<'p>>,
    ) -> Result<Step<'p>, Fault> {
        let active = self.enter_statement(frames);
        let (yes, no) = self.split(cond, &active)?;
        let shadowed = self.shadowed.len();
        if !yes.is_empty() && !then.is_empty() {
            let exit = Exit::Otherwise {
                stmts: otherwise,
                threads: no,
            };
            frames.push(ListFrame::new(then, yes, shadowed, exit));
        } else if !no.is_empty() && !otherwise.is_empty() {
            frames.push(ListFrame::new(otherwise, no, shadowed, Exit::Done));
        }
        Ok(Step::Ran)
    }

    /// Ends a statement list: undoes its `let`s, then leaves its block, runs its loop's next
    /// iteration or its `if`'s other branch.
    pub(super) fn end_list(&mut self, frame: ListFrame<'p>, frames: &mut Vec<ListFrame<'p>>) {
        self.restore_shadowed(frame.shadowed);
        let shadowed = self.shadowed.len();
        match frame.exit {
            Exit::Done => {}
            Exit::Block => {
                self.sites.pop();
            }
            Exit::Loop {
                slot,
                next,
                extent,
                outer,
            } => {
                let Some(binding) = self.env.vars.get_mut(slot) else {
                    return;
                };
                if next < extent {
                    *binding = Binding::Uniform(next);
                    let exit = Exit::Loop {
                        slot,
                        next: next + 1,
                        extent,
                        outer,
                    };
                    frames.push(ListFrame::new(frame.stmts, frame.active, shadowed, exit));
                } else {
                    *binding = outer;
                }
            }
            Exit::Otherwise { stmts, threads } => {
                if !threads.is_empty() && !stmts.is_empty() {
                    frames.push(ListFrame::new(stmts, threads, shadowed, Exit::Done));
                }
            }
        }
    }

    /// The deadlock of the tasks blocked on `blocked`, charged to the first of them.
    fn deadlock(&self, blocked: Vec<Blocked<'p>>) -> Fault {
        let first = blocked.first();
        let (thread, site) = (first.map(|b| b.thread), first.and_then(|b| b.site));
        let waits = blocked.into_iter().map(|b| b.wait).collect();
        Box::new(EmulatorError {
            kind: ErrorKind::MbarrierDeadlock { waits },
            origin: site.and_then(|(origin, _)| origin),
            label: site.map(|(_, label)| label.to_owned()),
            block: Some(self.block),
            thread,
        })
    }

    /// `setmaxnreg`: executed by whole warpgroups, with a count PTX accepts; it changes nothing
    /// the emulator models.
    pub(super) fn exec_set_max_registers(
        &mut self,
        count: u32,
        active: &[u32],
    ) -> Result<(), Fault> {
        if !(24..=256).contains(&count) || !count.is_multiple_of(8) {
            let message = format!("setmaxnreg {count} (a multiple of 8 from 24 to 256)");
            return Err(self.malformed_fault(&message));
        }
        self.whole_warpgroups(active, "setmaxnreg (a warpgroup of 128 threads)")?;
        Ok(())
    }
}
