/**
 * The manager through broker faults: kill -9 of nats-server and a restart on the same store
 * lose the memory-backed presence bucket, and the manager puts it back on its reconnect, so
 * running agents reappear in presence and a new spawn works without anyone's help.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { bucketNames } from "../../lib/wire/mod.ts";
import { kvStreamName } from "../../lib/wire/resources.ts";
import { waitFor } from "../_harness/broker.ts";
import { type ManagerMesh, processesMentioning, startManagerMesh } from "./_manager_mesh.ts";

async function presenceBucketExists(mesh: ManagerMesh): Promise<boolean> {
  const nc = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "provisioner"),
  });
  try {
    const jsm = await nc.jetstreamManager();
    const name = kvStreamName(bucketNames(mesh.space).presence);
    return await jsm.streams.info(name).then(() => true, () => false);
  } finally {
    await nc.close();
  }
}

Deno.test("manager - after kill -9 of the broker the presence bucket is back, agents reappear, spawn works", async () => {
  await using mesh = await startManagerMesh("brokerkill");
  await mesh.manager();
  const ctl = await mesh.control();
  const spawn = (name: string) =>
    ctl.request<AgentRow>("spawn", { agent: "program", name, command: "/bin/cat" }, {
      timeoutMs: 40_000,
    });
  assert.equal((await spawn("before")).present, true);

  await mesh.restartBroker();
  // Memory storage: the restarted broker has no presence bucket until the manager recreates it.
  await waitFor(() => presenceBucketExists(mesh), {
    timeoutMs: 30_000,
    what: "the presence bucket recreated",
  });
  await waitFor(async () => {
    const ps = await ctl.request<{ agents: AgentRow[] }>("ps", {}, { timeoutMs: 2_000 })
      .catch(() => ({ agents: [] as AgentRow[] }));
    return ps.agents.some((a) => a.name === "before" && a.present);
  }, { timeoutMs: 30_000, what: "the running agent present again" });
  const after = await spawn("after");
  assert.equal(after.status, "running");
  assert.equal(after.present, true);
});

Deno.test("manager - the supervisor's start waits for a broker that is not up yet, and an embedder's does not", async () => {
  await using mesh = await startManagerMesh("brokerlate");
  await mesh.killBroker();
  await assert.rejects(
    mesh.manager(),
    (e) => isCotalError(e, "broker_connect_failed") && /could not connect/.test(e.message),
  );
  const lines: string[] = [];
  const starting = mesh.manager({ waitForBroker: true, log: (l) => lines.push(l) });
  await waitFor(() => lines.some((l) => /the broker is not up \(.*\); waiting for it/.test(l)), {
    what: "the manager saying it waits",
  });
  await mesh.startBroker();
  const manager = await starting;
  assert.equal(manager.status().space, mesh.space);
  // It serves: the control rail answers.
  const ctl = await mesh.control();
  assert.equal(
    (await ctl.request<{ instanceId: string }>("status")).instanceId,
    manager.instanceId,
  );
});

Deno.test("manager - an agent restarted while the broker is down waits for it, and is on the mesh once it is back", async () => {
  await using mesh = await startManagerMesh("brokerwait");
  // As cotal-supervise runs it: it outlives the broker's outage.
  await mesh.manager({ waitForBroker: true });
  const ctl = await mesh.control();
  const marker = `waiter-${crypto.randomUUID()}`;
  const row = await ctl.request<AgentRow>("spawn", {
    agent: "program",
    name: "waiter",
    command: "/bin/sh",
    args: ["-c", `sleep 1000; : ${marker}`],
  }, { timeoutMs: 40_000 });
  assert.equal(row.present, true);
  await mesh.killBroker();
  // Its program dies while the broker is down: the supervisor starts it again, and the new
  // runner finds no broker (fault pass 8: it said "not on the mesh" once and never tried again).
  const [first] = processesMentioning(marker).filter((p) => isShell(p));
  assert.ok(first, "the agent's program is running");
  Deno.kill(first, "SIGKILL");
  await waitFor(() => processesMentioning(marker).some((p) => p !== first && isShell(p)), {
    timeoutMs: 30_000,
    what: "the agent started again while the broker is down",
  });
  await new Promise((r) => setTimeout(r, 2_000));
  await mesh.startBroker();
  // A control client of its own: the first may have given up on the broker meanwhile.
  const after = await mesh.control();
  await waitFor(async () => {
    const ps = await after.request<{ agents: AgentRow[] }>("ps", {}, { timeoutMs: 2_000 })
      .catch(() => ({ agents: [] as AgentRow[] }));
    return ps.agents.some((a) => a.name === "waiter" && a.present);
  }, { timeoutMs: 45_000, what: "the restarted agent on the mesh again" });
});

/** Whether `pid` is a shell (the agent's program), not a runner whose argv names the script. */
function isShell(pid: number): boolean {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/cmdline`).startsWith("/bin/sh\0");
  } catch {
    return false;
  }
}

Deno.test("manager - a supervisor whose lease row lapsed (a broker outage past its TTL) takes it again, and does not stop serving", async () => {
  await using mesh = await startManagerMesh("leaselapse");
  const lines: string[] = [];
  const mgr = await mesh.manager({ log: (l) => lines.push(l) });
  const bucket = bucketNames(mesh.space).manager;
  const admin = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "supervisor"),
  });
  try {
    // As the row looks after the broker was away longer than the lease's TTL: gone.
    const kv0 = await admin.jetstream().views.kv(bucket, { bindOnly: true });
    await kv0.delete(`lease.${mgr.instanceId}`);
    // Fault pass 8: "the lease changed hands; stop this manager", and it never renewed again.
    await waitFor(async () => {
      const kv = await admin.jetstream().views.kv(bucket, { bindOnly: true });
      const e = await kv.get(`lease.${mgr.instanceId}`);
      return e?.operation === "PUT" &&
        JSON.parse(new TextDecoder().decode(e.value)).instanceId === mgr.instanceId;
    }, { timeoutMs: 15_000, what: "the lease row written again by its holder" });
    assert.ok(!lines.some((l) => /changed hands/.test(l)), lines.join("\n"));
  } finally {
    await admin.close();
  }
});
