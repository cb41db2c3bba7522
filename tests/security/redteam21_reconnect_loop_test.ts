/**
 * Red team 21: the per-cred cap (64) kicks a cred's extras through $SYS KICK but commits no
 * deny-new, so a client that simply reconnects (nats.js default behaviour, here 50 ms) is back
 * at once. One agent cred opens 150 small connections with auto-reconnect; the broker's own
 * count of that cred is sampled every 5 s for 75 s. A sound system keeps it at <= 64 in nearly
 * every sample. The test passes when the defence holds.
 * Result when written: 150/150 in every sample for 40-75 s; the daemon logged "86 connections
 * over the cap ... kicked 86" about once a second, forever (3.4 s of CPU per 40 s), and opened a
 * fresh $SYS evictor connection for each round. The cap has no deny-new behind it.
 */
import assert from "node:assert/strict";
import { connect, type NatsConnection } from "nats";
import { MAX_CONNECTIONS_PER_CRED } from "../../lib/delivery/conn_cap.ts";
import {
  credsAuthenticatorFast,
  MEMBERSHIP_INBOX_PREFIX,
  mintMembershipObserverCreds,
  newIdentity,
} from "../../lib/trust/mod.ts";
import { bucketNames, kvStreamName } from "../../lib/wire/resources.ts";
import { credSubject, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

const N = Number(Deno.env.get("RT21_N") ?? 150);
const HOLD_MS = Number(Deno.env.get("RT21_HOLD") ?? 75_000);

Deno.test({
  name:
    "redteam21 - a cred whose kicked connections reconnect at once stays at the per-cred cap (skipped: known gap, not fixed; the cap kicks a cred's extras, but nothing refuses its next connection: NATS has no per-user connection limit, and refusing a static cred at the broker needs the account's revocation list, which only the space's signer could sign)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt21recon" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const key = credSubject(mallory.creds);
  const jwtLen = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(mallory.creds)![1].length;
  const nameLen = 8;
  const name = "n".repeat(nameLen);
  const sys = await connect({
    servers: s.url,
    authenticator: credsAuthenticatorFast(await mintMembershipObserverCreds(s.auth, newIdentity())),
    inboxPrefix: MEMBERSHIP_INBOX_PREFIX,
  });
  const obsCreds = await s.mint("observer");
  const obs = await connect({
    servers: s.url,
    authenticator: credsAuthenticatorFast(obsCreds),
    inboxPrefix: `_INBOX_${credSubject(obsCreds)}`,
  }).catch(() => undefined);
  // The broker's own count of mallory's connections (a one-entry CONNZ: its `total`).
  const brokerCount = async (): Promise<number> => {
    const r = await sys.request(
      `$SYS.REQ.ACCOUNT.${s.auth.account.pub}.CONNZ`,
      JSON.stringify({ limit: 4096, auth: true }),
      { timeout: 5000 },
    );
    const body = JSON.parse(new TextDecoder().decode(r.data));
    return (body.data.connections as { jwt?: string }[]).filter((c) =>
      c.jwt &&
      JSON.parse(atob(c.jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub === key
    ).length;
  };
  // The daemon's CPU time (utime+stime, clock ticks) from /proc.
  const cpu = () => {
    const f = Deno.readTextFileSync(`/proc/${daemon.child.pid}/stat`).split(") ")[1].split(" ");
    return Number(f[11]) + Number(f[12]);
  };
  const bucket = bucketNames(s.space).membership;
  const hbAge = async () => {
    const jsm = await obs!.jetstreamManager();
    const hb = await jsm.streams.getMessage(kvStreamName(bucket), {
      last_by_subj: `$KV.${bucket}.=feed`,
    }).catch(() => undefined);
    return Date.now() - (hb ? JSON.parse(new TextDecoder().decode(hb.data)).observedAt : 0);
  };
  const conns: NatsConnection[] = [];
  try {
    await daemon.waitForLine(/membership feed up/, 40_000);
    console.log(`name ${nameLen} bytes (jwt ${jwtLen})`);
    const open1 = () =>
      connect({
        servers: s.url,
        authenticator: credsAuthenticatorFast(mallory.creds),
        inboxPrefix: `_INBOX_${key}`,
        name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 50,
        reconnectJitter: 50,
        noAsyncTraces: true,
      });
    const t0 = Date.now();
    for (let i = 0; i < N; i += 50) {
      const batch = await Promise.allSettled(Array.from({ length: 50 }, open1));
      for (const b of batch) {
        if (b.status === "fulfilled") conns.push(b.value);
        else console.log("connect refused:", (b.reason as Error)?.message);
      }
    }
    console.log(
      `opened ${conns.length} in ${Date.now() - t0} ms; broker counts ${await brokerCount()}`,
    );
    const samples: number[] = [];
    const cpu0 = cpu();
    const start = Date.now();
    while (Date.now() - start < HOLD_MS) {
      await new Promise((r) => setTimeout(r, 5000));
      const n = await brokerCount().catch(() => -1);
      samples.push(n);
      console.log(
        `t+${
          Math.round((Date.now() - start) / 1000)
        }s broker counts ${n} of mallory's; feed heartbeat ${await hbAge()} ms old`,
      );
    }
    const age = await hbAge();
    console.log(
      `the daemon used ${(cpu() - cpu0) / 100} s of CPU over ${(Date.now() - start) / 1000} s`,
    );
    console.log(
      `kick rounds logged: ${
        daemon.stderr().split("\n").filter((l) => /over the cap/.test(l)).length
      }`,
    );
    console.log(
      daemon.stderr().split("\n").filter((l) => /cap|feed|CONNZ|listing/.test(l)).slice(-8).join(
        "\n",
      ),
    );
    const over = samples.filter((n) => n > MAX_CONNECTIONS_PER_CRED).length;
    assert.ok(
      over <= 2,
      `the broker counted mallory over the cap of ${MAX_CONNECTIONS_PER_CRED} in ${over} of ${samples.length} samples over ${HOLD_MS} ms: ${samples}`,
    );
    assert.ok(age < 30_000, `the membership feed's heartbeat is ${age} ms old`);
  } finally {
    for (const c of conns) await c.close().catch(() => {});
    await sys.close().catch(() => {});
    await obs?.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
