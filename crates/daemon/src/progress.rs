//! The line `tilec run` keeps updated on a terminal while the CPU emulator works through a long
//! launch: blocks done, time so far and time left. Runs shorter than a second show nothing, and
//! nothing is printed where standard error is not a terminal, so logs and pipes stay clean.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use tilec_frontend::thousands;

/// How long a run goes before its progress shows, and how often the line is redrawn.
const FIRST_SHOWN_AFTER: Duration = Duration::from_secs(1);
const REDRAWN_EVERY: Duration = Duration::from_millis(200);

/// The progress line of one emulator run (one launch).
#[derive(Debug)]
pub(crate) struct EmulatorProgress {
    started: Instant,
    drawn: Option<Instant>,
    enabled: bool,
    /// `launch k of n`, when the kernel has several.
    launch: Option<(usize, usize)>,
}

impl EmulatorProgress {
    pub(crate) fn new(launch: Option<(usize, usize)>) -> Self {
        EmulatorProgress {
            started: Instant::now(),
            drawn: None,
            enabled: std::io::stderr().is_terminal(),
            launch,
        }
    }

    /// Called by the emulator after each block.
    pub(crate) fn update(&mut self, done: u64, total: u64) {
        if !self.enabled || done >= total {
            return;
        }
        let now = Instant::now();
        let elapsed = now.duration_since(self.started);
        let due = match self.drawn {
            None => elapsed >= FIRST_SHOWN_AFTER,
            Some(drawn) => now.duration_since(drawn) >= REDRAWN_EVERY,
        };
        if !due {
            return;
        }
        self.drawn = Some(now);
        let mut line = progress_text(done, total, elapsed);
        if let Some((launch, launches)) = self.launch {
            line = format!("launch {launch} of {launches}: {line}");
        }
        let mut stderr = std::io::stderr().lock();
        // `\r` and "erase line" redraw in place; a write error only loses the progress line.
        let _ = write!(stderr, "\r\x1b[2K{line}");
        let _ = stderr.flush();
    }

    /// Erases the line, so that the run's result starts on a clean line.
    pub(crate) fn finish(&mut self) {
        if self.drawn.take().is_some() {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
        }
    }
}

/// `emulating: 1,234 of 3,336 blocks (37 %), 12 s, about 20 s left`.
pub(crate) fn progress_text(done: u64, total: u64, elapsed: Duration) -> String {
    let percent = done.saturating_mul(100) / total.max(1);
    let seconds = elapsed.as_secs_f64();
    let left = if done == 0 {
        String::new()
    } else {
        let remaining = seconds * (total.saturating_sub(done)) as f64 / done as f64;
        format!(", about {} left", duration_text(remaining))
    };
    format!(
        "emulating: {} of {} blocks ({percent} %), {}{left}",
        thousands(done),
        thousands(total),
        duration_text(seconds)
    )
}

fn duration_text(seconds: f64) -> String {
    if seconds < 60.0 {
        format!("{seconds:.0} s")
    } else {
        let minutes = (seconds / 60.0).floor();
        format!("{minutes:.0} min {:.0} s", seconds - minutes * 60.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_blocks_time_and_time_left() {
        assert_eq!(
            progress_text(1234, 3336, Duration::from_secs(12)),
            "emulating: 1,234 of 3,336 blocks (36 %), 12 s, about 20 s left"
        );
        assert_eq!(
            progress_text(10, 1000, Duration::from_secs(3)),
            "emulating: 10 of 1,000 blocks (1 %), 3 s, about 4 min 57 s left"
        );
        assert_eq!(
            progress_text(0, 8, Duration::from_millis(1500)),
            "emulating: 0 of 8 blocks (0 %), 2 s"
        );
    }
}
