/**
 * Red team 22: a member with its own agent cred (no relay, no guard) aims `$JS.API.INFO`
 * answers at made-up subjects *under* a real role's task filter: `cotal.<s>.svc.<role>.<n>.<~60
 * KiB token>`. TASK captures `cotal.<s>.svc.>` and the role's `svc_<role>` queue filters
 * `cotal.<s>.svc.<role>.>`, so interest retention keeps every one; each subject is distinct, so
 * the per-subject cap (256) never applies, and the stored size counts the fat subject. TASK
 * (256 MiB, discard new) refuses new tasks once full — for every role of the space, not one
 * pair. The storage warden is meant to delete such junk "within about a second"; it reads
 * every message through one consumer (5 s budget a sweep) and purges subject by subject.
 * The same works on DM (`cotal.<s>.inst.<recipient>.>`, 512 MiB).
 *
 * The defence holds when, with the member flooding for 40 s, TASK stays under 90 % of its cap
 * and an honest member's task to another role is accepted.
 *
 * Observed (nats-server 2.15.1): TASK at 100 % of 256 MiB after 11-21 s (~4,400 fat plus
 * short answers, ~8,800 messages); 5 of 5 honest tasks to role "review" refused during the
 * flood and the next 11 of 15 after it stopped (the stream still 100 % full); the warden
 * deleted 33, then 137 junk messages per ~13 s sweep cycle (fat subjects make its read slow):
 * clearing the rest takes over ten minutes.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { buildMessage, publishMessage, streamNames } from "../../lib/wire/mod.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

const LONG = "t".repeat(60_000);

async function aim(nc: NatsConnection, subjectPrefix: string, from: number, n: number) {
  for (let i = from; i < from + n; i++) {
    nc.publish("$JS.API.INFO", new Uint8Array(), { reply: `${subjectPrefix}.${i}.${LONG}` });
    if (i % 50 === 49) await nc.flush();
  }
  await nc.flush();
}

Deno.test({
  name:
    "redteam22 - fat-subject aimed answers under one role's filter do not fill TASK for every role (skipped: known gap, not fixed; a member's own connection may name any reply subject and the broker's answers, JetStream acks and API replies, are stored by whichever stream captures it: NATS checks no permission on reply subjects, the 64 KiB control line a JWT needs lets each answer's subject be ~60 KiB, and only the sandbox relay refuses such requests)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt22task" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  await s.agent("worker", { role: "build" });
  await s.agent("reviewer", { role: "review" });
  const alice = await s.agent("alice");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const reader = await connectAs(s.url, s.deliveryCreds);
  const jsm = await reader.jetstreamManager();
  const task = streamNames(s.space).task;
  let flooding = true;
  let sentN = 0;
  let flood: Promise<void> = Promise.resolve();
  try {
    await daemon.waitForLine(/delivery daemon up/);
    flood = (async () => {
      while (flooding) {
        await aim(mn, `cotal.${s.space}.svc.build`, sentN, 200).catch(() => {});
        sentN += 200;
        // And short ones, which fill what room the fat ones leave.
        for (let i = 0; i < 200; i++) {
          mn.publish("$JS.API.INFO", new Uint8Array(), {
            reply: `cotal.${s.space}.svc.build.s${sentN}.${i}`,
          });
        }
        await mn.flush().catch(() => {});
      }
    })();
    const t0 = Date.now();
    let fill = 0;
    let peak = 0;
    while (Date.now() - t0 < 40_000) {
      await new Promise((r) => setTimeout(r, 2000));
      const si = await jsm.streams.info(task);
      fill = si.state.bytes / si.config.max_bytes;
      peak = Math.max(peak, fill);
      console.log(
        `t+${
          Math.round((Date.now() - t0) / 1000)
        }s sent ${sentN}; TASK ${si.state.messages} msgs, ` +
          `${(100 * fill).toFixed(1)}% full`,
      );
      if (fill > 0.99) break;
    }
    // Honest tasks to another role, one a second: five while the member keeps at it, then
    // fifteen after it stopped (what the warden gives back, and how fast).
    const sendTask = async (i: number) => {
      const msg = buildMessage({
        space: s.space,
        from: { id: alice.id, name: alice.name },
        toService: "review",
        text: `please review ${i}`,
      });
      try {
        await publishMessage(an, msg);
        return undefined;
      } catch (e) {
        return e;
      }
    };
    let refused = 0;
    let err: unknown;
    for (let i = 0; i < 5; i++) {
      const e = await sendTask(i);
      if (e) refused++, err ??= e;
      await new Promise((r) => setTimeout(r, 1000));
    }
    flooding = false;
    await flood;
    const after: string[] = [];
    for (let i = 0; i < 15; i++) {
      const e = await sendTask(100 + i);
      if (e) refused++, err ??= e;
      const si = await jsm.streams.info(task);
      after.push(
        `${e ? "refused" : "ok"}@${(100 * si.state.bytes / si.config.max_bytes).toFixed(0)}%`,
      );
      await new Promise((r) => setTimeout(r, 1000));
    }
    console.log(
      `peak ${
        (100 * peak).toFixed(1)
      }%; alice's tasks to "review": ${refused} of 20 refused (${err}); after the flood stopped: ${
        after.join(" ")
      }`,
    );
    console.log(
      daemon.stderr().split("\n").filter((l) => /warden|aimed/.test(l)).slice(-6).join("\n"),
    );
    assert.equal(refused, 0, `honest tasks to another role were refused: ${err}`);
    assert.ok(peak < 0.9, `TASK reached ${(100 * peak).toFixed(1)}% of its cap`);
  } finally {
    flooding = false;
    await flood;
    for (const c of [mn, an, reader]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
