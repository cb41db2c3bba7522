/**
 * The sixth red team's Q and R, made again by a hostile module agent with no grants, spawned by
 * the real supervisor, through its real relay, against a real broker: DMs to principals that do
 * not exist and tasks to roles nobody has, aimed at filling DM and TASK so every DM and task of
 * the space would be refused. The broker acknowledges them and stores none, a DM larger than DM
 * keeps is refused by the broker, and the operator's DM and task to a real agent and role are
 * stored afterwards.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { dmDurableName, streamNames, svcDurableName } from "../../lib/wire/resources.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** The hostile module: JetStream publishes on its own connection; the report counts the acks. */
const HOSTILE = `
import { connect, credsAuthenticator } from "nats";

export async function run(ctx) {
  const P = @@ROOT@@;
  await ctx.endpoint();
  const m = ctx.launch;
  const jwt = /BEGIN NATS USER JWT-+\\n(\\S+)\\n/.exec(m.auth.creds)[1];
  const nkey = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const nc = await connect({
    servers: m.servers,
    authenticator: credsAuthenticator(new TextEncoder().encode(m.auth.creds)),
    inboxPrefix: "_INBOX_" + nkey,
    reconnect: false,
  });
  const js = nc.jetstream();
  const me = m.principal.owner + "." + m.principal.actor;
  const chunk = new Uint8Array(60 * 1024);
  const report = { dmAcked: 0, taskAcked: 0, errors: [] };
  // Under the relay's stored-plane burst (4 MiB), so the budget is not what stops it.
  for (let i = 0; i < 30; i++) {
    await js.publish(P + ".inst.local.nobody" + i + "." + me, chunk)
      .then(() => report.dmAcked++, (e) => report.errors.push(String(e.message ?? e)));
    await js.publish(P + ".svc.nobody" + i + "." + me, chunk)
      .then(() => report.taskAcked++, (e) => report.errors.push(String(e.message ?? e)));
  }
  // A DM past what DM keeps, to a real peer.
  report.big = await js.publish(P + ".inst.local.peer." + me, new Uint8Array(100 * 1024))
    .then(() => "stored", (e) => JSON.stringify(e.api_error ?? String(e.message ?? e)));
  await nc.close();
  await Deno.writeTextFile(ctx.agentDir + "/report.json", JSON.stringify(report));
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

Deno.test("security - a sandboxed agent's DMs to nobody and tasks to no role are never stored, so DM and TASK stay open to everyone (red team 6: Q, R)", async () => {
  await using mesh = await startManagerMesh("storagefill");
  await mesh.manager();
  const ctl = await mesh.control();
  const P = subjectRoot(mesh.space);
  const st = streamNames(mesh.space);
  // A real recipient and a real role.
  const peer = await ctl.request<AgentRow>("spawn", {
    name: "peer",
    command: "/bin/cat",
    role: "review",
  }, { timeoutMs: 40_000 });
  assert.equal(peer.present, true);
  const src = `${await tempDir("cotal-storage-fill-")}/hostile.js`;
  await Deno.writeTextFile(src, HOSTILE.replace("@@ROOT@@", JSON.stringify(P)));
  const work = await agentWorkdir("cotal-storage-fill-work-");
  await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: src,
    name: "hostile",
    workdir: work,
  }, { timeoutMs: 40_000 });
  const file = `${work}/report.json`;
  await waitFor(() => jsonFileReady(file), {
    timeoutMs: 90_000,
    what: "the hostile agent's report",
  });
  const r = JSON.parse(await Deno.readTextFile(file));
  // The broker acknowledged every one of them (no error tells the attacker anything) ...
  assert.deepEqual([r.dmAcked, r.taskAcked, r.errors], [30, 30, []]);
  assert.match(r.big, /"err_code":10054/, r.big);

  const nc = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "provisioner"),
  });
  const op = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "operator", {
      principal: { owner: "local", actor: "operator" },
    }),
  });
  try {
    const jsm = await nc.jetstreamManager();
    // ... and stored none of them.
    for (
      const [stream, filter] of [[st.dm, `${P}.inst.*.*.local.hostile`], [
        st.task,
        `${P}.svc.*.local.hostile`,
      ]]
    ) {
      const info = await jsm.streams.info(stream, { subjects_filter: filter });
      assert.deepEqual(info.state.subjects ?? {}, {}, stream);
    }
    // The operator's DM and task to the real agent and role are stored for it.
    const js = op.jetstream();
    const dm = await js.publish(
      `${P}.inst.local.peer.local.operator`,
      new TextEncoder().encode("hi"),
    );
    const task = await js.publish(`${P}.svc.review.local.operator`, new TextEncoder().encode("do"));
    // Stored: still in the stream, or already handed to the durable that waits for it (the
    // peer's runner may have read and acked its DM by now).
    const kept = async (stream: string, durable: string, seq: number) => {
      if (await jsm.streams.getMessage(stream, { seq }).then(() => true, () => false)) return true;
      return (await jsm.consumers.info(stream, durable)).delivered.stream_seq >= seq;
    };
    const peerDm = dmDurableName({ owner: "local", actor: "peer" }, peer.lifecycleUid);
    assert.ok(await kept(st.dm, peerDm, dm.seq), "the DM to peer");
    assert.ok(await kept(st.task, svcDurableName("review"), task.seq), "the task to review");
  } finally {
    await op.close();
    await nc.close();
  }
});
