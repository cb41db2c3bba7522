/**
 * The manager end to end on a real broker, in-process: spawn over the control rail, the
 * agent's presence, a task answered by the built-in task runner inside bwrap on the pty, and a
 * despawn that leaves no durables, creds, dir or process.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { agentSocketDir } from "../../lib/manager/agent_setup.ts";
import { DEFAULT_AGENT_CREDS_TTL_SECONDS } from "../../lib/manager/manager_types.ts";
import { parseCreds } from "../../lib/nats/creds.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { dlvDurableName, dmDurableName, streamNames } from "../../lib/wire/resources.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import { waitFor } from "../_harness/broker.ts";
import { processesMentioning, startManagerMesh } from "./_manager_mesh.ts";
import { agentDirOf } from "../../lib/manager/sandbox/isolation.ts";

/** Which of the named durables exist on `stream` (read with a provisioner cred). */
async function existing(url: string, creds: string, stream: string, names: string[]) {
  const nc = await connectBroker({ servers: url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    const out: string[] = [];
    for (const n of names) {
      if (await jsm.consumers.info(stream, n).then(() => true, () => false)) out.push(n);
    }
    return out;
  } finally {
    await nc.close();
  }
}

Deno.test("manager - spawn, presence, a task answered, despawn leaves nothing behind", async () => {
  await using mesh = await startManagerMesh("life");
  const manager = await mesh.manager();
  const ctl = await mesh.control();
  const status = await ctl.request<{ isolation: string; instanceId: string }>("status");
  assert.match(status.isolation, /^bwrap \(.*\): allowlist root, .*seccomp.* \+ Deno permissions$/);
  assert.equal(status.instanceId, manager.instanceId);

  const row = await ctl.request<AgentRow>("spawn", {
    agent: "task-runner",
    name: "upper",
    role: "shout",
    command: "/bin/sh",
    args: ["-c", "tr a-z A-Z"],
  }, { timeoutMs: 40_000 });
  assert.equal(row.name, "upper");
  assert.equal(row.status, "running");
  assert.equal(row.present, true);
  assert.equal(row.id, "local.upper");
  assert.match(row.isolation, /bwrap/);

  // The agent's cred lives an hour (despawn cannot revoke a copy the agent kept; its launch
  // file gets a fresh one at half life).
  const creds = await mesh.store.get(
    `space.${spaceKeyHex(mesh.space)}/agent.upper.${row.lifecycleUid}.creds`,
  );
  const claims = decodeJwtUnverified((await parseCreds(creds!)).jwt);
  assert.equal(claims.exp! - claims.iat, DEFAULT_AGENT_CREDS_TTL_SECONDS);
  assert.equal(DEFAULT_AGENT_CREDS_TTL_SECONDS, 3600);

  const { ep, dms } = await mesh.client("asker");
  const task = await ep.anycast("shout", "hello from the test");
  await waitFor(() => dms.some((m) => m.replyTo === task.id), { what: "the task's result DM" });
  const result = dms.find((m) => m.replyTo === task.id)!;
  assert.equal(result.from.id, "local.upper");
  assert.equal((result.parts[0] as { text: string }).text.trim(), "HELLO FROM THE TEST");
  const data = (result.parts[1] as unknown as { data: { code: number } }).data;
  assert.equal(data.code, 0);

  const ps = await ctl.request<{ agents: AgentRow[] }>("ps");
  assert.deepEqual(ps.agents.map((a) => [a.name, a.status, a.present]), [[
    "upper",
    "running",
    true,
  ]]);
  const agentDir = `${agentDirOf(mesh, mesh.space, "upper")}`;
  assert.ok(processesMentioning(agentDir).length > 0, "the runner runs");
  const prov = await mintCreds(mesh.auth, newIdentity(), "provisioner");
  const s = streamNames(mesh.space);
  const who = { owner: "local", actor: "upper" };
  const dm = dmDurableName(who, row.lifecycleUid);
  const dlv = dlvDurableName(who, row.lifecycleUid);
  assert.deepEqual(await existing(mesh.url, prov, s.dm, [dm]), [dm]);
  assert.deepEqual(await existing(mesh.url, prov, s.dlv, [dlv]), [dlv]);

  const gone = await ctl.request<{ durablesRemoved: string[] }>("despawn", { name: "upper" });
  assert.equal(gone.durablesRemoved.length, 2);
  assert.deepEqual(processesMentioning(agentDir), []);
  assert.deepEqual(await existing(mesh.url, prov, s.dm, [dm]), []);
  assert.deepEqual(await existing(mesh.url, prov, s.dlv, [dlv]), []);
  await assert.rejects(Deno.stat(agentDir), Deno.errors.NotFound);
  assert.equal(
    await mesh.store.get(`space.${spaceKeyHex(mesh.space)}/agent.upper.${row.lifecycleUid}.creds`),
    undefined,
  );
  assert.deepEqual((await ctl.request<{ agents: AgentRow[] }>("ps")).agents, []);

  // Refusals carry their codes.
  await assert.rejects(
    ctl.request("despawn", { name: "upper" }),
    (e) => isCotalError(e, "not_found") && /No agent named "upper"/.test(e.message),
  );
  await assert.rejects(
    ctl.request("spawn", { agent: "task-runner" }),
    (e) => isCotalError(e, "spawn_bad_args") && /needs command/.test(e.message),
  );
  await assert.rejects(
    ctl.request("mint", { profile: "admin" }),
    (e) => isCotalError(e, "unknown_command") && /no command "mint"/.test(e.message),
  );
});

Deno.test("manager - a read asked right after a broker reload is answered (re-sent on silence)", async () => {
  await using mesh = await startManagerMesh("reload");
  const manager = await mesh.manager();
  // A config reload drops every client on nats-server 2.10; a request from a fresh caller can
  // land before the manager's connection is back, with no subscriber to take it.
  await mesh.broker.reload(await Deno.readTextFile(mesh.broker.configPath));
  const ctl = await mesh.control();
  const st = await ctl.request<{ instanceId: string }>("status", {}, { timeoutMs: 5_000 });
  assert.equal(st.instanceId, manager.instanceId);
});

Deno.test("manager - a stop while an agent holds itself in starting ends the spawn and cleans up", async () => {
  await using mesh = await startManagerMesh("stuck");
  const manager = await mesh.manager();
  const ctl = await mesh.control();
  const agentDir = `${agentDirOf(mesh, mesh.space, "stuck")}`;
  // The program stops its own runner before the runner publishes presence: the spawn waits
  // out its readiness window (here 300 s, the most a request may ask) unless the stop ends it.
  const spawned = ctl.request("spawn", {
    agent: "program",
    name: "stuck",
    command: "/bin/sh",
    args: ["-c", "kill -STOP $PPID; exec sleep 1000"],
    readinessMs: 300_000,
  }, { timeoutMs: 310_000 }).then(() => "spawned", (e) => e);
  await waitFor(async () => {
    const ps = await ctl.request<{ agents: AgentRow[] }>("ps");
    return ps.agents.some((a) => a.name === "stuck" && a.status === "starting") &&
      processesMentioning(agentDir).length > 0;
  }, { timeoutMs: 40_000, what: "the agent's sandbox running, the agent in starting" });

  // The stop has a deadline well inside the readiness window; it used to wait the window out.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stopped = await Promise.race([
    manager.stop().then(() => "stopped"),
    new Promise<string>((r) => timer = setTimeout(() => r("deadline"), 60_000)),
  ]).finally(() => clearTimeout(timer));
  assert.equal(stopped, "stopped");
  assert.deepEqual(processesMentioning(agentDir), []);
  await assert.rejects(Deno.stat(agentDir), Deno.errors.NotFound);
  const layout = { root: mesh.root, broker: [mesh.url.replace("nats://", "")] };
  const socketDir = agentSocketDir(layout, manager.instanceId);
  const left = await Array.fromAsync(Deno.readDir(socketDir)).catch(() => []);
  assert.deepEqual(left.map((e) => e.name), [], "no socket or devpts mount left");
  const outcome = await spawned;
  assert.ok(
    isCotalError(outcome, "unavailable") && /manager is stopping/.test(outcome.message),
    `the spawn ended with ${outcome}`,
  );
});
