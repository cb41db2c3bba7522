/**
 * Red team 22: the per-cred connection cap (64) kicks a cred's extras once per membership
 * sweep, but commits no deny-new (red team 21's open item, measured there at 150 connections).
 * Taken to its end: one agent cred opens raw NATS connections (a CONNECT with its JWT and the
 * nonce signature, nothing else: no nats.js client per socket) up to the space's account limit
 * (4,096) and re-dials each one the moment it is kicked. Every connect event also restarts the
 * feed's 400 ms debounce, so while the member churns, sweeps run only on the 15 s interval. An
 * honest member then tries to connect once a second.
 *
 * The defence holds when the honest member's connects succeed (at least 90 % of tries over
 * 30 s) while the flood runs.
 *
 * Observed (nats-server 2.15.1): the member held 4,094 of the account's 4,096 connections
 * within 16-20 s; the honest member connected 0 of 25 times over 30 s; the daemon logged not
 * one kick round. The counted CONNZ scan the cap depends on (the same call, made from the
 * test with a $SYS observer) got no answer within its 1.5 s wait, 3 of 3 times ("no server
 * answered CONNZ"), so every sweep was silently incomplete and the cap never ran. With
 * RT22_REDIAL_MS=3000 (slow re-dials, ~700 refused dials in all) the same: 0 of 29, no kick
 * round, 3 of 3 probes unanswered — holding ~4,000 connections is enough, the churn is not
 * needed. (A 2-core machine shared with other jobs; red team 21 saw kicks at 4,093 with pages
 * arriving, so the 1.5 s wait is load-dependent.)
 */
import assert from "node:assert/strict";
import {
  credsAuthenticatorFast,
  MEMBERSHIP_INBOX_PREFIX,
  mintMembershipObserverCreds,
  newIdentity,
} from "../../lib/trust/mod.ts";
import { connect } from "nats";
import { scanConnz } from "../../lib/delivery/connz.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

const ENC = new TextEncoder();
const DEC = new TextDecoder();
const TARGET = Number(Deno.env.get("RT22_CONNS") ?? 4200);
/** Wait before a socket re-dials (ms). */
const REDIAL_MS = Number(Deno.env.get("RT22_REDIAL_MS") ?? 20);

/** One raw connection that re-dials when it is closed, until `stop`. */
function squatter(
  port: number,
  creds: string,
  state: { stop: boolean; open: number; refused: number; dials: number },
) {
  const auth = credsAuthenticatorFast(creds);
  const once = async () => {
    let conn: Deno.TcpConn | undefined;
    let counted = false;
    try {
      state.dials++;
      conn = await Deno.connect({ hostname: "127.0.0.1", port });
      const buf = new Uint8Array(65536);
      let text = "";
      // INFO
      while (!text.includes("\r\n")) {
        const n = await conn.read(buf);
        if (n === null) return;
        text += DEC.decode(buf.subarray(0, n));
      }
      const info = JSON.parse(text.slice(5, text.indexOf("\r\n")));
      const a = auth(info.nonce) as unknown as Record<string, unknown>;
      const connect = {
        verbose: false,
        pedantic: false,
        protocol: 1,
        headers: true,
        no_responders: true,
        name: "sq",
        lang: "raw",
        version: "0",
        ...a,
      };
      await conn.write(ENC.encode(`CONNECT ${JSON.stringify(connect)}\r\nPING\r\n`));
      text = "";
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) break;
        text += DEC.decode(buf.subarray(0, n));
        if (text.includes("-ERR")) {
          if (!counted) state.refused++;
          break;
        }
        if (!counted && text.includes("PONG")) {
          counted = true;
          state.open++;
        }
        if (text.includes("PING\r\n")) await conn.write(ENC.encode("PONG\r\n"));
        text = text.slice(-16);
        if (state.stop) break;
      }
    } catch {
      // closed or refused
    } finally {
      if (counted) state.open--;
      try {
        conn?.close();
      } catch {
        // gone
      }
    }
  };
  return (async () => {
    while (!state.stop) {
      await once();
      if (!state.stop) await new Promise((r) => setTimeout(r, REDIAL_MS));
    }
  })();
}

Deno.test({
  name:
    "redteam22 - one agent cred re-dialling kicked connections does not lock honest members out of the space (skipped: known gap, not fixed; NATS has no per-user connection limit and a kicked cred re-dials at once, as in redteam21_reconnect_loop_test.ts; refusing it needs the cred revoked in the account JWT, which only the signer could sign)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt22squat" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const carol = await s.agent("carol");
  const port = Number(new URL(s.url).port);
  const state = { stop: false, open: 0, refused: 0, dials: 0 };
  const loops: Promise<void>[] = [];
  try {
    await daemon.waitForLine(/membership feed up/, 40_000);
    const t0 = Date.now();
    for (let i = 0; i < TARGET; i++) {
      loops.push(squatter(port, mallory.creds, state));
      if (i % 200 === 199) await new Promise((r) => setTimeout(r, 200));
    }
    while (state.open < 4000 && Date.now() - t0 < 20_000) {
      await new Promise((r) => setTimeout(r, 250));
    }
    console.log(
      `mallory holds ${state.open} after ${Date.now() - t0} ms (${state.refused} refused)`,
    );
    // What the feed's counted scan sees now (the same call, through a $SYS observer of our own).
    const sys = await connect({
      servers: s.url,
      authenticator: credsAuthenticatorFast(
        await mintMembershipObserverCreds(s.auth, newIdentity()),
      ),
      inboxPrefix: MEMBERSHIP_INBOX_PREFIX,
    });
    for (let i = 0; i < 3; i++) {
      const t = Date.now();
      const sc = await scanConnz(sys, s.auth.account.pub, { subscriptions: false });
      console.log(
        `counted scan: complete ${sc.complete} (${sc.reason ?? ""}), ${sc.conns.length} conns, ${
          Date.now() - t
        } ms`,
      );
    }
    await sys.close();
    let ok = 0;
    let tries = 0;
    const samples: number[] = [];
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      tries++;
      try {
        const nc = await Promise.race([
          connectAs(s.url, carol.creds),
          new Promise<never>((_, rej) => setTimeout(() => rej(new Error("timeout")), 2000)),
        ]);
        ok++;
        await nc.close();
      } catch {
        // refused
      }
      samples.push(state.open);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const kicks = daemon.stderr().split("\n").filter((l) => /over the cap/.test(l));
    console.log(
      `carol connected ${ok} of ${tries}; mallory's open connections sampled: ${
        samples.join(",")
      }; dials ${state.dials}, refused ${state.refused}; kick rounds ${kicks.length}`,
    );
    console.log(kicks.slice(-3).join("\n"));
    console.log(daemon.stderr().split("\n").slice(-10).join("\n"));
    assert.ok(ok >= 0.9 * tries, `carol connected only ${ok} of ${tries} times`);
  } finally {
    state.stop = true;
    await Promise.race([Promise.all(loops), new Promise((r) => setTimeout(r, 5000))]);
    daemon.kill();
    await daemon.exited;
  }
});
