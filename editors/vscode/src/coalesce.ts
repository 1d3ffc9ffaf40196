// Serialises run-on-save per document. Saving several times while a kernel is still running
// must not stack up runs (each may take seconds on a GPU) nor skip the last save's code, so
// for each key at most one job runs and at most one waits: a newer waiting job replaces the
// older one. No `vscode` import, so the scheduling is unit-tested.

export class Coalescer<K> {
  private readonly running = new Set<K>();
  private readonly waiting = new Map<K, () => Promise<void>>();

  /** Starts `job` now if nothing runs for `key`, otherwise makes it the one job that runs
   * when the current one finishes (replacing any job already waiting). The promise of a job
   * started now resolves once it and every job that queued behind it have finished; the
   * promise of a queued job resolves at once. Never rejects. */
  schedule(key: K, job: () => Promise<void>): Promise<void> {
    if (this.running.has(key)) {
      this.waiting.set(key, job);
      return Promise.resolve();
    }
    return this.drain(key, job);
  }

  /** Whether a job for `key` is running (for tests and status messages). */
  isRunning(key: K): boolean {
    return this.running.has(key);
  }

  private async drain(key: K, first: () => Promise<void>): Promise<void> {
    this.running.add(key);
    try {
      let job: (() => Promise<void>) | undefined = first;
      while (job) {
        try {
          await job();
        } catch {
          // Jobs report their own errors; one failure must not stop the waiting job.
        }
        job = this.waiting.get(key);
        this.waiting.delete(key);
      }
    } finally {
      this.running.delete(key);
    }
  }
}
