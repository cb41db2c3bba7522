/**
 * A program agent's runner keeps its presence and binds none of the agent's consumers: a DM to
 * it waits in its durable for the program's own reader (`cotal mcp`), instead of being pulled
 * and refused by the runner over and over while it holds the copy (red team 7).
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { dmDurableName, streamNames } from "../../lib/wire/resources.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { startManagerMesh } from "./_manager_mesh.ts";

Deno.test("manager - a program agent's runner leaves its DMs in its durable for the program's reader", async () => {
  await using mesh = await startManagerMesh("progcons");
  await mesh.manager();
  const ctl = await mesh.control();
  const row = await ctl.request<AgentRow>("spawn", {
    agent: "program",
    name: "prog",
    command: "/bin/cat",
  }, {
    timeoutMs: 40_000,
  });
  assert.equal(row.present, true, "its runner keeps its presence");
  const op = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "operator", {
      principal: { owner: "local", actor: "operator" },
    }),
  });
  const prov = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "provisioner"),
  });
  try {
    const P = subjectRoot(mesh.space);
    await op.jetstream().publish(
      `${P}.inst.local.prog.local.operator`,
      new TextEncoder().encode("hi"),
    );
    // Long enough for a consuming runner to pull it and refuse it several times.
    await new Promise((r) => setTimeout(r, 3_000));
    const durable = dmDurableName({ owner: "local", actor: "prog" }, row.lifecycleUid);
    const info = await (await prov.jetstreamManager()).consumers.info(
      streamNames(mesh.space).dm,
      durable,
    );
    assert.equal(info.num_pending, 1, `the DM waits for a reader: ${JSON.stringify(info)}`);
    assert.equal(info.delivered.consumer_seq, 0, "nobody pulled it");
    assert.equal(info.num_redelivered, 0);
  } finally {
    await op.close();
    await prov.close();
  }
});
