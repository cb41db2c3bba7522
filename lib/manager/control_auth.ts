/**
 * Proof of the caller on every control request. The control rail's subject names the caller,
 * and the broker lets only control-caller creds publish there; but the broker never checks a
 * reply subject, so a member can aim a broker answer (a publish ack, an API reply, a status)
 * at the rail's subjects. A subject alone therefore does not prove who sent a command. Each
 * request carries its caller's user JWT and an ed25519 signature, made with that JWT's key,
 * over the subject, a timestamp and the body's hash; the manager takes the request only when
 * the JWT is a control-caller's signed by the space's account, names the subject's caller,
 * and the signature verifies within a frozen window, and a command with effects once.
 *
 * @module
 */
import { headers as natsHeaders, type MsgHdrs } from "nats";
import { CotalError } from "../errors.ts";
import { base64urlDecode, base64urlEncode } from "../nats/base64url.ts";
import { parseCreds } from "../nats/creds.ts";
import { decodeJwt } from "../nats/jwt.ts";
import { publicKeyFromSeed } from "../nats/nkeys.ts";
import { seedSigner, type Signer, verifySignature } from "../nats/signer.ts";
import type { SpaceAuth } from "../trust/types.ts";

/** How far a request's timestamp may be from the manager's clock (frozen: no request widens it). */
export const CONTROL_PROOF_WINDOW_MS = 60_000;
/** The most nonces of commands with effects remembered inside the window. */
export const CONTROL_REPLAY_CAP = 100_000;
/** The only credential profile whose holder may command a manager. */
export const CONTROL_CALLER_PROFILE = "control-caller";

const H_JWT = "Cotal-Caller-Jwt";
const H_TS = "Cotal-Ts";
const H_SIG = "Cotal-Sig";
const CONTEXT = "cotal-control-request-v1";
const ENCODER = new TextEncoder();

async function signingInput(subject: string, ts: number, body: Uint8Array): Promise<Uint8Array> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", body as BufferSource));
  return ENCODER.encode(`${CONTEXT}\n${subject}\n${ts}\n${base64urlEncode(hash)}`);
}

/** What a caller signs with: its JWT and its key. */
export interface ControlProver {
  readonly jwt: string;
  readonly signer: Signer;
}

/** The prover of the holder of `creds` (a control-caller credential). */
export async function controlProver(creds: string): Promise<ControlProver> {
  const { jwt, seed } = await parseCreds(creds);
  return { jwt, signer: await seedSigner(seed) };
}

/** The headers proving that `prover` sends `body` on `subject` now. */
export async function proveControlRequest(
  prover: ControlProver,
  subject: string,
  body: Uint8Array,
  now = Date.now(),
): Promise<MsgHdrs> {
  const sig = await prover.signer.sign(await signingInput(subject, now, body));
  const h = natsHeaders();
  h.set(H_JWT, prover.jwt);
  h.set(H_TS, String(now));
  h.set(H_SIG, base64urlEncode(sig));
  return h;
}

/** The keys a manager trusts to sign its callers' JWTs. */
export interface ControlTrust {
  /** The space's account public key (`A…`). */
  readonly accountPub: string;
  /** Keys that may sign user JWTs of the account: the account key and its signing keys. */
  readonly issuers: readonly string[];
}

/** The keys of `auth`'s account: its own and its signing key. */
export async function controlTrustOf(
  auth: Pick<SpaceAuth, "account">,
): Promise<ControlTrust> {
  const { pub, signingSeed } = auth.account;
  const signingPub = (auth.account as { signingPub?: string }).signingPub ??
    await publicKeyFromSeed(signingSeed);
  return { accountPub: pub, issuers: [pub, signingPub] };
}

function refuse(detail: string): never {
  throw new CotalError(
    "unauthenticated_request",
    `The control request was refused: ${detail}. Send commands with ManagerClient and ` +
      `control-caller creds of this space (cotal ps, cotal spawn do).`,
  );
}

/** Checks control requests against a space's keys and remembers the nonces of commands. */
export class ControlVerifier {
  readonly #trust: ControlTrust;
  readonly #now: () => number;
  /** nonce → when it may be forgotten (its timestamp plus the window). */
  readonly #seen = new Map<string, number>();

  constructor(trust: ControlTrust, opts: { now?: () => number } = {}) {
    this.#trust = trust;
    this.#now = opts.now ?? Date.now;
  }

  /**
   * Resolves when `headers` prove that a control-caller of this space named `caller` sent
   * `body` on `subject` within the window; throws `unauthenticated_request` otherwise. With
   * `once`, a nonce seen before is refused (a replay of a command with effects).
   */
  async verify(
    subject: string,
    body: Uint8Array,
    headers: MsgHdrs | undefined,
    caller: { owner: string; actor: string },
    nonce: string,
    once: boolean,
  ): Promise<void> {
    const jwt = headers?.get(H_JWT) ?? "";
    const tsText = headers?.get(H_TS) ?? "";
    const sig = base64urlDecode(headers?.get(H_SIG) ?? "");
    if (!jwt || !tsText || !sig) refuse("it carries no caller proof");
    const ts = Number(tsText);
    const now = this.#now();
    if (!Number.isSafeInteger(ts) || Math.abs(now - ts) > CONTROL_PROOF_WINDOW_MS) {
      refuse(
        `its timestamp is more than ${CONTROL_PROOF_WINDOW_MS / 1000} s from the manager's clock`,
      );
    }
    let claims;
    try {
      claims = await decodeJwt(jwt, { type: "user", now: Math.floor(now / 1000) });
    } catch (err) {
      refuse(`its caller JWT does not verify (${(err as Error).message})`);
    }
    const { accountPub, issuers } = this.#trust;
    if (!issuers.includes(claims.iss)) refuse("its caller JWT is not signed by this space");
    if (claims.iss !== accountPub && claims.nats.issuer_account !== accountPub) {
      refuse("its caller JWT names another account");
    }
    if (claims.name !== CONTROL_CALLER_PROFILE) {
      refuse(`its caller JWT is a ${JSON.stringify(claims.name)} credential, not control-caller`);
    }
    const tags = claims.nats.tags ?? [];
    if (!tags.includes(`owner:${caller.owner}`) || !tags.includes(`actor:${caller.actor}`)) {
      refuse("its caller JWT names another caller than its subject");
    }
    if (!await verifySignature(claims.sub, await signingInput(subject, ts, body), sig)) {
      refuse("its signature does not verify");
    }
    if (!once) return;
    this.#forget(now);
    if (this.#seen.has(nonce)) refuse("its nonce was used before (a replay)");
    if (this.#seen.size >= CONTROL_REPLAY_CAP) refuse("too many commands inside the window");
    this.#seen.set(nonce, ts + CONTROL_PROOF_WINDOW_MS);
  }

  #forget(now: number): void {
    // Insertion order is arrival order, near enough timestamp order: stop at the first that
    // still counts (a replay past its window fails the timestamp check anyway).
    for (const [nonce, until] of this.#seen) {
      if (until >= now) break;
      this.#seen.delete(nonce);
    }
  }
}
