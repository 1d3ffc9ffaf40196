//! Per-thread random numbers: curand's Philox4x32-10 generator, as `T.rng_init` / `T.rng_rand`
//! use it, so that an emulator run draws exactly the numbers the GPU does.
//!
//! The generator is the counter-based Philox4x32 of Salmon et al. (SC'11) with ten rounds: a
//! 128-bit counter and a 64-bit key (the seed) give four 32-bit words per counter value. curand
//! starts the counter at `subsequence × 2^64` (its upper 64 bits) plus `offset / 4`, skips
//! `offset % 4` words of the first block, and hands out the words of each block in order before
//! incrementing the counter. The printed CUDA (`prelude_random.cuh` in `tilec-passes`) runs the
//! same steps, and the tests below check the rounds against Random123's published known answers.

use tilec_ir::data::RandomKind;
use tilec_ir::thread::ValueId;

use super::error::{ErrorKind, Fault};
use super::exec::Machine;

/// The multipliers and key increments of Philox4x32.
const MULTIPLIERS: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];
const KEY_STEPS: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];

/// Philox4x32-10 of one counter value under one key.
// Splitting a 64-bit product into its 32-bit halves truncates, on purpose.
#[allow(clippy::cast_possible_truncation)]
pub(super) fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for round in 0..10 {
        if round > 0 {
            k0 = k0.wrapping_add(KEY_STEPS[0]);
            k1 = k1.wrapping_add(KEY_STEPS[1]);
        }
        let product0 = u64::from(MULTIPLIERS[0]) * u64::from(c0);
        let product1 = u64::from(MULTIPLIERS[1]) * u64::from(c2);
        let (hi0, lo0) = ((product0 >> 32) as u32, product0 as u32);
        let (hi1, lo1) = ((product1 >> 32) as u32, product1 as u32);
        (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0);
    }
    [c0, c1, c2, c3]
}

/// One thread's generator: curand's `curandStatePhilox4_32_10_t` without the Box-Muller cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Philox {
    counter: [u32; 4],
    key: [u32; 2],
    output: [u32; 4],
    next: usize,
}

impl Philox {
    /// `curand_init(seed, subsequence, offset, &state)`.
    // Splitting 64-bit words into their 32-bit halves truncates, on purpose.
    #[allow(clippy::cast_possible_truncation)]
    pub(super) fn new(seed: u64, subsequence: u64, offset: u64) -> Philox {
        let mut state = Philox {
            counter: [0, 0, subsequence as u32, (subsequence >> 32) as u32],
            key: [seed as u32, (seed >> 32) as u32],
            output: [0; 4],
            next: (offset & 3) as usize,
        };
        state.skip(offset / 4);
        state.output = philox4x32_10(state.counter, state.key);
        state
    }

    /// Adds `n` to the counter's lower 64 bits, carrying upward exactly as curand's
    /// `Philox_State_Incr` does (including its treatment of a carry out of the high word).
    // Splitting `n` into its 32-bit halves truncates, on purpose.
    #[allow(clippy::cast_possible_truncation)]
    fn skip(&mut self, n: u64) {
        let lo = n as u32;
        let mut hi = (n >> 32) as u32;
        self.counter[0] = self.counter[0].wrapping_add(lo);
        if self.counter[0] < lo {
            hi = hi.wrapping_add(1);
        }
        self.counter[1] = self.counter[1].wrapping_add(hi);
        if hi <= self.counter[1] {
            return;
        }
        self.counter[2] = self.counter[2].wrapping_add(1);
        if self.counter[2] != 0 {
            return;
        }
        self.counter[3] = self.counter[3].wrapping_add(1);
    }

    /// `curand(&state)`: the next 32-bit word.
    pub(super) fn next_u32(&mut self) -> u32 {
        let value = self.output[self.next];
        self.next += 1;
        if self.next == 4 {
            self.skip(1);
            self.output = philox4x32_10(self.counter, self.key);
            self.next = 0;
        }
        value
    }

    /// `curand_uniform(&state)`: one word scaled into (0, 1] in single precision.
    pub(super) fn next_uniform(&mut self) -> f32 {
        let word = self.next_u32() as f32;
        word * 2.328_306_4e-10_f32 + 1.164_153_2e-10_f32
    }

    /// The next number of `kind`, as the `f64` the emulator carries values in.
    pub(super) fn draw(&mut self, kind: RandomKind) -> f64 {
        match kind {
            RandomKind::Bits => f64::from(self.next_u32()),
            RandomKind::Uniform => f64::from(self.next_uniform()),
        }
    }
}

impl Machine<'_, '_> {
    /// `curand_init` in each thread of `active`, with its own seed, subsequence and offset.
    pub(super) fn exec_rng_init(
        &mut self,
        [seed, subsequence, offset]: [ValueId; 3],
        active: &[u32],
    ) -> Result<(), Fault> {
        let mut columns = Vec::new();
        for operand in [seed, subsequence, offset] {
            let column = self.eval_all(operand, active)?;
            // An operand is a whole number; a negative one becomes its two's complement, as
            // curand's C interface converts a `long long` to `unsigned long long`.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let values: Vec<u64> = self
                .frame
                .column(column)
                .iter()
                .map(|&v| v as i128 as u64)
                .collect();
            columns.push(values);
        }
        for (lane, &thread) in active.iter().enumerate() {
            let operand = |k: usize| columns[k].get(lane).copied().unwrap_or(0);
            if let Some(slot) = self.generators.get_mut(thread as usize) {
                *slot = Some(Philox::new(operand(0), operand(1), operand(2)));
            }
        }
        Ok(())
    }

    /// The next number of each thread's generator, for the threads `threads` in order.
    pub(super) fn draw_random(
        &mut self,
        kind: RandomKind,
        threads: &[u32],
    ) -> Result<Vec<f64>, Fault> {
        let mut out = Vec::with_capacity(threads.len());
        for &thread in threads {
            match self
                .generators
                .get_mut(thread as usize)
                .and_then(Option::as_mut)
            {
                Some(generator) => out.push(generator.draw(kind)),
                None => {
                    let kind = ErrorKind::RandomUninitialised { draw: kind.name() };
                    return Err(self.fault(kind, Some(thread)));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known-answer vectors for Philox4x32-10 (its `kat_vectors` file): zeros, all
    /// ones, and the digits of pi.
    #[test]
    fn rounds_match_the_published_known_answers() {
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    /// curand's stream: the words of counter 0, 1, 2, ... in order; an offset skips words, a
    /// subsequence moves the counter's upper half, the seed is the key.
    #[test]
    fn stream_follows_curands_counter_walk() {
        let mut zero = Philox::new(0, 0, 0);
        let first: Vec<u32> = (0..8).map(|_| zero.next_u32()).collect();
        let block0 = philox4x32_10([0, 0, 0, 0], [0, 0]);
        let block1 = philox4x32_10([1, 0, 0, 0], [0, 0]);
        assert_eq!(first[..4], block0);
        assert_eq!(first[4..], block1);
        // Offset 6: the third word of counter 1, then counter 2.
        let mut skipped = Philox::new(42, 0, 6);
        let key = [42, 0];
        assert_eq!(skipped.next_u32(), philox4x32_10([1, 0, 0, 0], key)[2]);
        assert_eq!(skipped.next_u32(), philox4x32_10([1, 0, 0, 0], key)[3]);
        assert_eq!(skipped.next_u32(), philox4x32_10([2, 0, 0, 0], key)[0]);
        // Subsequence 5 and a 64-bit seed.
        let seed = 0x1234_5678_9abc_def0_u64;
        let mut sequence = Philox::new(seed, 5, 0);
        let expected = philox4x32_10([0, 0, 5, 0], [0x9abc_def0, 0x1234_5678]);
        assert_eq!(sequence.next_u32(), expected[0]);
        // A carry out of the counter's lowest word.
        let mut carry = Philox::new(7, 0, (u64::from(u32::MAX)) * 4);
        let words: Vec<u32> = (0..5).map(|_| carry.next_u32()).collect();
        assert_eq!(words[..4], philox4x32_10([u32::MAX, 0, 0, 0], [7, 0]));
        assert_eq!(words[4], philox4x32_10([0, 1, 0, 0], [7, 0])[0]);
    }

    /// `curand_uniform` maps a word `w` to `w · 2^-32 + 2^-33` in single precision: never 0,
    /// and 1 for the largest words (which round up).
    #[test]
    fn uniform_floats_scale_words_into_the_unit_interval() {
        let mut generator = Philox::new(0, 0, 0);
        let word = philox4x32_10([0, 0, 0, 0], [0, 0])[0];
        let expected = (word as f32) * 2f32.powi(-32) + 2f32.powi(-33);
        assert_eq!(generator.next_uniform(), expected);
        assert_eq!(0.0f32 * 2f32.powi(-32) + 2f32.powi(-33), 2f32.powi(-33));
        assert_eq!(2.328_306_4e-10_f32, 2f32.powi(-32));
        assert_eq!(1.164_153_2e-10_f32, 2f32.powi(-33));
    }
}
