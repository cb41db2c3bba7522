/**
 * Red team 45's shared set-up against `cotal-signer`: a space with its signer running as a real
 * process, an honest supervisor asking it through `remoteSigner`, and a loop measuring how many
 * of the honest supervisor's requests are answered (and how) while an attack runs. Not a test
 * file (leading underscore).
 */
import type { NatsConnection } from "nats";
import { isCotalError } from "../../lib/errors.ts";
import { type RemoteSigner, remoteSigner } from "../../lib/signer/mod.ts";
import { SIGN_RAIL_DURABLE, signRailStream } from "../../lib/signer/rail.ts";
import { mintCreds, mintWith, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import {
  type DaemonProcess,
  type DeliverySpace,
  startDeliverySpace,
} from "../delivery/_helpers.ts";
import { startSigner } from "../signer/_signer.ts";

export const SUPERVISOR = { owner: "local", actor: "manager_rt45" };

/** A space, its running signer and an honest supervisor. */
export interface Rt45Stack {
  s: DeliverySpace;
  daemon: DaemonProcess;
  supCreds: string;
  supNc: NatsConnection;
  signer: RemoteSigner;
  /** The signer's own-profile cred (only to read the rail's stream state in the test). */
  inspectNc: NatsConnection;
  close(): Promise<void>;
}

export async function startRt45(prefix: string, timeoutMs?: number): Promise<Rt45Stack> {
  const s = await startDeliverySpace({ prefix });
  const daemon = startSigner(s);
  const supCreds = await mintCreds(s.auth, newIdentity(), "supervisor", { principal: SUPERVISOR });
  const supNc = await connectBroker({ servers: s.url, creds: supCreds });
  const signer = remoteSigner({
    nc: supNc,
    space: s.space,
    principal: SUPERVISOR,
    creds: () => supCreds,
    ...(timeoutMs ? { timeoutMs } : {}),
  });
  const inspectNc = await connectBroker({
    servers: s.url,
    creds: await s.mint("signer", { principal: { owner: "local", actor: "signer" } }),
  });
  await daemon.waitForLine(/cotal-signer up for space/, 30_000);
  return {
    s,
    daemon,
    supCreds,
    supNc,
    signer,
    inspectNc,
    async close() {
      signer.close();
      for (const c of [supNc, inspectNc]) await c.close().catch(() => {});
      daemon.child.kill("SIGTERM");
      const t = setTimeout(() => daemon.child.kill("SIGKILL"), 10_000);
      await daemon.child.status;
      clearTimeout(t);
      await s[Symbol.asyncDispose]();
    },
  };
}

/** One honest agent mint through `signer`; the error code when it fails. */
export async function honestMint(signer: RemoteSigner): Promise<string | undefined> {
  try {
    await mintWith(signer, newIdentity(), "agent", {
      principal: { owner: "local", actor: "honest" },
      lifecycleUid: newLifecycleUid(),
    });
    return undefined;
  } catch (err) {
    return isCotalError(err) ? err.code : String(err);
  }
}

/** Honest requests one after another while `running()`; tallies of outcomes and latencies. */
export function honestLoop(signer: RemoteSigner, running: () => boolean) {
  const tally = { ok: 0, failed: 0, codes: {} as Record<string, number>, maxMs: 0 };
  const done = (async () => {
    while (running()) {
      const t0 = Date.now();
      const code = await honestMint(signer);
      tally.maxMs = Math.max(tally.maxMs, Date.now() - t0);
      if (code === undefined) tally.ok++;
      else {
        tally.failed++;
        tally.codes[code] = (tally.codes[code] ?? 0) + 1;
      }
    }
  })();
  return { tally, done };
}

/** The rail stream's message count and the signer durable's pending count. */
export async function railState(
  nc: NatsConnection,
  space: string,
): Promise<{ msgs: number; bytes: number; first: number; last: number; pending: number }> {
  const jsm = await nc.jetstreamManager();
  const si = await jsm.streams.info(signRailStream(space));
  const ci = await jsm.consumers.info(signRailStream(space), SIGN_RAIL_DURABLE);
  return {
    msgs: si.state.messages,
    bytes: si.state.bytes,
    first: si.state.first_seq,
    last: si.state.last_seq,
    pending: ci.num_pending,
  };
}

/**
 * A subject of the supervisor's rail as a member can name it: the rail's subjects carry a token
 * only the space's signing key computes (lib/trust/sign_rail_token.ts), so a member aims at the
 * token-less form red team 45 first used (even `i`) or at a token it made up (odd `i`).
 */
export function guessed(root: string, side: "req" | "reply", i: number): string {
  const made = i % 2 === 0 ? "" : `${"0123456789abcdef".repeat(2)}.`;
  return `${root}.sign.${side}.${made}${SUPERVISOR.owner}.${SUPERVISOR.actor}.g${i}`;
}
