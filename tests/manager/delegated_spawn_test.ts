/**
 * An agent that spawns agents, end to end: the real supervisor spawns a claude-code agent (a
 * stand-in harness in Claude Code's place, inside the real sandbox) whose request lists one
 * persona it may start; the harness calls `cotal mcp`'s spawn tools as a model would. It gets
 * the listed persona and nothing else, no more children than the space allows, may despawn
 * only its own, and its children end with it.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { removeTempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "./_agent_fixture.ts";
import { startManagerMesh } from "./_manager_mesh.ts";
import { STAND_IN } from "./_stand_in_harness.ts";

interface Call {
  name: string;
  result?: { isError?: boolean; content: { text: string }[]; structuredContent?: unknown };
  error?: unknown;
}

Deno.test("manager - an agent spawns the persona it may through cotal mcp, and only that, only its own, within the space's bound", async () => {
  await using mesh = await startManagerMesh("delegate");
  const work = await agentWorkdir("cotal-delegate-");
  const standIn = `${work}/claude`;
  await Deno.writeTextFile(standIn, STAND_IN, { mode: 0o755 });
  await Deno.chmod(standIn, 0o755);
  const record = `${work}/record.json`;
  const calls = [
    { name: "spawn", arguments: { persona: "helper" } },
    { name: "spawn", arguments: { persona: "helper" } },
    { name: "spawn", arguments: { persona: "admin" } },
    { name: "spawn", arguments: { persona: "helper", command: "/bin/sh" } },
    { name: "despawn", arguments: { name: "other" } },
    { name: "spawned" },
    { name: "despawn", arguments: { name: "helpers_1" } },
    { name: "spawned" },
    { name: "spawn", arguments: { persona: "helper" } },
  ];
  await Deno.writeTextFile(`${record}.calls.json`, JSON.stringify(calls));
  try {
    const manager = await mesh.manager({ maxChildrenPerAgent: 1 });
    const ctl = await mesh.control();
    await ctl.request("spawn", { agent: "task-runner", name: "other", command: "/bin/cat" }, {
      timeoutMs: 60_000,
    });
    const lead = await ctl.request<AgentRow>("spawn", {
      agent: "claude-code",
      name: "lead",
      command: standIn,
      args: [record],
      workdir: work,
      spawnable: { helper: { agent: "task-runner", command: "/bin/cat", role: "helpers" } },
    }, { timeoutMs: 60_000 });
    assert.equal(lead.present, true);
    await waitFor(() => jsonFileReady(record), {
      timeoutMs: 150_000,
      what: "the stand-in's record of its tool calls",
    });
    const rec = JSON.parse(await Deno.readTextFile(record));
    assert.equal(rec.error, undefined, rec.error);
    for (const t of ["spawn", "despawn", "spawned"]) assert.ok(rec.tools.includes(t), rec.tools);
    // The model is offered exactly the personas it may start.
    assert.deepEqual(rec.schemas.spawn.properties.persona.enum, ["helper"]);
    const got: Call[] = rec.calls;
    const text = (i: number) => got[i].result?.content[0]?.text ?? JSON.stringify(got[i].error);
    const json = (i: number) => JSON.parse(text(i));
    assert.equal(got.length, calls.length);
    // 1: the persona it may spawn starts, online, as its own.
    assert.equal(got[0].result?.isError, undefined, text(0));
    assert.equal(json(0).name, "helpers_1");
    assert.equal(json(0).present, true);
    // 2: no more than the space's bound at once.
    assert.equal(got[1].result?.isError, true);
    assert.match(text(1), /lead runs 1 agents of its own already; despawn one first\./);
    // 3, 4: nothing else, and no field of its own.
    assert.equal(got[2].result?.isError, true);
    assert.match(text(2), /persona must be one of helper\./);
    assert.equal(got[3].result?.isError, true);
    assert.match(text(3), /"command" is not an argument/);
    // 5: an agent it did not spawn is not its to stop.
    assert.equal(got[4].result?.isError, true);
    assert.match(
      text(4),
      /other is not an agent lead spawned; an agent may despawn only its own\./,
    );
    assert.deepEqual(json(5).children.map((c: { name: string }) => c.name), ["helpers_1"]);
    assert.deepEqual(json(6), { name: "helpers_1" });
    assert.deepEqual(json(7).children, []);
    // Its name is free again: a new lifecycle under it.
    assert.equal(json(8).name, "helpers_1");
    assert.notEqual(json(8).id, undefined);

    const names = () => manager.ps().map((r) => r.name).sort();
    assert.deepEqual(names(), ["helpers_1", "lead", "other"]);
    // The operator stops the parent: what it spawned goes with it (and the answer says so),
    // the sibling stays.
    const gone = await ctl.request<{ childrenEnded?: string[] }>("despawn", { name: "lead" }, {
      timeoutMs: 60_000,
    });
    assert.deepEqual(gone.childrenEnded, ["helpers_1"]);
    assert.deepEqual(names(), ["other"]);
  } finally {
    await removeTempDir(work);
  }
});

/** The host side of the one spawn socket a supervisor under `root` has open (its parent's). */
async function parentSocket(root: string): Promise<string | undefined> {
  const dir = `${root}/run/sockets`;
  try {
    // One dir per supervisor (this root runs one).
    for await (const sup of Deno.readDir(dir)) {
      for await (const e of Deno.readDir(`${dir}/${sup.name}`)) {
        if (e.name.endsWith(".spawn")) return `${dir}/${sup.name}/${e.name}`;
      }
    }
  } catch {
    // Not made yet.
  }
  return undefined;
}

Deno.test("manager - red teams 16 and 17: kept children count against the bound and come back under their own names; a parent despawned during the bring-back, or unable to come back, ends its children; two spawns of one role at once get two names", async () => {
  await using mesh = await startManagerMesh("delegkeep");
  const work = await agentWorkdir("cotal-delegkeep-");
  // The parent's program, a copy that can be taken away so its bring-back fails.
  const program = `${work}/cat`;
  await Deno.copyFile("/bin/cat", program);
  await Deno.chmod(program, 0o755);
  const { askSpawnChannel } = await import("../../lib/manager/sandbox/spawn_channel.ts");
  const { isCotalError } = await import("../../lib/errors.ts");
  try {
    let manager = await mesh.manager({ maxChildrenPerAgent: 2 });
    const ctl = await mesh.control();
    // The parent: a task runner that may spawn helpers.
    const spawnLead = () =>
      ctl.request("spawn", {
        agent: "task-runner",
        name: "lead",
        command: program,
        expose: [work],
        spawnable: { helper: { agent: "task-runner", command: "/bin/cat", role: "helpers" } },
      }, { timeoutMs: 60_000 });
    await spawnLead();
    const sock = (await parentSocket(mesh.root))!;
    const ask = (persona: string) => askSpawnChannel(sock, { op: "spawn", persona }, 90_000);
    assert.equal((await ask("helper")).name, "helpers_1");
    assert.equal((await ask("helper")).name, "helpers_2");
    const names = () => manager.ps().map((r) => r.name).sort();

    // Stopped keeping agents, then started: the parent asks again the moment it may, whether or
    // not its children are back; kept ones count, so the bound holds.
    await manager.stop({ keepAgents: true });
    manager = await mesh.manager({ maxChildrenPerAgent: 2 });
    let early: unknown;
    await waitFor(async () => {
      const s = await parentSocket(mesh.root);
      if (!s) return false;
      early = await askSpawnChannel(s, { op: "spawn", persona: "helper" }, 90_000).catch((e) => e);
      // Refused while it is not yet online; the first answer after is the one that counts.
      return !isCotalError(early, "spawn_not_ready");
    }, { timeoutMs: 60_000, what: "the parent's spawn socket back" });
    assert.ok(isCotalError(early, "spawn_children_exhausted"), String(early));
    await waitFor(() => names().length === 3, { timeoutMs: 90_000, what: "all three back" });
    // Under their own names, not fresh ones.
    assert.deepEqual(names(), ["helpers_1", "helpers_2", "lead"]);

    // The operator despawns the parent while the roster comes back: it, and what it spawned,
    // stay gone (red team 17: the bring-back walked its old list and started them again).
    await manager.stop({ keepAgents: true });
    let lines: string[] = [];
    manager = await mesh.manager({ maxChildrenPerAgent: 2, log: (l) => lines.push(l) });
    await ctl.request("despawn", { name: "lead" }, { timeoutMs: 60_000 });
    await waitFor(() => lines.includes("manager: bring-back done"), {
      timeoutMs: 90_000,
      what: "the bring-back finished",
    });
    assert.deepEqual(names(), [], lines.join("\n"));
    await manager.stop();

    // A parent that cannot come back takes what it spawned with it, whatever the order the
    // roster comes back in.
    manager = await mesh.manager({ maxChildrenPerAgent: 2 });
    await spawnLead();
    const sock2 = (await parentSocket(mesh.root))!;
    for (const n of [1, 2]) {
      const r = await askSpawnChannel(sock2, { op: "spawn", persona: "helper" }, 90_000);
      assert.equal(r.name, `helpers_${n}`);
    }
    await manager.stop({ keepAgents: true });
    await Deno.remove(program);
    lines = [];
    manager = await mesh.manager({ maxChildrenPerAgent: 2, log: (l) => lines.push(l) });
    await waitFor(() => lines.includes("manager: bring-back done"), {
      timeoutMs: 90_000,
      what: "the bring-back finished",
    });
    assert.ok(lines.some((l) => /could not bring lead back/.test(l)), lines.join("\n"));
    await waitFor(() => manager.ps().length === 0, {
      timeoutMs: 60_000,
      what: "the parent's children gone",
    });

    // Two spawns of one role at once (their plans wait on the file system: a workdir).
    const both = await Promise.all([1, 2].map(() =>
      ctl.request<AgentRow>("spawn", {
        agent: "task-runner",
        role: "workers",
        command: "/bin/cat",
        workdir: work,
      }, { timeoutMs: 60_000 })
    ));
    assert.deepEqual(both.map((r) => r.name).sort(), ["workers_1", "workers_2"]);
    assert.ok(both.every((r) => r.present));
  } finally {
    await removeTempDir(work);
  }
});
