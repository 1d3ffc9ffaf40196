//! The consumer warpgroups' turn-taking (`WarpgroupTurn`): a token passed round the warpgroups on
//! named barriers, which orders their wgmma issue and protects no data.
//!
//! Within a role the emulator runs the threads in lockstep, so every warpgroup executes each step
//! at the same time and a `Take` cannot block for real. What the emulator checks instead is the
//! condition under which the GPU's token ring cannot deadlock: every consumer warpgroup executes
//! every step, together and in the same order, and each warpgroup alternates `Take` and `Pass`
//! between a `Start` and an `End`. Then warpgroup `w`'s `n`-th `Take` is completed by warpgroup
//! `w - 1`'s `n`-th `Pass` (warpgroup 0's first by the `Start`), which that warpgroup reaches
//! after its own `n`-th `Take` only, so by induction on the turns every `Take` completes; and the
//! `End` consumes the last `Pass`, so no barrier phase is left half complete when the block ends.
//! A program that breaks the condition is reported, naming the step and the warpgroup.

use tilec_ir::thread::TurnStep;

use super::error::{ErrorKind, Fault};
use super::exec::Machine;
use super::thread_u32;

const WARPGROUP: u32 = 128;

/// The turn-taking of the running block, from its `Start` to its `End`.
#[derive(Clone, Debug, Default)]
pub(super) struct Turns {
    /// The warpgroups and first barrier of the running turn-taking, if one has started.
    ring: Option<(u32, u32)>,
    /// Whether each warpgroup holds the turn (took it and has not handed it on).
    holding: Vec<bool>,
}

impl Turns {
    pub(super) fn clear(&mut self) {
        *self = Turns::default();
    }
}

impl Machine<'_, '_> {
    /// One step of the turn-taking, executed by `active` threads.
    pub(super) fn exec_warpgroup_turn(
        &mut self,
        step: TurnStep,
        (warpgroups, first_barrier): (u32, u32),
        active: &[u32],
    ) -> Result<(), Fault> {
        if warpgroups < 2 || first_barrier == 0 || first_barrier.saturating_add(warpgroups) > 16 {
            let message = format!(
                "a turn among {warpgroups} warpgroups on named barriers from {first_barrier} (at \
                 least two warpgroups, barriers 1 to 15)"
            );
            return Err(self.malformed_fault(&message));
        }
        let every = (warpgroups * WARPGROUP) as usize;
        let all_consumers = active.len() == every && active.iter().zip(0..).all(|(&t, k)| t == k);
        if !all_consumers {
            let message = format!(
                "{step:?} executed by {} threads, not by all {warpgroups} consumer warpgroups \
                 together: a warpgroup that skips a step leaves the others waiting for a turn",
                active.len()
            );
            return Err(self.turn_fault(message, active.first().copied()));
        }
        let ring = (warpgroups, first_barrier);
        match step {
            TurnStep::Start => self.start_turns(ring),
            TurnStep::Take | TurnStep::Pass => self.take_or_pass(step, ring),
            TurnStep::End => self.end_turns(ring),
        }
    }

    fn start_turns(&mut self, ring: (u32, u32)) -> Result<(), Fault> {
        if self.turns.ring.is_some() {
            let message = "Start while a turn-taking is running: its last turn would be handed \
                           on twice"
                .to_owned();
            return Err(self.turn_fault(message, Some(0)));
        }
        self.turns.ring = Some(ring);
        self.turns.holding = vec![false; ring.0 as usize];
        Ok(())
    }

    fn take_or_pass(&mut self, step: TurnStep, ring: (u32, u32)) -> Result<(), Fault> {
        self.same_ring(step, ring)?;
        let taking = step == TurnStep::Take;
        let wrong = self.turns.holding.iter().position(|&held| held == taking);
        if let Some(group) = wrong {
            let (barrier, why) = if taking {
                let barrier = ring.1 + thread_u32(group);
                let why = "it already holds the turn, and the turn it waits for is handed on only \
                           after its own: a deadlock";
                (barrier, why)
            } else {
                let barrier = ring.1 + (thread_u32(group) + 1) % ring.0;
                let why = "it does not hold the turn, so the next warpgroup would run out of turn";
                (barrier, why)
            };
            let message =
                format!("{step:?} by warpgroup {group} on named barrier {barrier}: {why}");
            return Err(self.turn_fault(message, Some(thread_u32(group) * WARPGROUP)));
        }
        for held in &mut self.turns.holding {
            *held = taking;
        }
        self.report.barriers += 1;
        Ok(())
    }

    fn end_turns(&mut self, ring: (u32, u32)) -> Result<(), Fault> {
        self.same_ring(TurnStep::End, ring)?;
        if let Some(group) = self.turns.holding.iter().position(|&held| held) {
            let message = format!(
                "End while warpgroup {group} holds the turn: the warpgroup after it waits for a \
                 turn nobody hands on"
            );
            return Err(self.turn_fault(message, Some(thread_u32(group) * WARPGROUP)));
        }
        self.turns.clear();
        Ok(())
    }

    /// A `Take`, `Pass` or `End` belongs to the running turn-taking, with its warpgroups and
    /// barriers.
    fn same_ring(&self, step: TurnStep, ring: (u32, u32)) -> Result<(), Fault> {
        match self.turns.ring {
            Some(running) if running == ring => Ok(()),
            Some((warpgroups, first)) => {
                let message = format!(
                    "{step:?} among {} warpgroups from barrier {}, while the running turn-taking \
                     has {warpgroups} from barrier {first}",
                    ring.0, ring.1
                );
                Err(self.turn_fault(message, Some(0)))
            }
            None => {
                let message = format!(
                    "{step:?} with no Start before it: warpgroup 0 would wait for a first turn \
                     nobody hands it"
                );
                Err(self.turn_fault(message, Some(0)))
            }
        }
    }

    /// At the end of a block: a turn-taking that never ended leaves the last turn handed on,
    /// a barrier phase with only the giver's arrivals.
    pub(super) fn finish_turns(&mut self) -> Result<(), Fault> {
        let Some((warpgroups, first)) = self.turns.ring else {
            return Ok(());
        };
        self.turns.clear();
        let message = format!(
            "the block ended with the turn-taking of {warpgroups} warpgroups still running (no \
             End): named barrier {first} is left with a phase half complete"
        );
        Err(self.turn_fault(message, None))
    }

    fn turn_fault(&self, message: String, thread: Option<u32>) -> Fault {
        self.fault(ErrorKind::WarpgroupTurn(message), thread)
    }
}
