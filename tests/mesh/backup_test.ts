import assert from "node:assert/strict";
import { AckPolicy, DeliverPolicy } from "nats";
import { spaceBackup, spaceRestore } from "../../lib/mesh/backup.ts";
import { spaceAdd, spaceRm } from "../../lib/mesh/space.ts";
import { loadBrokerAuth, loadSpaceAccount } from "../../lib/mesh/trust_state.ts";
import { down, up } from "../../lib/mesh/up.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { chatSubject, connectBroker, streamNames } from "../../lib/wire/mod.ts";
import { doctorAuth, workspaceSecretStore } from "../../lib/workspace/mod.ts";
import { isCotalError } from "../../lib/errors.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

function upDetached(root: string) {
  return up({
    root,
    space: "main",
    host: "127.0.0.1",
    port: freePort(),
    detach: true,
    say: () => {},
    untilStopped: Promise.resolve(),
  });
}

async function creds(
  root: string,
  space: string,
  profile: "operator" | "observer" | "backup",
  id = newIdentity(),
) {
  const account = (await loadSpaceAccount(workspaceSecretStore(root), space))!;
  return await mintCreds({ space, account: account.account }, id, profile, {
    ...(profile === "operator" ? { principal: { owner: "local", actor: "w" } } : {}),
  });
}

Deno.test("mesh - back up a space, remove it, restore it into a fresh broker with another operator", async () => {
  const rootA = await tempDir("cotal-a-");
  const rootB = await tempDir("cotal-b-");
  const backupDir = `${await tempDir("cotal-bk-")}/bk`;
  try {
    const a = await upDetached(rootA);
    await spaceAdd(rootA, "team");
    const writer = await creds(rootA, "team", "operator");
    const nc = await connectBroker({ servers: a.url, creds: writer });
    const js = nc.jetstream();
    for (let i = 0; i < 25; i++) {
      await js.publish(chatSubject("team", { owner: "local", actor: "w" }, "general"), `m${i}`);
    }
    await nc.close();

    // The backup profile snapshots but cannot read messages or delete.
    const bk = await connectBroker({ servers: a.url, creds: await creds(rootA, "team", "backup") });
    const sub = bk.subscribe(chatSubject("team", { owner: "local", actor: "w" }, "general"));
    const subErr = await (async () => {
      try {
        for await (const _ of sub) return undefined;
      } catch (e) {
        return e;
      }
    })();
    assert.match(String(subErr), /Permissions Violation for Subscription/);
    await assert.rejects(
      (await bk.jetstreamManager()).streams.delete(streamNames("team").chat),
      /Permissions Violation|timeout/i,
    );
    await bk.close().catch(() => {});

    const manifest = await spaceBackup(rootA, "team", backupDir);
    assert.ok(manifest.streams.some((s) => s.name === streamNames("team").chat));
    assert.equal((await Deno.stat(`${backupDir}/account.json`)).mode! & 0o777, 0o600);
    await assert.rejects(
      spaceBackup(rootA, "team", backupDir),
      (e) => isCotalError(e, "backup_dir_not_empty"),
    );
    await spaceRm(rootA, "team");

    // A fresh root: its own broker and a different operator.
    const b = await upDetached(rootB);
    const opA = (await loadBrokerAuth(workspaceSecretStore(rootA)))!.operator.pub;
    const opB = (await loadBrokerAuth(workspaceSecretStore(rootB)))!.operator.pub;
    assert.notEqual(opA, opB);
    const restored = await spaceRestore(rootB, backupDir);
    // Its $SYS creds are the other operator's: the restore says how to re-issue them (newcomer
    // pass 8 learned it from status alone).
    assert.equal(restored.next?.length, 1, JSON.stringify(restored.next));
    assert.match(restored.next![0], /must be issued by this root's system account/);
    assert.match(
      restored.next![0],
      /down --root .* --keep-agents && .*up --root \S+' \(add --detach/,
    );

    // Every message is back, at its original sequence, and the cred minted before the backup
    // (signed by the space's own signing key) connects to the new broker.
    const obsId = newIdentity();
    const obs = await connectBroker({
      servers: b.url,
      creds: await creds(rootB, "team", "observer", obsId),
    });
    const jsm = await obs.jetstreamManager();
    const info = await jsm.streams.info(streamNames("team").chat);
    assert.equal(info.state.messages, 25);
    assert.equal(info.state.first_seq, 1);
    assert.equal(info.state.last_seq, 25);
    // Through the one consumer an observer may make, named for it.
    await jsm.consumers.add(streamNames("team").chat, {
      name: `hist_${obsId.id}`,
      filter_subject: "cotal.team.chat.>",
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: 7,
    });
    const reader = await obs.jetstream().consumers.get(
      streamNames("team").chat,
      `hist_${obsId.id}`,
    );
    const m7 = await reader.next({ expires: 5_000 });
    assert.equal(m7?.seq, 7);
    assert.equal(m7 && new TextDecoder().decode(m7.data), "m6");
    await obs.close();
    const again = await connectBroker({ servers: b.url, creds: writer });
    await again.jetstream().publish(
      chatSubject("team", { owner: "local", actor: "w" }, "general"),
      "after",
    );
    await again.close();

    // What that says is enough: an up whose broker starts re-issues $SYS creds another root's
    // system account signed (newcomer pass 10 met three different instructions for it).
    await down(rootB, { keepAgents: true });
    const said: string[] = [];
    await up({
      root: rootB,
      space: "main",
      host: "127.0.0.1",
      port: Number(new URL(b.url.replace("nats:", "http:")).port),
      detach: true,
      say: (l) => said.push(l),
      untilStopped: Promise.resolve(),
    });
    assert.ok(
      said.some((l) =>
        /minted the \$SYS \(broker monitoring\) creds that team lacked [^]*every agent's creds are unchanged/
          .test(l)
      ),
      said.join("\n"),
    );
    const sysRows = (await doctorAuth(rootB)).filter((r) =>
      r.space === "team" && /observer|evictor/.test(r.kind)
    );
    assert.equal(sysRows.length, 2, JSON.stringify(sysRows));
    assert.ok(sysRows.every((r) => r.status === "healthy"), JSON.stringify(sysRows));

    await assert.rejects(spaceRestore(rootB, backupDir), (e) => isCotalError(e, "space_exists"));
    await Deno.writeTextFile(`${backupDir}/manifest.json`, "{}");
    await assert.rejects(
      spaceRestore(rootA, backupDir),
      (e) => isCotalError(e, "backup_unreadable"),
    );
  } finally {
    await down(rootA);
    await down(rootB);
    for (const d of [rootA, rootB, backupDir.replace(/\/bk$/, "")]) await removeTempDir(d);
  }
});
