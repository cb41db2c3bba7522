/**
 * The note an `up --detach` leaves of itself, and the watchdog's resumes of an up that did not
 * finish (`lib/mesh/up_resume.ts`): the count is the watchdog's, so an up that fails or dies
 * before it notes itself still uses a resume, and the resumes stop at the cap; a resumed up that
 * fails keeps its note for the next resume, while an up a human ran removes it. The whole stack,
 * killed and resumed, is in `tests/faults/faultpass12_up_killed_test.ts` and fault pass 13.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { isLockHeld } from "../../lib/mesh/daemon.ts";
import { meshPaths } from "../../lib/mesh/layout.ts";
import {
  noteUp,
  resumeAbandonedUp,
  type ResumeState,
  UP_HUNG_MS,
  UP_RESUME_GAP_MS,
  UP_RESUMES_MAX,
} from "../../lib/mesh/up_resume.ts";
import { processStartTime } from "../../lib/mesh/pidfile.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";

const noteFile = (root: string) => `${meshPaths(root).runDir}/resume/up.json`;
const readNote = async (root: string) => JSON.parse(await Deno.readTextFile(noteFile(root)));
const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

Deno.test("up resume - a failed up a human ran removes its note; a failed resumed up keeps it", async () => {
  const root = await tempDir("cotal-upnote-");
  try {
    await Deno.mkdir(meshPaths(root).runDir, { recursive: true });
    const run = { command: "/bin/false", args: [] };
    const first = await noteUp(root, run, 0);
    assert.equal((await readNote(root)).resumes, 0);
    await first.failed();
    assert.equal(await exists(noteFile(root)), false, "the operator reads the failure");
    const resumed = await noteUp(root, run, 2);
    await resumed.failed();
    assert.equal((await readNote(root)).resumes, 2, "kept for the watchdog's next resume");
    assert.equal(await isLockHeld(`${meshPaths(root).runDir}/resume/up.lock`), false);
    const done = await noteUp(root, run, 2);
    await done.done();
    assert.equal(await exists(noteFile(root)), false);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("up resume - the watchdog counts each resume in the note before it runs, and stops at the cap", async () => {
  const root = await tempDir("cotal-upresume-");
  try {
    await Deno.mkdir(`${meshPaths(root).runDir}/resume`, { recursive: true });
    await Deno.mkdir(meshPaths(root).logDir, { recursive: true });
    // An up that fails before it notes itself: it never rewrites the note.
    await Deno.writeTextFile(
      noteFile(root),
      JSON.stringify({ command: "/bin/sh", args: ["-c", "exit 3"], env: {}, resumes: 0 }),
    );
    const state: ResumeState = { lastAt: 0, gaveUp: false };
    const said: string[] = [];
    let now = Date.now();
    for (let i = 1; i <= UP_RESUMES_MAX; i++) {
      await resumeAbandonedUp(root, state, (l) => said.push(l), now);
      assert.equal((await readNote(root)).resumes, i, said.join("\n"));
      await waitFor(
        async () => !(await isLockHeld(`${meshPaths(root).runDir}/resume/resumed.lock`)),
        { timeoutMs: 10_000, what: "the resumed up ended" },
      );
      // Within the gap nothing runs again.
      await resumeAbandonedUp(root, state, (l) => said.push(l), now + 1);
      assert.equal((await readNote(root)).resumes, i);
      now += UP_RESUME_GAP_MS;
    }
    await resumeAbandonedUp(root, state, (l) => said.push(l), now);
    await resumeAbandonedUp(root, state, (l) => said.push(l), now + UP_RESUME_GAP_MS);
    assert.equal((await readNote(root)).resumes, UP_RESUMES_MAX);
    assert.equal(state.gaveUp, true);
    const gaveUp = said.filter((l) => /not running it again/.test(l));
    assert.equal(gaveUp.length, 1, said.join("\n"));
    assert.match(gaveUp[0], /did not finish 4 times/);
    assert.equal(said.filter((l) => /resumed up runs/.test(l)).length, UP_RESUMES_MAX);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("up resume - a note with a count that is not a whole number is not an up's note", async () => {
  const root = await tempDir("cotal-upresume-");
  try {
    await Deno.mkdir(`${meshPaths(root).runDir}/resume`, { recursive: true });
    await Deno.writeTextFile(
      noteFile(root),
      JSON.stringify({ command: "/bin/true", args: [], env: {}, resumes: -5 }),
    );
    const said: string[] = [];
    await resumeAbandonedUp(root, { lastAt: 0, gaveUp: false }, (l) => said.push(l));
    assert.equal(await exists(noteFile(root)), false);
    assert.match(said.join("\n"), /is not a note of 'cotal up'; removing it/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("up resume - an up that holds its lock but stopped beating is killed, and its note kept for the resume", async () => {
  const root = await tempDir("cotal-uphung-");
  const dir = `${meshPaths(root).runDir}/resume`;
  // A process holding the up's lock, as a frozen up does.
  const holder = new Deno.Command("/usr/bin/flock", {
    args: ["-x", `${dir}/up.lock`, "/bin/sleep", "60"],
    stdout: "null",
    stderr: "null",
  });
  let child: Deno.ChildProcess | undefined;
  try {
    await Deno.mkdir(dir, { recursive: true });
    child = holder.spawn();
    await waitFor(() => isLockHeld(`${dir}/up.lock`), { timeoutMs: 10_000, what: "the lock" });
    const startTime = processStartTime(child.pid)!;
    const note = { command: "/bin/true", args: [], env: {}, resumes: 0 };
    await Deno.writeTextFile(
      noteFile(root),
      JSON.stringify({ ...note, by: { pid: child.pid, startTime } }),
    );
    const now = Date.now();
    await Deno.writeTextFile(`${dir}/up.beat`, `${now - UP_HUNG_MS + 5_000}\n`);
    const said: string[] = [];
    const state: ResumeState = { lastAt: 0, gaveUp: false };
    // Beaten 15 s ago: alive.
    await resumeAbandonedUp(root, state, (l) => said.push(l), now);
    assert.equal(said.length, 0, said.join("\n"));
    // 25 s: hung, killed; the note stays for the next pass's resume.
    await resumeAbandonedUp(root, state, (l) => said.push(l), now + 10_000);
    assert.match(
      said.join("\n"),
      new RegExp(`pid ${child.pid}\\) holds its lock but has not beaten`),
    );
    const status = await child.status;
    assert.equal(status.signal, "SIGKILL");
    assert.equal(await exists(noteFile(root)), true);
  } finally {
    try {
      child?.kill("SIGKILL");
    } catch {
      // Gone.
    }
    await child?.status;
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("up resume - an up that comes while the watchdog checks the up lock is not refused; one that meets a running up is", async () => {
  const root = await tempDir("cotal-upprobe-");
  try {
    await Deno.mkdir(`${meshPaths(root).runDir}/resume`, { recursive: true });
    const run = { command: "/bin/true", args: [] };
    const lockFile = `${meshPaths(root).runDir}/resume/up.lock`;
    await Deno.writeTextFile(lockFile, "");
    // A check like the watchdog's holds the lock for a moment (here 200 ms, to be seen).
    const probe = await Deno.open(lockFile, { read: true });
    assert.equal(await probe.tryLock(true), true);
    const released = new Promise((r) => setTimeout(r, 200)).then(() => probe.close());
    const up = await noteUp(root, run, 0);
    await released;
    await up.done();
    // A running up (the lock held past the wait): refused, saying so.
    const running = await noteUp(root, run, 0);
    await assert.rejects(
      noteUp(root, run, 0),
      (e) => isCotalError(e, "up_running") && /Another 'cotal up'/.test((e as Error).message),
    );
    await running.done();
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
