/**
 * Red team 20a: an agent's pinned history consumer (`chathist_<lifecycle>` on CHAT) is meant to
 * be memory-only and reaped 30 s after a read; the relay's guard checks only its deliver subject.
 * A sandboxed agent creates it through its relay as a *durable* (`durable_name`, no
 * `inactive_threshold`, file storage): despawn deprovisions only `dm_`/`dlv_`, so it outlives
 * the lifecycle. Each lifecycle leaves one, and CHAT holds at most 1024 consumers (the account's
 * per-stream cap): once full, every member's history read and the delivery daemon's CHAT scans
 * are refused. The test asserts the defence holds: the relay's guard refuses a durable or
 * long-idle consumer create (the connection ends), and a despawn deletes the lifecycle's
 * `chathist_` consumer with its other durables (for members connected directly).
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { streamNames } from "../../lib/wire/resources.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

const HOSTILE = `
import { connect, credsAuthenticator } from "nats";
export async function run(ctx) {
  const T = JSON.parse(@@TARGETS@@);
  await ctx.endpoint();
  const m = ctx.launch;
  const jwt = /BEGIN NATS USER JWT-+\\n(\\S+)\\n/.exec(m.auth.creds)[1];
  const nkey = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const report = {};
  try {
    const nc = await connect({
      servers: m.servers,
      authenticator: credsAuthenticator(new TextEncoder().encode(m.auth.creds)),
      inboxPrefix: "_INBOX_" + nkey,
      reconnect: false,
    });
    const hist = "chathist_" + m.principal.owner + "-" + m.principal.actor + "-" + m.lifecycleUid;
    const body = JSON.stringify({
      stream_name: T.chat,
      config: {
        name: hist,
        durable_name: hist,
        filter_subject: T.filter,
        ack_policy: "explicit",
        deliver_policy: "all",
        max_ack_pending: -1,
        mem_storage: false,
      },
    });
    const r = await nc.request("$JS.API.CONSUMER.CREATE." + T.chat + "." + hist + "." + T.filter, body, { timeout: 5000 });
    report.answer = new TextDecoder().decode(r.data).slice(0, 600);
    await nc.close();
  } catch (err) {
    report.answer = "threw: " + (err?.message ?? err);
  }
  await Deno.writeTextFile(ctx.agentDir + "/report.json", JSON.stringify(report));
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

Deno.test("redteam20a - a sandboxed agent's chathist consumer does not outlive its lifecycle (durable_name, no inactive_threshold)", async () => {
  await using mesh = await startManagerMesh("rt20achist");
  await mesh.manager();
  const ctl = await mesh.control();
  const P = subjectRoot(mesh.space);
  const st = streamNames(mesh.space);
  const targets = { chat: st.chat, filter: `${P}.chat.*.*.general` };
  const src = `${await tempDir("cotal-rt20a-chist-")}/hostile.js`;
  await Deno.writeTextFile(
    src,
    HOSTILE.replace("@@TARGETS@@", JSON.stringify(JSON.stringify(targets))),
  );
  const admin = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "admin"),
  });
  try {
    const work = await agentWorkdir("cotal-rt20a-chist-work-");
    const hostile = await ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: src,
      name: "hostile",
      workdir: work,
      subscribe: ["general"],
    }, { timeoutMs: 40_000 });
    await waitFor(() => jsonFileReady(`${work}/report.json`), {
      timeoutMs: 40_000,
      what: "the hostile agent's report",
    });
    const report = JSON.parse(await Deno.readTextFile(`${work}/report.json`));
    console.log("consumer create answer:", report.answer);
    const name = `chathist_local-hostile-${hostile.lifecycleUid}`;
    await ctl.request("despawn", { name: "hostile" }, { timeoutMs: 30_000 });
    const jsm = await admin.jetstreamManager();
    // Past the 30 s a history consumer is meant to live, with room.
    const deadline = Date.now() + 45_000;
    let left: Awaited<ReturnType<typeof jsm.consumers.info>> | undefined;
    for (;;) {
      left = await jsm.consumers.info(st.chat, name).catch(() => undefined);
      if (!left || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    assert.equal(
      left,
      undefined,
      `the despawned agent's ${name} is still on CHAT 45 s after its despawn: durable=${left?.config.durable_name} inactive_threshold=${left?.config.inactive_threshold}`,
    );
  } finally {
    await admin.close();
  }
});

const HONEST = `
export async function run(ctx) {
  const ep = await ctx.endpoint();
  let report;
  try {
    await ep.multicast("a post to read back", { channel: "general" });
    const h = await ep.channelHistory("general", { limit: 5 });
    report = { read: h.length };
  } catch (err) {
    report = { error: String(err?.message ?? err) };
  }
  await Deno.writeTextFile(ctx.agentDir + "/report.json", JSON.stringify(report));
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

Deno.test("redteam20a - an honest sandboxed agent's history read still passes its relay's guard", async () => {
  await using mesh = await startManagerMesh("rt20achok");
  await mesh.manager();
  const ctl = await mesh.control();
  const src = `${await tempDir("cotal-rt20a-chok-")}/honest.js`;
  await Deno.writeTextFile(src, HONEST);
  const work = await agentWorkdir("cotal-rt20a-chok-work-");
  await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: src,
    name: "honest",
    workdir: work,
    subscribe: ["general"],
    allowPublish: ["general"],
  }, { timeoutMs: 40_000 });
  await waitFor(() => jsonFileReady(`${work}/report.json`), {
    timeoutMs: 40_000,
    what: "the honest agent's report",
  });
  const report = JSON.parse(await Deno.readTextFile(`${work}/report.json`));
  assert.deepEqual(report, { read: 1 });
  await ctl.request("despawn", { name: "honest" }, { timeoutMs: 30_000 });
});
