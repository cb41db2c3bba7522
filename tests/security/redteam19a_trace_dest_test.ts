/**
 * Red team 19a, attempt A1 (goal 1: a broker answer aimed at another pair's DMs).
 *
 * nats-server (2.11+) traces a message whose headers carry `Nats-Trace-Dest: <subject>`: it
 * publishes a JSON trace event to that subject itself (sendInternalAccountSysMsg, in the
 * publisher's account), checking only that the subject is a valid publish subject, never the
 * publisher's permissions. The relay's protocol guard checks a PUB/HPUB's reply subject and
 * JetStream API bodies but passes header blocks as they come. So a hostile agent under
 * `--isolation deno-only` (or `--net host`), going through its relay with its own launch creds
 * and publishing on a subject it may publish on, could aim the broker's trace event at
 * `cotal.<space>.inst.local.bob.local.alice` (bob's DMs from alice), where it is delivered and
 * stored as if alice had sent it.
 *
 * The test asserts the defence HOLDS: nothing lands on bob<-alice.
 */
import assert from "node:assert/strict";
import { credsAuthenticator } from "nats";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { connect } from "../../lib/nats/connect.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { instSubject } from "../../lib/wire/subjects.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** Connects through its relay with its own launch creds and sends trace-dest headers. */
const HOSTILE = `
import { connect, credsAuthenticator, headers } from "nats";
export async function run(ctx) {
  const target = @@TARGET@@;
  const m = ctx.launch;
  const report = { sent: 0 };
  try {
    const nc = await connect({
      servers: m.servers,
      authenticator: credsAuthenticator(new TextEncoder().encode(m.auth.creds)),
      reconnect: false,
      maxReconnectAttempts: 0,
    });
    let closedWhy = "open";
    nc.closed().then((e) => { closedWhy = "closed: " + (e?.message ?? e); });
    for (const [subject, only] of [["$JS.API.INFO", "true"], ["$JS.API.INFO", undefined]]) {
      for (let i = 0; i < 5; i++) {
        const h = headers();
        h.set("Nats-Trace-Dest", target);
        if (only) h.set("Nats-Trace-Only", only);
        nc.publish(subject, new Uint8Array(), { headers: h });
        report.sent++;
      }
    }
    await nc.flush().catch((e) => { report.flushErr = String(e); });
    await new Promise((r) => setTimeout(r, 1000));
    report.connection = closedWhy;
    await nc.close().catch(() => {});
  } catch (err) {
    report.error = String(err?.message ?? err);
  }
  await Deno.writeTextFile(ctx.agentDir + "/report.json", JSON.stringify(report));
  await ctx.endpoint();
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

for (const mode of ["deno-only", "net host"] as const) {
  Deno.test(`redteam19a A1 - an agent under ${mode} cannot aim a broker trace event (Nats-Trace-Dest) at another pair's DMs`, async () => {
    await using mesh = await startManagerMesh(mode === "net host" ? "rt19th" : "rt19td");
    await mesh.manager(mode === "deno-only" ? { isolation: "deno-only" } : {});
    const ctl = await mesh.control();
    // bob and alice exist, so bob's DM durable stores what lands on bob<-alice.
    await mesh.client("bob");
    await mesh.client("alice");
    const pair = instSubject(
      mesh.space,
      { owner: "local", actor: "bob" },
      { owner: "local", actor: "alice" },
    );
    // A watcher with admin grants sees every DM plane message live.
    const watcher = await connect({
      servers: mesh.url,
      authenticator: credsAuthenticator(
        new TextEncoder().encode(
          await mintCreds(mesh.auth, newIdentity(), "admin", {
            principal: { owner: "local", actor: "watcher" },
          }),
        ),
      ),
    });
    const seen: { subject: string; data: string }[] = [];
    const sub = watcher.subscribe(pair);
    (async () => {
      for await (const m of sub) seen.push({ subject: m.subject, data: m.string().slice(0, 200) });
    })();
    await watcher.flush();

    const dir = await tempDir("cotal-rt19a-trace-");
    await Deno.writeTextFile(
      `${dir}/hostile.js`,
      HOSTILE.replace("@@TARGET@@", JSON.stringify(pair)),
    );
    const work = await agentWorkdir("cotal-rt19a-trace-work-");
    await ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: `${dir}/hostile.js`,
      name: "mallory",
      workdir: work,
      // Under a root supervisor deno-only runs only agents the operator trusts with root.
      ...(mode === "net host" ? { net: "host" } : { trusted: true }),
    }, { timeoutMs: 40_000 });
    await waitFor(() => jsonFileReady(`${work}/report.json`), {
      timeoutMs: 30_000,
      what: "the hostile agent's report",
    });
    const report = JSON.parse(await Deno.readTextFile(`${work}/report.json`));
    await new Promise((r) => setTimeout(r, 1_000));
    console.log(`[${mode}] agent report`, JSON.stringify(report));
    console.log(`[${mode}] messages seen on ${pair}: ${seen.length}`, seen[0]?.data ?? "");
    await watcher.close();
    assert.equal(
      seen.length,
      0,
      `the broker published ${seen.length} trace events on bob<-alice for the hostile agent`,
    );
  });
}
