/**
 * Red team 21: blind the per-cred connection cap and freeze the membership view with fat CONNECT
 * names. The counted scan (no subscription lists, red team 20c's fix) still carries every
 * connection's client-chosen `name`: CONNECT may be ~63 KB under max_control_line 64 KiB, so a
 * name of ~60 KB fits beside an agent JWT. One agent cred opens N connections so named.
 * A sound system keeps kicking the cred down to 64 and the feed's heartbeat moves.
 * The test passes when the defence holds.
 *
 * Env: RT21_N (connections, default 1150), RT21_HOLD (ms sampled), RT21_RECONNECT=0 (kicked
 * connections stay gone, so only a blind cap leaves them standing).
 *
 * Result when written (nats-server 2.15.1):
 * - N=4093, reconnecting: the cred held 4093 of the account's 4096 connections for the whole
 *   72 s sampled (and the ~60 s it took to open them); not one kick in 2+ minutes, nothing in the
 *   daemon's log past "membership feed up"; a victim member's connect was refused ('maximum
 *   account active connections exceeded'), so was the provisioner's; the feed heartbeat was
 *   131 s old. The daemon peaked at 385-578 MB RSS.
 * - N=4093, no reconnect: 4093 held ~65 s (open + 51 s), then one sweep completed and kicked 4029.
 * - nats-server 2.10.27, N=4093, reconnecting: 4084-4085 held for ~50 s with the heartbeat
 *   100+ s old; then a sweep completed and kicks began, but the reconnects kept the cred at
 *   2770-4085 in every sample; the daemon peaked at 603 MB RSS, 15.8 s CPU per 70 s.
 * - N=1150: the scan completes (the cap kicked within ~20 s without reconnect); with reconnect
 *   the count stayed at 1150 (see redteam21_reconnect_loop_test.ts).
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
import {
  connectAs,
  credSubject,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

const N = Number(Deno.env.get("RT21_N") ?? 1150);
const HOLD_MS = Number(Deno.env.get("RT21_HOLD") ?? 75_000);

Deno.test({
  name:
    "redteam21 - fat CONNECT names do not blind the per-cred cap nor freeze the view (skipped: known gap, partly fixed; CONNZ pages of 128 now arrive, and without reconnects 4,093 fat connections were cut to 64 within 30 s of being opened, but the feed's heartbeat went stale while they opened and a cred that reconnects is back at once, as in redteam21_reconnect_loop_test.ts)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt21fat" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const key = credSubject(mallory.creds);
  const jwtLen = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(mallory.creds)![1].length;
  const nameLen = 65536 - jwtLen - 1200;
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
      JSON.stringify({ limit: 1, user: key, auth: false }),
      { timeout: 5000 },
    );
    const body = JSON.parse(new TextDecoder().decode(r.data));
    return (body.data.total as number) - baseline;
  };
  let baseline = 0;
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
    baseline = await brokerCount(); // the space's own connections before mallory's
    console.log(`baseline ${baseline} connections`);
    const open1 = () =>
      connect({
        servers: s.url,
        authenticator: credsAuthenticatorFast(mallory.creds),
        inboxPrefix: `_INBOX_${key}`,
        name,
        // RT21_RECONNECT=0: kicked connections stay gone, so only a blind cap leaves them standing.
        ...(Deno.env.get("RT21_RECONNECT") === "0"
          ? { reconnect: false }
          : { maxReconnectAttempts: -1 }),
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
    let victim = "not tried";
    const cpu = () => {
      const f = Deno.readTextFileSync(`/proc/${daemon.child.pid}/stat`).split(") ")[1].split(" ");
      return Number(f[11]) + Number(f[12]);
    };
    const cpu0 = cpu();
    const start = Date.now();
    while (Date.now() - start < HOLD_MS) {
      await new Promise((r) => setTimeout(r, 5000));
      const n = await brokerCount().catch(() => -1);
      samples.push(n);
      if (samples.length === 2) {
        // A victim member arriving during the attack (the account holds 4096 connections in all).
        victim = await connectAs(s.url, alice.creds).then(
          (nc) => (conns.push(nc), "connected"),
          (e) => `refused: ${(e as Error)?.message}`,
        );
        console.log(`a victim member's connect during the attack: ${victim}`);
      }
      console.log(
        `t+${
          Math.round((Date.now() - start) / 1000)
        }s broker counts ${n} of mallory's; feed heartbeat ${await hbAge()} ms old`,
      );
    }
    const age = await hbAge();
    const st = Deno.readTextFileSync(`/proc/${daemon.child.pid}/status`);
    console.log(
      `the daemon used ${(cpu() - cpu0) / 100} s of CPU over ${(Date.now() - start) / 1000} s`,
    );
    console.log(
      `daemon ${/VmHWM:.*/.exec(st)?.[0]} ${/VmRSS:.*/.exec(st)?.[0]}; mallory's own open: ${
        conns.filter((c) => !c.isClosed()).length
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
      `the broker counted mallory over the cap of ${MAX_CONNECTIONS_PER_CRED} in ${over} of ${samples.length} samples over ${HOLD_MS} ms: ${samples}; a victim's connect during the attack: ${victim}`,
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
