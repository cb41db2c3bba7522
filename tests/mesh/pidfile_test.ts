import assert from "node:assert/strict";
import {
  isSameProcess,
  processStartTime,
  readPidFile,
  stopRecorded,
  writePidFile,
} from "../../lib/mesh/pidfile.ts";
import { isCotalError } from "../../lib/errors.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";
import { brokerNotRunning } from "../../lib/mesh/stack.ts";

Deno.test("mesh - a pid file pins the process start time and is written 0600", async () => {
  const dir = await tempDir();
  const child = new Deno.Command("sleep", { args: ["30"] }).spawn();
  try {
    const rec = await writePidFile(`${dir}/x.pid`, child.pid, "sleeper");
    assert.equal((await Deno.stat(`${dir}/x.pid`)).mode! & 0o777, 0o600);
    assert.deepEqual(await readPidFile(`${dir}/x.pid`), rec);
    assert.equal(rec.startTime, processStartTime(child.pid));
    assert.ok(isSameProcess(rec));
    assert.equal(await stopRecorded(rec, 2_000), "stopped");
    await child.status;
    assert.equal(isSameProcess(rec), false);
  } finally {
    try {
      child.kill();
    } catch { /* already gone */ }
    await child.status;
    await removeTempDir(dir);
  }
});

Deno.test("mesh - a reused pid (other start time) is never signalled", async () => {
  const child = new Deno.Command("sleep", { args: ["30"] }).spawn();
  try {
    const real = processStartTime(child.pid)!;
    const forged = { pid: child.pid, startTime: real + 1, name: "old", startedAt: "" };
    assert.equal(isSameProcess(forged), false);
    assert.equal(await stopRecorded(forged, 500), "not-running");
    // The live process with that pid was left alone.
    assert.equal(processStartTime(child.pid), real);
  } finally {
    child.kill();
    await child.status;
  }
});

Deno.test("mesh - a corrupt pid file is refused with a sentence, an absent one is undefined", async () => {
  const dir = await tempDir();
  try {
    assert.equal(await readPidFile(`${dir}/none.pid`), undefined);
    await Deno.writeTextFile(`${dir}/bad.pid`, "12 garbage");
    await assert.rejects(readPidFile(`${dir}/bad.pid`), (e) => isCotalError(e, "pid_file_corrupt"));
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("mesh - a command that finds the broker down says to wait while a watchdog restarts it, and to run up otherwise", async () => {
  const root = await tempDir("cotal-down-");
  try {
    await Deno.mkdir(`${root}/run`, { recursive: true });
    const plain = await brokerNotRunning(root);
    assert.equal(plain.code, "broker_not_running");
    assert.match(plain.message, /is not running; start it with '.*up --root /);
    // A live watchdog of the root (this process stands in for it): fault pass 9 was told to run
    // `up` in the second its watchdog was restarting the broker.
    await writePidFile(`${root}/run/watchdog.pid`, Deno.pid, "cotal-watchdog");
    const healing = await brokerNotRunning(root);
    assert.equal(healing.code, "broker_not_running");
    assert.match(healing.message, /its watchdog is restarting it; try again in a few seconds/);
  } finally {
    await removeTempDir(root);
  }
});
