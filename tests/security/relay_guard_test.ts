/**
 * The fourth red team's aimed answers (J, K, L), made again by a hostile module agent spawned by
 * the real supervisor, through its real relay, against a real broker. The broker never checks a
 * request's reply subject or a consumer's deliver subject; the agent's relay does, so every
 * attempt ends its connection with the relay's reason, and nothing lands where it was aimed: no
 * answer is stored under the operator's channel subject, a DM pair or an ACL key, and a presence
 * watcher receives nothing. Spawning still works afterwards.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { bucketNames, kvStreamName, streamNames } from "../../lib/wire/resources.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** The hostile module: each attack on a fresh connection; the report says how each ended. */
const HOSTILE = `
import { connect, credsAuthenticator } from "nats";

export async function run(ctx) {
  const T = JSON.parse(@@TARGETS@@);
  // Present first (the spawn waits for it), then the attacks.
  const ep = await ctx.endpoint();
  const m = ctx.launch;
  const jwt = /BEGIN NATS USER JWT-+\\n(\\S+)\\n/.exec(m.auth.creds)[1];
  const nkey = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const open = () => connect({
    servers: m.servers,
    authenticator: credsAuthenticator(new TextEncoder().encode(m.auth.creds)),
    inboxPrefix: "_INBOX_" + nkey,
    reconnect: false,
  });
  const report = {};
  const save = () => Deno.writeTextFile(ctx.agentDir + "/partial.json", JSON.stringify(report));
  const within = (p, ms, what) =>
    Promise.race([p, new Promise((r) => setTimeout(() => r(what), ms))]);
  async function attempt(name, fn) {
    let nc;
    try {
      nc = await within(open(), 5000, undefined);
      if (!nc) throw new Error("connect timed out");
      const closed = nc.closed();
      await fn(nc);
      await within(nc.flush().catch(() => {}), 2000);
      const err = await within(closed, 3000, "still open");
      report[name] = err === "still open" ? err : String(err?.message ?? err ?? "closed cleanly");
    } catch (err) {
      report[name] = "threw: " + (err?.message ?? err);
    } finally {
      await within(nc?.close().catch(() => {}), 2000);
    }
    await save();
  }
  const empty = new Uint8Array();
  // J: the broker's info answer aimed at another principal's channel, DM pair and task queue.
  await attempt("J_chat", (nc) => { for (let i = 0; i < 20; i++) nc.publish("$JS.API.INFO", empty, { reply: T.chat }); });
  await attempt("J_dm", (nc) => nc.publish("$JS.API.INFO", empty, { reply: T.dm }));
  // K: answers aimed at an ACL key and a member key.
  await attempt("K_acl", (nc) => nc.publish("$JS.API.STREAM.INFO." + T.chatStream, empty, { reply: T.aclKey }));
  await attempt("K_members", (nc) => nc.publish("$JS.API.INFO", empty, { reply: T.memberKey }));
  // K/L priming: a stream info listing every subject, sent to the agent's own inbox.
  await attempt("K_subjects", (nc) => nc.publish("$JS.API.STREAM.INFO." + T.chatStream,
    JSON.stringify({ subjects_filter: ">" }), { reply: "_INBOX_" + nkey + ".x" }));
  // L: an answer aimed at a presence key every watcher receives, with headers this time.
  await attempt("L_presence", (nc) => nc.publish("$JS.API.STREAM.INFO." + T.presenceStream, empty,
    { reply: T.presenceKey, headers: undefined }));
  // A consumer create whose deliveries would go to the ACL bucket.
  await attempt("deliver", (nc) => nc.publish("$JS.API.CONSUMER.CREATE." + T.chatStream + "." + T.hist + "." + T.histFilter,
    JSON.stringify({ stream_name: T.chatStream, config: { name: T.hist, filter_subject: T.histFilter, DELIVER_SUBJECT: T.aclKey } }),
    { reply: "_INBOX_" + nkey + ".c" }));
  // Red team 5, M and O: a repeated "config" key. JSON.parse keeps the last (empty) one; the
  // broker's decoder would merge the first, with its deliver subject, into the consumer.
  const hist = "chathist_" + m.principal.owner + "-" + m.principal.actor + "-" + m.lifecycleUid;
  await attempt("M_dup", async (nc) => {
    const body = '{"stream_name":"' + T.chatStream + '","config":{"name":"' + hist +
      '","filter_subject":"' + T.histFilter + '","deliver_subject":"' + T.aclKey +
      '"},"config":{"name":"' + hist + '","filter_subject":"' + T.histFilter +
      '","inactive_threshold":30000000000,"ack_policy":"none"}}';
    const r = await nc.request(
      "$JS.API.CONSUMER.CREATE." + T.chatStream + "." + hist + "." + T.histFilter,
      body,
      { timeout: 3000 },
    );
    report.M_dup_answer = new TextDecoder().decode(r.data).slice(0, 300);
  });
  // Red team 5, N: a stream info of many keys, to keep the guard parsing (100 KB: a member's
  // cred publishes at most 128 KiB a message).
  await attempt("N_big", (nc) => {
    const keys = Array.from({ length: 10000 }, (_, i) => '"k' + i + '":1').join(",");
    nc.publish("$JS.API.STREAM.INFO." + T.chatStream, "{" + keys + "}", { reply: "_INBOX_" + nkey + ".b" });
  });
  // Raw bytes, lowercase and tabs, before any CONNECT.
  try {
    const c = await Deno.connect({ hostname: "127.0.0.1", port: 4222 });
    const buf = new Uint8Array(65536);
    let text = "";
    await c.read(buf).then((n) => (text += new TextDecoder().decode(buf.subarray(0, n ?? 0))));
    await c.write(new TextEncoder().encode("pub\\t$JS.API.INFO\\t" + T.chat + "\\t0\\r\\n\\r\\n"));
    for (;;) {
      const n = await within(c.read(buf), 5000, null);
      if (n === null) break;
      text += new TextDecoder().decode(buf.subarray(0, n));
    }
    report.raw = text.replace(/^INFO [^\\n]*\\n/, "");
    c.close();
  } catch (err) {
    report.raw = "threw: " + err.message;
  }
  // The agent's own endpoint still works through the same relay.
  report.ownPresence = ep.getRoster().some((p) => p.card.name === "hostile") ? "ok" : "absent";
  await Deno.writeTextFile(ctx.agentDir + "/report.json", JSON.stringify(report));
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

Deno.test("security - aimed answers and aimed deliveries from a sandboxed agent are stopped at its relay (red team 4: J, K, L)", async () => {
  await using mesh = await startManagerMesh("relayguard");
  await mesh.manager();
  const ctl = await mesh.control();
  const P = subjectRoot(mesh.space);
  const st = streamNames(mesh.space);
  const b = bucketNames(mesh.space);
  const targets = {
    chat: `${P}.chat.local.operator.general`,
    dm: `${P}.inst.local.victim.local.operator`,
    chatStream: st.chat,
    presenceStream: kvStreamName(b.presence),
    aclKey: `$KV.${b.acl}.aimed`,
    memberKey: `$KV.${b.members}.aimed`,
    presenceKey: `$KV.${b.presence}.local.nobody`,
    hist: "chathist_x",
    histFilter: `${P}.chat.*.*.general`,
  };
  const src = `${await tempDir("cotal-relay-guard-")}/hostile.js`;
  await Deno.writeTextFile(
    src,
    HOSTILE.replace("@@TARGETS@@", JSON.stringify(JSON.stringify(targets))),
  );
  // A presence watcher on the side, as every agent and the supervisor are.
  const nc = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "provisioner"),
  });
  const watcher = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "observer"),
  });
  try {
    const seen: string[] = [];
    const watch = watcher.subscribe(targets.presenceKey, {
      callback: (e, msg) => seen.push(e ? `error: ${e.message}` : msg.subject),
    });
    await watcher.flush();
    const work = await agentWorkdir("cotal-relay-guard-work-");
    const hostile = await ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: src,
      name: "hostile",
      workdir: work,
      subscribe: ["general"],
    }, { timeoutMs: 40_000 });
    const file = `${work}/report.json`;
    await waitFor(() => jsonFileReady(file), {
      timeoutMs: 60_000,
      what: "the hostile agent's report",
    }).catch(async (err) => {
      const partial = await Deno.readTextFile(`${work}/partial.json`).catch(() => "none");
      throw new Error(`${err.message}; partial report: ${partial}`);
    });
    const r = JSON.parse(await Deno.readTextFile(file)) as Record<string, string>;
    const reply =
      /cotal relay: a reply subject must be under the inbox of this agent, _INBOX_\S+\.>/;
    for (const k of ["J_chat", "J_dm", "K_acl", "K_members", "L_presence"]) {
      assert.match(r[k], reply, `${k}: ${r[k]}`);
    }
    assert.match(r.K_subjects, /cotal relay: a stream info request may not list subjects/);
    assert.match(
      r.deliver,
      /cotal relay: a consumer config has a field name that is not lowercase ASCII/,
    );
    assert.match(
      r.raw,
      /^-ERR 'cotal relay: a reply subject must be under the inbox of this agent,/,
    );
    assert.equal(r.ownPresence, "ok");
    assert.match(r.N_big, /cotal relay: a JetStream API request is larger than 8 KiB/);
    // The repeated key reached the broker as the guard read it: a pull consumer, no deliveries.
    assert.equal(r.M_dup, "still open");
    assert.match(r.M_dup_answer, /"type":"io.nats.jetstream.api.v1.consumer_create_response"/);
    // Read with the delivery daemon's cred (an admin's reaches its own consumer only).
    const admin = await connectBroker({
      servers: mesh.url,
      creds: await mintCreds(mesh.auth, newIdentity(), "delivery"),
    });
    try {
      const made = await (await admin.jetstreamManager()).consumers.info(
        st.chat,
        `chathist_local-hostile-${hostile.lifecycleUid}`,
      );
      assert.equal(made.config.deliver_subject, undefined);
    } finally {
      await admin.close();
    }

    // Nothing landed where it was aimed.
    const jsm = await nc.jetstreamManager();
    const stored = async (stream: string, subject: string) =>
      (await jsm.streams.info(stream, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;
    assert.equal(await stored(st.chat, targets.chat), 0);
    assert.equal(await stored(st.dm, targets.dm), 0);
    assert.equal(await stored(kvStreamName(b.acl), targets.aclKey), 0);
    assert.equal(await stored(kvStreamName(b.members), targets.memberKey), 0);
    await watcher.flush();
    assert.deepEqual(seen, []);
    watch.unsubscribe();

    // The mesh goes on: a new agent spawns and is present.
    const after = await ctl.request<AgentRow>("spawn", { name: "after", command: "/bin/cat" }, {
      timeoutMs: 40_000,
    });
    assert.equal(after.present, true);
  } finally {
    await nc.close();
    await watcher.close();
  }
});
