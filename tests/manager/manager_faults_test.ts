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
import { type ManagerMesh, startManagerMesh } from "./_manager_mesh.ts";

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
