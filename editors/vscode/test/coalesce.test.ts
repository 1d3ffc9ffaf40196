// Unit tests for src/coalesce.ts: run-on-save runs at most one job per document at a time and
// always ends with the newest waiting job.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Coalescer } from "../src/coalesce";

/** A promise plus the function that settles it, to control when a job finishes. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

test("an idle key runs its job at once", async () => {
  const queue = new Coalescer<string>();
  const ran: string[] = [];
  await queue.schedule("a", async () => {
    ran.push("a1");
  });
  assert.deepEqual(ran, ["a1"]);
  assert.equal(queue.isRunning("a"), false);
});

test("jobs scheduled while one runs collapse into the newest", async () => {
  const queue = new Coalescer<string>();
  const ran: string[] = [];
  const first = gate();
  const done = queue.schedule("a", async () => {
    ran.push("1");
    await first.promise;
  });
  assert.equal(queue.isRunning("a"), true);
  void queue.schedule("a", async () => {
    ran.push("2");
  });
  void queue.schedule("a", async () => {
    ran.push("3");
  });
  first.open();
  await done;
  assert.deepEqual(ran, ["1", "3"]);
  assert.equal(queue.isRunning("a"), false);
});

test("different keys do not wait for each other", async () => {
  const queue = new Coalescer<string>();
  const ran: string[] = [];
  const slow = gate();
  const a = queue.schedule("a", async () => {
    await slow.promise;
    ran.push("a");
  });
  await queue.schedule("b", async () => {
    ran.push("b");
  });
  assert.deepEqual(ran, ["b"]);
  slow.open();
  await a;
  assert.deepEqual(ran, ["b", "a"]);
});

test("a failing job does not stop the waiting one or wedge the key", async () => {
  const queue = new Coalescer<string>();
  const ran: string[] = [];
  const first = gate();
  const done = queue.schedule("a", async () => {
    await first.promise;
    throw new Error("server error");
  });
  void queue.schedule("a", async () => {
    ran.push("after failure");
  });
  first.open();
  await done;
  assert.deepEqual(ran, ["after failure"]);
  await queue.schedule("a", async () => {
    ran.push("later");
  });
  assert.deepEqual(ran, ["after failure", "later"]);
});
