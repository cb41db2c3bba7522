/**
 * Agent cred renewal without a signer in the runner: the manager re-mints the agent's cred
 * (same nkey) into its launch file at half its life, and the runner's endpoint re-reads it at
 * 75 %, so an agent keeps working past its first cred's expiry.
 */
import assert from "node:assert/strict";
import { readLaunchMaterial } from "../../lib/manager/launch.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { isRelayedCreds, parseRelayedCreds } from "../../lib/nats/creds.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { waitFor } from "../_harness/broker.ts";
import { startManagerMesh } from "./_manager_mesh.ts";
import { agentDirOf } from "../../lib/manager/sandbox/isolation.ts";

async function claimsOf(launchFile: string) {
  const m = await readLaunchMaterial(launchFile);
  if (m.auth.kind !== "creds") throw new Error("no creds");
  // A sandboxed agent behind its relay holds its JWT alone.
  assert.ok(isRelayedCreds(m.auth.creds), "the launch file holds the agent's seed");
  return decodeJwtUnverified(parseRelayedCreds(m.auth.creds).jwt);
}

Deno.test("manager - an agent's cred is re-minted into its launch file and the agent outlives its first cred", async () => {
  await using mesh = await startManagerMesh("renew");
  await mesh.manager({ agentCredsTtlSeconds: 30 });
  const ctl = await mesh.control();
  const row = await ctl.request<AgentRow>("spawn", {
    name: "echoer",
    role: "echo",
    command: "/bin/cat",
  }, { timeoutMs: 40_000 });
  const launchFile = `${agentDirOf(mesh, mesh.space, "echoer")}/launch.json`;
  const first = await claimsOf(launchFile);
  assert.equal(first.exp! - first.iat, 30);
  // Past the first cred's expiry (and the broker's disconnect of a connection presenting it).
  await new Promise((r) => setTimeout(r, 32_500));
  const now = await claimsOf(launchFile);
  assert.equal(now.sub, first.sub, "same nkey");
  assert.ok(now.iat > first.iat, "re-minted");
  assert.ok(now.exp! > Date.now() / 1000, "the launch file holds a live cred");
  const { ep, dms } = await mesh.client("asker");
  const task = await ep.anycast("echo", "still here");
  await waitFor(() => dms.some((m) => m.replyTo === task.id), {
    what: "an answer from the renewed agent",
  });
  const ps = await ctl.request<{ agents: AgentRow[] }>("ps");
  assert.deepEqual(ps.agents.map((a) => [a.name, a.present, a.restarts]), [["echoer", true, 0]]);
  assert.equal(ps.agents[0].lifecycleUid, row.lifecycleUid);
});
