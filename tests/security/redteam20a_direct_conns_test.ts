/**
 * Red team 20a: a member holding its own cred (`cotal mint`, an embedder's agent) connects to the
 * broker directly. The space's account signed no connection limit (`conn: -1`) and only the
 * agent profile carried a subscription cap (1000 per connection), so one agent cred opened 400
 * of 400 connections (the broker's slots are shared by every space and daemon), and one observer
 * cred (`cotal mint --profile observer`) held 200,000 subscriptions on one connection, +300 MiB
 * of broker memory. Each test asserts the defence holds.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { SPACE_MAX_CONNECTIONS } from "../../lib/trust/authorities.ts";
import { CONNECTION_LIMITS, newLifecycleUid, type Profile } from "../../lib/trust/mod.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { waitFor } from "../_harness/broker.ts";
import { MAX_CONNECTIONS_PER_CRED } from "../../lib/delivery/conn_cap.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

Deno.test("redteam20a - one direct agent cred cannot hold hundreds of broker connections: the feed kicks its newest past 64", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20aconn" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const conns: NatsConnection[] = [];
  try {
    await daemon.waitForLine(/membership feed up/, 40_000);
    for (let i = 0; i < 200; i += 50) {
      const batch = await Promise.allSettled(
        Array.from({ length: 50 }, () => connectAs(s.url, mallory.creds)),
      );
      for (const b of batch) if (b.status === "fulfilled") conns.push(b.value);
    }
    const open = () => conns.filter((c) => !c.isClosed()).length;
    await waitFor(() => open() <= MAX_CONNECTIONS_PER_CRED, {
      what: `mallory's connections back to the cap of ${MAX_CONNECTIONS_PER_CRED}`,
      timeoutMs: 30_000,
    });
    // The oldest stand (the first batch of 50 connected before any other): a cred's honest
    // connections are not the ones cut.
    assert.equal(conns.slice(0, 50).filter((c) => c.isClosed()).length, 0);
    await daemon.waitForLine(/over the cap of 64 per cred \(local\.mallory\): kicked/, 10_000);
  } finally {
    await Promise.all(conns.map((c) => c.close().catch(() => {})));
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("redteam20a - a space's account holds at most SPACE_MAX_CONNECTIONS connections, whoever opens them", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20aacct" });
  const limits = (decodeJwtUnverified(s.auth.account.jwt).nats as unknown as {
    limits: Record<string, number>;
  }).limits;
  assert.equal(limits.conn, SPACE_MAX_CONNECTIONS);
  assert.ok(SPACE_MAX_CONNECTIONS > 0 && SPACE_MAX_CONNECTIONS <= 8192);
});

Deno.test("redteam20a - one direct observer cred cannot hold more than 1000 subscriptions on a connection", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20asubs" });
  const P = subjectRoot(s.space);
  const nc = await connectAs(s.url, await s.mint("observer"));
  let refused = 0;
  (async () => {
    for await (const st of nc.status()) if (st.type === "error") refused++;
  })().catch(() => {});
  try {
    const N = 1_200;
    for (let i = 0; i < N; i++) nc.subscribe(`${P}.chat.x${i}.y${i}.c${i}`);
    await nc.flush().catch(() => {});
    // Past the cap each subscription is refused by the broker; the ones within it stand.
    await waitFor(() => refused >= N - 1_000, { what: "the broker's refusals past 1000" });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(refused, N - 1_000);
  } finally {
    await nc.close().catch(() => {});
  }
});

Deno.test("redteam20a - every member and operator profile's cred carries its subscription cap", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20acaps" });
  for (const [profile, cap] of Object.entries(CONNECTION_LIMITS)) {
    const creds = await s.mint(
      profile as Profile,
      profile === "agent"
        ? { principal: { owner: "local", actor: "a" }, lifecycleUid: newLifecycleUid() }
        : {},
    );
    const jwt = /-----BEGIN NATS USER JWT-----\n(\S+)\n/.exec(creds)![1];
    const claims = decodeJwtUnverified(jwt).nats as unknown as { subs?: number };
    assert.equal(claims.subs, cap!.subs, profile);
  }
  for (const p of ["observer", "probe", "control-caller", "admin", "operator"]) {
    assert.ok(p in CONNECTION_LIMITS, `${p} is capped`);
  }
});
