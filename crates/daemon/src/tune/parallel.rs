//! Measuring `tilec tune`'s candidates on several GPUs at once, and ranking what they measured.
//!
//! One worker thread per GPU: it prepares the GPU (uploads the inputs), measures the baseline
//! first (the current configuration, on its own GPU), then takes candidates from a shared queue
//! until none is left, so a faster GPU or a quicker candidate simply takes the next one. Each
//! candidate is measured once, on one GPU, and compared only with the baseline measured on that
//! same GPU: two GPUs of one model still differ by a few percent (clocks, temperature), which is
//! as much as the candidates near the top differ by. Results go to the calling thread as they
//! finish, which prints them.
//!
//! Nothing here knows CUDA: the GPUs, the preparation and the measurement are parameters, so the
//! scheduling and the ranking are tested with closures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use anyhow::Result;

/// One candidate measured on one GPU.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Measurement {
    /// The candidate's index in the list the workers were given.
    pub candidate: usize,
    /// The GPU's index in the list the workers were given (not its ordinal).
    pub gpu: usize,
    /// The median time in seconds, or why the candidate is not one (a wrong result, a failed
    /// launch).
    pub seconds: Result<f64, String>,
    /// The baseline's time on the same GPU, when it was measured there; for the baseline itself,
    /// its own time.
    pub baseline_seconds: Option<f64>,
}

impl Measurement {
    /// How many times faster than the baseline on the same GPU (above 1: faster).
    pub(crate) fn speedup(&self) -> Option<f64> {
        let seconds = *self.seconds.as_ref().ok()?;
        Some(self.baseline_seconds? / seconds.max(1e-12))
    }
}

/// What a worker reports as it goes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Event {
    /// The GPU could not be prepared (its inputs did not upload): it measures nothing.
    Unusable {
        gpu: usize,
        why: String,
    },
    Measured(Measurement),
}

/// What to measure: `candidates` candidates, numbered from 0, of which `baseline` (when there is
/// one) is measured on every GPU before the others, and the others once each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub candidates: usize,
    pub baseline: Option<usize>,
}

/// Measures `plan` on `gpus`, one worker thread each: `prepare` runs once per GPU on its worker (what
/// it returns may borrow the GPU), `measure` once per candidate (and the baseline once per GPU). `report` sees every event on
/// the calling thread as it arrives; an error from it (output closed) stops the workers after the
/// candidate each is measuring, and is returned. Returns every measurement, in arrival order.
pub(crate) fn measure_on_gpus<'g, G, S>(
    gpus: &'g [G],
    plan: Plan,
    prepare: impl Fn(&'g G) -> Result<S> + Sync,
    measure: impl Fn(&'g G, &mut S, usize) -> Result<f64> + Sync,
    mut report: impl FnMut(&Event) -> Result<()>,
) -> Result<Vec<Measurement>>
where
    G: Sync,
{
    let queue = AtomicUsize::new(0);
    let (sender, receiver) = mpsc::channel::<Event>();
    let mut measurements = Vec::new();
    let mut failure = None;
    std::thread::scope(|scope| {
        for (index, gpu) in gpus.iter().enumerate() {
            let sender = sender.clone();
            let (queue, prepare, measure) = (&queue, &prepare, &measure);
            scope.spawn(move || {
                let worker = Worker {
                    index,
                    plan,
                    queue,
                    sender,
                };
                worker.run(gpu, prepare, measure);
            });
        }
        // The workers hold the other senders: the loop ends when the last worker is done.
        drop(sender);
        for event in receiver {
            if failure.is_none()
                && let Err(error) = report(&event)
            {
                failure = Some(error);
                // Every worker's next take finds the queue empty.
                queue.store(plan.candidates, Ordering::Relaxed);
            }
            if let Event::Measured(measurement) = event {
                measurements.push(measurement);
            }
        }
    });
    match failure {
        Some(error) => Err(error),
        None => Ok(measurements),
    }
}

/// One GPU's share of the work.
struct Worker<'q> {
    index: usize,
    plan: Plan,
    /// The next candidate to take; shared by every worker.
    queue: &'q AtomicUsize,
    sender: mpsc::Sender<Event>,
}

impl Worker<'_> {
    fn run<'g, G, S>(
        &self,
        gpu: &'g G,
        prepare: &impl Fn(&'g G) -> Result<S>,
        measure: &impl Fn(&'g G, &mut S, usize) -> Result<f64>,
    ) {
        let mut state = match prepare(gpu) {
            Ok(state) => state,
            Err(why) => {
                self.send(Event::Unusable {
                    gpu: self.index,
                    why: format!("{why:#}"),
                });
                return;
            }
        };
        let mut baseline_seconds = None;
        if let Some(baseline) = self.plan.baseline {
            let seconds = measure(gpu, &mut state, baseline);
            baseline_seconds = seconds.as_ref().ok().copied();
            self.send_measurement(baseline, seconds, baseline_seconds);
        }
        loop {
            let candidate = self.queue.fetch_add(1, Ordering::Relaxed);
            if candidate >= self.plan.candidates {
                return;
            }
            if Some(candidate) != self.plan.baseline {
                let seconds = measure(gpu, &mut state, candidate);
                self.send_measurement(candidate, seconds, baseline_seconds);
            }
        }
    }

    fn send_measurement(
        &self,
        candidate: usize,
        seconds: Result<f64>,
        baseline_seconds: Option<f64>,
    ) {
        self.send(Event::Measured(Measurement {
            candidate,
            gpu: self.index,
            seconds: seconds.map_err(|why| format!("{why:#}")),
            baseline_seconds,
        }));
    }

    /// Sends an event; the receiver outlives every worker (the scope joins them first), so a
    /// failed send cannot happen and there is nothing to do about one.
    fn send(&self, event: Event) {
        let _ = self.sender.send(event);
    }
}

/// The correct measurements from best to worst, and those left out of the ranking.
///
/// A candidate is ranked by its speedup over the baseline on its own GPU. A candidate measured on
/// a GPU that has no baseline time (the baseline failed there, or there is no baseline) has no
/// speedup: such candidates are ranked by their times, and only when no candidate has a speedup,
/// since a time on one GPU and a ratio on another do not compare; otherwise they are left out.
/// Ties go to the lower candidate index, so the ranking does not depend on which GPU finished
/// first.
pub(crate) fn rank(measurements: &[Measurement]) -> (Vec<&Measurement>, Vec<&Measurement>) {
    let correct = measurements.iter().filter(|m| m.seconds.is_ok());
    let (mut ranked, unranked): (Vec<&Measurement>, Vec<&Measurement>) =
        if measurements.iter().any(|m| m.speedup().is_some()) {
            correct.partition(|m| m.speedup().is_some())
        } else {
            (correct.collect(), Vec::new())
        };
    ranked.sort_by(|a, b| {
        let by_speedup = match (a.speedup(), b.speedup()) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            _ => std::cmp::Ordering::Equal,
        };
        let seconds = |m: &Measurement| m.seconds.as_ref().map_or(f64::INFINITY, |s| *s);
        by_speedup
            .then(seconds(a).total_cmp(&seconds(b)))
            .then(a.candidate.cmp(&b.candidate))
    });
    (ranked, unranked)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use anyhow::bail;

    use super::*;

    /// Two GPUs, GPU 1 twice as fast as GPU 0, measuring 20 candidates whose time on GPU 0 is
    /// `1 + candidate / 100` seconds, with candidate 0 as the baseline. Each GPU holds its first
    /// candidate until the other has taken one too (or a few seconds have passed), so that both
    /// take candidates from the queue however the threads are scheduled.
    fn two_gpus_twenty_candidates() -> (Vec<Measurement>, Vec<Event>, Vec<Vec<usize>>) {
        let gpus = [1.0, 0.5];
        let order: Vec<Mutex<Vec<usize>>> = gpus.iter().map(|_| Mutex::new(Vec::new())).collect();
        let holding = AtomicUsize::new(0);
        let mut events = Vec::new();
        let measurements = measure_on_gpus(
            &gpus,
            Plan {
                candidates: 20,
                baseline: Some(0),
            },
            |_| Ok(()),
            |&scale, (), candidate| {
                let gpu = usize::from(scale < 1.0);
                let mut taken = order[gpu].lock().expect("no worker panics");
                taken.push(candidate);
                let first = taken.len() == 2;
                drop(taken);
                if first {
                    holding.fetch_add(1, Ordering::Relaxed);
                    let waited = Instant::now();
                    while holding.load(Ordering::Relaxed) < 2
                        && waited.elapsed() < Duration::from_secs(10)
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                Ok(scale * (1.0 + candidate as f64 / 100.0))
            },
            |event| {
                events.push(event.clone());
                Ok(())
            },
        )
        .expect("nothing fails");
        let order = order
            .into_iter()
            .map(|o| o.into_inner().expect("no worker panicked"))
            .collect();
        (measurements, events, order)
    }

    #[test]
    fn every_candidate_is_measured_once_and_the_baseline_once_per_gpu_first() {
        let (measurements, events, order) = two_gpus_twenty_candidates();
        assert_eq!(events.len(), measurements.len());
        let mut times: BTreeMap<usize, usize> = BTreeMap::new();
        for m in &measurements {
            *times.entry(m.candidate).or_default() += 1;
        }
        assert_eq!(times.get(&0), Some(&2), "the baseline, once per GPU");
        assert!((1..20).all(|c| times.get(&c) == Some(&1)), "{times:?}");
        assert_eq!(times.len(), 20);
        for gpu_order in &order {
            assert_eq!(gpu_order.first(), Some(&0), "{order:?}");
            assert!(gpu_order.len() > 1, "each GPU takes candidates: {order:?}");
        }
    }

    #[test]
    fn speedups_use_the_baseline_of_the_same_gpu() {
        let (measurements, _, _) = two_gpus_twenty_candidates();
        for m in &measurements {
            let scale = if m.gpu == 0 { 1.0 } else { 0.5 };
            assert_eq!(m.baseline_seconds, Some(scale));
            let expected = 1.0 / (1.0 + m.candidate as f64 / 100.0);
            let speedup = m.speedup().expect("every GPU has its baseline");
            assert!((speedup - expected).abs() < 1e-9, "{m:?}");
        }
        // GPU 1 is twice as fast, but the ranking compares ratios: the baseline is the best.
        let (ranked, unranked) = rank(&measurements);
        assert!(unranked.is_empty());
        assert_eq!(ranked.first().map(|m| m.candidate), Some(0));
        let candidates: Vec<usize> = ranked.iter().map(|m| m.candidate).collect();
        let mut sorted = candidates.clone();
        sorted.sort_unstable();
        assert_eq!(candidates, sorted, "ranked by speedup, the baseline twice");
    }

    #[test]
    fn a_failed_candidate_is_reported_and_the_others_go_on() {
        let measurements = measure_on_gpus(
            &[0, 1],
            Plan {
                candidates: 6,
                baseline: Some(0),
            },
            |_| Ok(()),
            |_, (), candidate| {
                if candidate == 3 {
                    bail!("WRONG RESULT (`C`: differs)");
                }
                Ok(2.0 - candidate as f64 / 10.0)
            },
            |_| Ok(()),
        )
        .expect("a failed candidate is not fatal");
        let failed: Vec<&Measurement> =
            measurements.iter().filter(|m| m.seconds.is_err()).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].candidate, 3);
        assert_eq!(
            failed[0].seconds,
            Err("WRONG RESULT (`C`: differs)".to_owned())
        );
        let (ranked, _) = rank(&measurements);
        assert_eq!(ranked.first().map(|m| m.candidate), Some(5));
        assert!(ranked.iter().all(|m| m.candidate != 3));
    }

    #[test]
    fn a_gpu_that_cannot_be_prepared_leaves_its_share_to_the_others() {
        let mut unusable = Vec::new();
        let measurements = measure_on_gpus(
            &[0, 1],
            Plan {
                candidates: 5,
                baseline: Some(0),
            },
            |&gpu| {
                if gpu == 1 {
                    bail!("out of memory");
                }
                Ok(())
            },
            |_, (), candidate| Ok(1.0 + candidate as f64),
            |event| {
                if let Event::Unusable { gpu, why } = event {
                    unusable.push((*gpu, why.clone()));
                }
                Ok(())
            },
        )
        .expect("one GPU is enough");
        assert_eq!(unusable, vec![(1, "out of memory".to_owned())]);
        assert_eq!(measurements.len(), 5);
        assert!(measurements.iter().all(|m| m.gpu == 0));
    }

    #[test]
    fn without_a_baseline_time_candidates_are_ranked_by_time() {
        let measurements = measure_on_gpus(
            &[0],
            Plan {
                candidates: 4,
                baseline: Some(0),
            },
            |_| Ok(()),
            |_, (), candidate| match candidate {
                0 => bail!("WRONG RESULT"),
                c => Ok(1.0 / c as f64),
            },
            |_| Ok(()),
        )
        .expect("runs");
        assert!(measurements.iter().all(|m| m.speedup().is_none()));
        let (ranked, unranked) = rank(&measurements);
        assert!(unranked.is_empty());
        let order: Vec<usize> = ranked.iter().map(|m| m.candidate).collect();
        assert_eq!(order, vec![3, 2, 1]);
    }

    #[test]
    fn a_gpu_without_a_baseline_time_is_left_out_when_another_has_one() {
        let measurement = |candidate, gpu, seconds, baseline_seconds| Measurement {
            candidate,
            gpu,
            seconds: Ok(seconds),
            baseline_seconds,
        };
        let measurements = vec![
            measurement(0, 0, 1.0, Some(1.0)),
            measurement(1, 0, 0.9, Some(1.0)),
            // Faster in time, but on a GPU whose baseline failed: not comparable.
            measurement(2, 1, 0.1, None),
        ];
        let (ranked, unranked) = rank(&measurements);
        let order: Vec<usize> = ranked.iter().map(|m| m.candidate).collect();
        assert_eq!(order, vec![1, 0]);
        assert_eq!(unranked.len(), 1);
        assert_eq!(unranked[0].candidate, 2);
    }

    #[test]
    fn a_report_error_stops_the_workers_and_is_returned() {
        let measured = AtomicUsize::new(0);
        let result = measure_on_gpus(
            &[0, 1],
            Plan {
                candidates: 1000,
                baseline: None,
            },
            |_| Ok(()),
            |_, (), _| {
                measured.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                Ok(1.0)
            },
            |_| bail!("broken pipe"),
        );
        assert_eq!(
            result.expect_err("the report failed").to_string(),
            "broken pipe"
        );
        let measured = measured.load(Ordering::Relaxed);
        assert!(
            measured < 1000,
            "{measured} candidates measured after the error"
        );
    }

    #[test]
    fn ties_go_to_the_lower_candidate_whichever_gpu_measured_it() {
        let measurement = |candidate, gpu| Measurement {
            candidate,
            gpu,
            seconds: Ok(0.5),
            baseline_seconds: Some(1.0),
        };
        let one = [measurement(4, 1), measurement(2, 0)];
        let other = [measurement(2, 1), measurement(4, 0)];
        assert_eq!(rank(&one).0[0].candidate, 2);
        assert_eq!(rank(&other).0[0].candidate, 2);
    }
}
