/**
 * Agents come back: under `cotal up --detach`, kill -9 of the supervisor with five agents
 * running is followed (through the watchdog) by the same five, same lifecycles, none twice;
 * `down --keep-agents` and `up` bring them back; a plain `down` despawns them and says so.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { isSameProcess, readPidFile } from "../../lib/mesh/pidfile.ts";
import { componentFiles } from "../../lib/mesh/stack.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";

Deno.test("mesh - five agents come back after kill -9 of their supervisor, and down says what it did to them", async () => {
  const root = await tempDir("cotal-roster-");
  const run = cotalIn(root);
  const port = `${freePort()}`;
  const names = ["a1", "a2", "a3", "a4", "a5"];
  const ps = async () => JSON.parse((await run("ps", "--json")).stdout).agents as AgentRow[];
  const allBack = async (uids: Map<string, string>) => {
    const rows = await ps().catch(() => [] as AgentRow[]);
    return rows.length === names.length &&
      rows.every((r) => r.status === "running" && r.present && uids.get(r.name) === r.lifecycleUid);
  };
  try {
    await run("up", "--detach", "--port", port);
    const uids = new Map<string, string>();
    for (const name of names) {
      const row = JSON.parse(
        (await run("spawn", "--name", name, "--json", "--", "/bin/cat")).stdout,
      );
      uids.set(name, row.lifecycleUid);
    }
    // The uid each runs as (a root supervisor gives each its own).
    const runAs = new Map((await ps()).map((r) => [r.name, r.sandbox?.uid]));

    const id = `supervise.${spaceKeyHex("default")}`;
    const sup = (await readPidFile(componentFiles(root, id).pidFile))!;
    Deno.kill(sup.pid, "SIGKILL");
    await waitFor(() => allBack(uids), {
      timeoutMs: 60_000,
      what: "the five agents back, same lifecycles, present",
    });
    const now = (await readPidFile(componentFiles(root, id).pidFile))!;
    assert.notEqual(now.pid, sup.pid);
    assert.ok(isSameProcess(now));
    // None twice: one runner per agent.
    const rows = await ps();
    // The table's columns line up under their headers.
    const table = (await run("ps")).stdout.split("\n").filter(Boolean);
    const at = table[0].indexOf("PID");
    for (const line of table.slice(1)) assert.match(line.slice(at), /^\d+ /, line);
    assert.deepEqual(rows.map((r) => r.name).sort(), names);
    assert.equal(new Set(rows.map((r) => r.pid)).size, names.length);
    // Each back as the uid it had: what it wrote in its workdir stays its own (fault pass 8:
    // a new uid could not append to its files, and the agent was retired).
    for (const r of rows) assert.equal(r.sandbox?.uid, runAs.get(r.name), r.name);

    // down --keep-agents, then up: the same five, same lifecycles.
    const kept = await run("down", "--keep-agents");
    assert.match(
      kept.stdout,
      /agents\.default: kept a1, a2, a3, a4, a5 \(the next up brings them back\)/,
    );
    const again = await run("up", "--detach", "--port", port);
    // up waits for the bring-back and says what came back.
    assert.match(again.stdout, /^agents: {2}brought back a\d, a\d, a\d, a\d, a\d \(default\)$/m);
    await waitFor(() => allBack(uids), { timeoutMs: 60_000, what: "the five back after up" });

    // A plain down despawns them, and the next up starts with none.
    const down = await run("down");
    assert.match(down.stdout, /agents\.default: despawned a1, a2, a3, a4, a5/);
    await run("up", "--detach", "--port", port);
    assert.deepEqual(await ps(), []);
  } finally {
    await cotalQuietly(root, "down");
    await removeTempDir(root);
  }
});

Deno.test("mesh - two spaces of one root each with an upper_1: despawning one leaves the other, and both come back after down --keep-agents", async () => {
  const root = await tempDir("cotal-twospaces-");
  const run = cotalIn(root);
  const ps = async (space: string) =>
    (JSON.parse((await run("ps", "--space", space, "--json")).stdout).agents as AgentRow[])
      .map((r) => `${r.name}:${r.status}:${r.present}`);
  try {
    await run("up", "--detach", "--port", `${freePort()}`);
    await run("spawn", "--role", "early", "--", "/bin/cat");
    // A second space's supervisor starts: it used to empty the one socket dir both shared, so
    // the first space's agent could not be restarted (bwrap found no socket to bind).
    await run("space", "add", "demo");
    const rows = async () =>
      JSON.parse((await run("ps", "--space", "default", "--json")).stdout).agents as AgentRow[];
    const early = (await rows()).find((r) => r.name === "early_1")!;
    Deno.kill(early.pid!, "SIGKILL");
    await waitFor(async () => {
      const r = (await rows()).find((x) => x.name === "early_1");
      return r?.status === "running" && r.restarts === 1 && r.present;
    }, { timeoutMs: 60_000, what: "early_1 restarted after its runner was killed" });
    await run("despawn", "early_1");
    await run("spawn", "--role", "upper", "--", "/bin/cat");
    await run("spawn", "--space", "demo", "--role", "upper", "--", "/bin/cat");
    await run("spawn", "--space", "demo", "--role", "other", "--", "/bin/cat");
    // The newcomer's find: one agents/upper_1 dir served both, so this removed default's.
    await run("despawn", "--space", "demo", "upper_1");
    assert.deepEqual(await ps("default"), ["upper_1:running:true"]);
    // An agent whose program is gone by the next up cannot come back: up says so, and why.
    const program = `${root}-gone-cat`;
    await Deno.copyFile("/bin/cat", program);
    await Deno.chmod(program, 0o755);
    await run("spawn", "--space", "demo", "--name", "gone", "--", program);
    await run("down", "--keep-agents");
    await Deno.remove(program);
    const up = await run("up", "--detach");
    assert.match(
      up.stdout,
      /^warning: could not bring back gone in space 'demo' \(.+\); it was removed$/m,
    );
    assert.match(up.stdout, /^agents: {2}brought back other_1 \(demo\)$/m);
    await waitFor(
      async () => (await ps("default").catch(() => [])).join() === "upper_1:running:true",
      {
        timeoutMs: 60_000,
        what: "default's upper_1 back",
      },
    );
    await waitFor(
      async () => (await ps("demo").catch(() => [])).join() === "other_1:running:true",
      {
        timeoutMs: 60_000,
        what: "demo's other_1 back",
      },
    );
  } finally {
    await cotalQuietly(root, "down");
    await removeTempDir(root);
  }
});
