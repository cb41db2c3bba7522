/**
 * Red team 20c: blind the connection cap with a fat CONNZ. The membership feed enforces the
 * per-cred connection cap (64) from an account CONNZ scan that asks for every connection's
 * subscription list, and skips the cap whenever that scan is incomplete (no reply within 1.5 s,
 * a cut observer connection). A member with its own agent cred subscribes 1000 times (its cap)
 * under its own `_INBOX_<key>.>` with ~4 KB subjects on a few connections: each connection then
 * weighs ~4 MB in every CONNZ page. Then it opens far more connections than the cap on the same
 * cred. The defence holds if the extras are still kicked and the feed's heartbeat still moves.
 * Result when written: 48 fat connections (~190 MB of CONNZ) made every sweep incomplete; 168
 * connections stood on the one cred for 45 s and the feed's heartbeat was 49 s old, silently
 * (the feed stays `up` with `lastIncomplete`); 24 fat connections (~96 MB) did the same, 12 did
 * not. The reply is one message: the broker drops the daemon's `$SYS` observer connection
 * rather than deliver it, so no sweep completes while the fat connections stand. Same on
 * nats-server 2.10.27 and 2.15.1.
 * The cap was fixed first (counted from a scan without subscription lists); the view stayed
 * frozen. Now the listing asks only for connections with chat interest, and when a listing does
 * not arrive the rows keep its last channels, dated, while who is connected stays current. The
 * view is judged twice: with the fat subscriptions alone (the listing leaves them out) and with
 * a chat subscription on every fat connection too (the listing cannot arrive). Either way the
 * heartbeat moves and a member who connects during the attack gets its row.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { connect } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { MAX_CONNECTIONS_PER_CRED } from "../../lib/delivery/conn_cap.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { bucketNames, kvStreamName } from "../../lib/wire/resources.ts";
import { chatReadFilter } from "../../lib/wire/subjects.ts";
import {
  connectAs,
  credSubject,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

const FAT = 32;
const SUBJ = 3_900;

async function fatAttack(judge: "cap" | "view", chatToo = false): Promise<void> {
  await using s = await startDeliverySpace({ prefix: "rt20cfat" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const key = credSubject(mallory.creds);
  const conns: NatsConnection[] = [];
  const obsCreds = await s.mint("observer");
  const obs = await connect({
    servers: s.url,
    authenticator: credsAuthenticatorFast(obsCreds),
    inboxPrefix: `_INBOX_${credSubject(obsCreds)}`,
  }).catch(() => undefined);
  try {
    await daemon.waitForLine(/membership feed up/, 40_000);
    const pad = "x".repeat(SUBJ);
    for (let k = 0; k < FAT; k++) {
      const nc = await connectAs(s.url, mallory.creds);
      conns.push(nc);
      if (chatToo) nc.subscribe(chatReadFilter(s.space, "general"));
      for (let i = chatToo ? 1 : 0; i < 1000; i++) nc.subscribe(`_INBOX_${key}.${pad}.${i}`);
      await nc.flush();
    }
    // Far past the cap on the same cred.
    for (let i = 0; i < 120; i += 40) {
      const batch = await Promise.allSettled(
        Array.from({ length: 40 }, () => connectAs(s.url, mallory.creds)),
      );
      for (const b of batch) if (b.status === "fulfilled") conns.push(b.value);
    }
    const open = () => conns.filter((c) => !c.isClosed()).length;
    console.log(`mallory holds ${open()} connections`);
    let ok = true;
    let hbAge = -1;
    try {
      await waitFor(() => open() <= MAX_CONNECTIONS_PER_CRED, {
        what: `mallory's connections back to the cap of ${MAX_CONNECTIONS_PER_CRED}`,
        timeoutMs: 45_000,
      });
    } catch {
      ok = false;
    }
    console.log(`after the wait mallory holds ${open()} connections`);
    console.log(
      daemon.stderr().split("\n").filter((l) => /cap|feed|CONNZ/.test(l)).slice(-8).join("\n"),
    );
    // The feed's heartbeat, as the delivery daemon's own bucket reader sees it.
    if (obs) {
      const jsm = await obs.jetstreamManager();
      const bucket = bucketNames(s.space).membership;
      const hb = await jsm.streams.getMessage(kvStreamName(bucket), {
        last_by_subj: `$KV.${bucket}.=feed`,
      }).catch(() => undefined);
      const at = hb ? JSON.parse(new TextDecoder().decode(hb.data)).observedAt : 0;
      hbAge = Date.now() - at;
      console.log(`feed heartbeat ${hbAge} ms old`);
    }
    if (judge === "view") {
      // The sweep runs every 15 s and on every connect: a heartbeat over 30 s old is frozen.
      assert.ok(hbAge >= 0 && hbAge < 30_000, `the membership feed's heartbeat is ${hbAge} ms old`);
      // A member who arrives during the attack is seen.
      const alice = await s.agent("alice");
      const nc = await connectAs(s.url, alice.creds);
      conns.push(nc);
      nc.subscribe(chatReadFilter(s.space, "general"));
      await nc.flush();
      const jsm = await obs!.jetstreamManager();
      const bucket = bucketNames(s.space).membership;
      await waitFor(async () => {
        const row = await jsm.streams.getMessage(kvStreamName(bucket), {
          last_by_subj: `$KV.${bucket}.${alice.principal.owner}.${alice.principal.actor}`,
        }).catch(() => undefined);
        return row !== undefined && row.data.length > 0;
      }, { what: "the arriving member's row in the membership view", timeoutMs: 40_000 }).catch(
        async (e) => {
          console.log(
            "the daemon's log, last lines:\n" + daemon.stderr().split("\n").slice(-15).join("\n"),
          );
          const keys = [];
          for await (
            const k of await (await obs!.jetstream().views.kv(bucket, { bindOnly: true })).keys()
          ) keys.push(k);
          console.log("the membership rows:", keys);
          throw e;
        },
      );
      return;
    }
    assert.ok(
      ok,
      `mallory still holds ${open()} connections past the cap of ${MAX_CONNECTIONS_PER_CRED}`,
    );
  } finally {
    await Promise.all(conns.map((c) => c.close().catch(() => {})));
    await obs?.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
}

Deno.test("redteam20c - fat subscription lists do not blind the per-cred connection cap", () =>
  fatAttack("cap"));

Deno.test({
  name: "redteam20c - fat subscription lists do not freeze the membership view",
  fn: () => fatAttack("view"),
});

Deno.test({
  name:
    "redteam20c - fat subscription lists beside a chat subscription do not freeze the membership view",
  fn: () => fatAttack("view", true),
});
