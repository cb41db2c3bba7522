/**
 * The restart policy: an agent that keeps crashing after it came up is restarted within its
 * limit, then retired with a status that says why, and its footprint is removed.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { processesMentioning, startManagerMesh } from "./_manager_mesh.ts";
import { agentDirOf } from "../../lib/manager/sandbox/isolation.ts";

// Comes up (presence), says why, then crashes with exit code 3.
const CRASHER = `
export async function run(ctx) {
  await ctx.endpoint();
  console.log("cannot reach api.example.test");
  await new Promise((r) => setTimeout(r, 300));
  return 3;
}
`;

Deno.test("manager - a crashing agent is restarted within its limit, then retired", async () => {
  await using mesh = await startManagerMesh("crash");
  await mesh.manager();
  const ctl = await mesh.control();
  const src = `${await tempDir("cotal-crasher-")}/crasher.js`;
  await Deno.writeTextFile(src, CRASHER);
  const row = await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: src,
    name: "crasher",
    restarts: 2,
    windowMs: 60_000,
  }, { timeoutMs: 40_000 });
  assert.equal(row.status, "running");
  const find = async () =>
    (await ctl.request<{ agents: AgentRow[] }>("ps")).agents.find((a) => a.name === "crasher");
  let last: AgentRow | undefined;
  await waitFor(async () => (last = await find())?.status === "retired", {
    timeoutMs: 20_000,
    what: "the crasher retired",
  });
  assert.equal(last!.restarts, 2);
  // What it last printed is kept with the reason (newcomer pass 5: its terminal is gone).
  assert.match(
    last!.reason!,
    /^retired: exited 3 times within 60 s, over its limit of 2 restarts \(last: exit code 3; its last output: (cannot reach api\.example\.test( \| )?)+\)$/,
  );
  assert.equal(last!.pid, undefined);
  // Retired means gone from the mesh: no runner, no creds, no dir.
  const dir = `${agentDirOf(mesh, mesh.space, "crasher")}`;
  await waitFor(async () => !(await Deno.stat(dir).then(() => true, () => false)), {
    what: "the retired agent's dir removed",
  });
  assert.deepEqual(processesMentioning(dir), []);
  const key = `space.${spaceKeyHex(mesh.space)}/agent.crasher.${row.lifecycleUid}.creds`;
  assert.equal(await mesh.store.get(key), undefined);
  // A retired agent keeps its name until it is despawned; then the name is free again.
  await assert.rejects(
    ctl.request("spawn", { agent: "module", module: src, name: "crasher" }),
    // Said as it is: the name is a retired agent's, not a running one's (newcomer pass 12).
    (e) =>
      isCotalError(e, "name_taken") &&
      /running or retired \('cotal ps' shows which\)/.test(e.message),
  );
  await ctl.request("despawn", { name: "crasher" });
  assert.equal(await find(), undefined);
});

Deno.test("manager - an agent that exits before its presence appears fails its spawn", async () => {
  await using mesh = await startManagerMesh("early");
  await mesh.manager();
  const ctl = await mesh.control();
  const src = `${await tempDir("cotal-early-")}/early.js`;
  await Deno.writeTextFile(src, `export function run() { console.log("bye now"); return 7; }\n`);
  await assert.rejects(
    ctl.request("spawn", { agent: "module", module: src, name: "early" }, { timeoutMs: 40_000 }),
    (e) =>
      isCotalError(e, "spawn_failed") &&
      /exited \(exit code 7\) before it appeared in presence; last output: .*bye now/.test(
        e.message,
      ),
  );
  assert.deepEqual((await ctl.request<{ agents: AgentRow[] }>("ps")).agents, []);
  await assert.rejects(Deno.stat(`${agentDirOf(mesh, mesh.space, "early")}`), Deno.errors.NotFound);
});

Deno.test("manager - names and roles that differ only by case are one: the second is refused", async () => {
  await using mesh = await startManagerMesh("case");
  await mesh.manager();
  const ctl = await mesh.control();
  const sleeper = { agent: "program", command: "/bin/sleep", args: ["600"] };
  await ctl.request<AgentRow>("spawn", { ...sleeper, name: "Prog" }, { timeoutMs: 40_000 });
  await assert.rejects(
    ctl.request("spawn", { ...sleeper, name: "prog" }),
    (e) => isCotalError(e, "name_taken") && /differing only by case/.test(e.message),
  );
  const upper = { agent: "task-runner", command: "/bin/cat" };
  await ctl.request<AgentRow>("spawn", { ...upper, role: "Lower" }, { timeoutMs: 40_000 });
  await assert.rejects(
    ctl.request("spawn", { ...upper, role: "lower" }),
    (e) =>
      isCotalError(e, "role_case_clash") &&
      /The role lower differs only by case from the role Lower that Lower_1 serves; use Lower\./
        .test(e.message),
  );
});

Deno.test("manager - a runner its agent froze is killed as hung and restarted (it would sit 'running' forever)", async () => {
  await using mesh = await startManagerMesh("hung");
  await mesh.manager();
  const ctl = await mesh.control();
  // Comes up, then freezes its own runner (its parent in the sandbox) and lives on: the runner
  // answers no ping from then on, and its presence lapses while `ps` would still say running.
  const row = await ctl.request<AgentRow>("spawn", {
    agent: "program",
    command: "/bin/sh",
    args: ["-c", "sleep 2; kill -STOP $PPID; exec sleep 600"],
    name: "freezer",
    restarts: 3,
    windowMs: 600_000,
  }, { timeoutMs: 40_000 });
  assert.equal(row.status, "running");
  const find = async () =>
    (await ctl.request<{ agents: AgentRow[] }>("ps")).agents.find((a) => a.name === "freezer");
  let last: AgentRow | undefined;
  // The hung window (30 s) plus a ping's period and the restart.
  await waitFor(async () => {
    last = await find();
    return (last?.restarts ?? 0) >= 1 && last?.status === "running";
  }, {
    timeoutMs: 60_000,
    what: "the frozen runner killed and restarted",
  });
  assert.match(
    last!.reason!,
    /^restarted after signal SIGKILL: its runner stopped answering \(no reply on its control line for 30 s\)$/,
  );
  assert.notEqual(last!.pid, row.pid);
  await ctl.request("despawn", { name: "freezer" }, { timeoutMs: 20_000 });
});
