/**
 * `remoteSigner`: a {@linkcode CredentialSigner} that asks the space's `cotal-signer` over the
 * broker, so the caller never holds a signing seed. Each request is proven with the caller's
 * own creds (its JWT and a signature by its key); the answer comes on the caller's reply rail.
 *
 * @module
 */
import { codeFrom, CotalError } from "../errors.ts";
import {
  proveRequest,
  type RequestProver,
  requestProver,
  signRail,
  spaceNames,
} from "../trust/mod.ts";
import type { CredentialSigner, SignRequest } from "../trust/mod.ts";
import { SIGN_CONTEXT, type SignWireRequest } from "./serve.ts";
import { decodeJwtUnverified, parseCreds } from "../nats/mod.ts";

/** How long a signing request waits for the signer by default. */
export const SIGN_TIMEOUT_MS = 10_000;
/**
 * A request the signer has not answered is sent again this often, as a new request (a new nonce
 * and proof), within {@linkcode SIGN_TIMEOUT_MS}: one published while the signer was being
 * restarted (the watchdog's ~1 s) reached nobody and was lost (fault pass 9). The first answer
 * wins; a copy the signer answered too is one more audited signature of the same public key.
 */
export const SIGN_RESEND_MS = 2_000;

/**
 * What a remote signer needs of a broker connection: a subscription to its reply rail and a
 * publish with headers (npm:nats's `NatsConnection` has both).
 */
export interface SignerConnection {
  /** Subscribes `subject`, calling `callback` with each message. */
  subscribe(
    subject: string,
    opts: { callback: (err: unknown, msg: { subject: string; data: Uint8Array }) => void },
  ): { unsubscribe(): void };
  /** Publishes `data` on `subject` with `headers` (the caller proof). */
  publish(subject: string, data: Uint8Array, opts?: { headers?: unknown }): void;
}

/** Options of {@linkcode remoteSigner}. */
export interface RemoteSignerOptions {
  /** A connection holding the caller's creds (their grants reach the signer rail). */
  readonly nc: SignerConnection;
  /** The space whose signer is asked. */
  readonly space: string;
  /** The caller's principal, as its creds name it. */
  readonly principal: { readonly owner: string; readonly actor: string };
  /** The caller's current creds text (renewed creds are picked up on the next request). */
  readonly creds: () => string | Promise<string>;
  /** How long one request waits for the signer; default {@linkcode SIGN_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
}

/** A signer behind the broker; `close()` ends its reply subscription. */
export interface RemoteSigner extends CredentialSigner {
  /** Ends the reply subscription; later requests time out. */
  close(): void;
}

/** The rail token `creds`' grants carry, or a refusal saying the creds cannot reach the rail. */
async function railTokenOf(creds: string, root: string): Promise<string> {
  let token: string | undefined;
  try {
    const claims = decodeJwtUnverified((await parseCreds(creds)).jwt);
    token = claims.nats.type === "user"
      ? signRail.tokenIn(root, claims.nats.pub?.allow)
      : undefined;
  } catch {
    token = undefined;
  }
  if (!token) {
    throw new CotalError(
      "signer_rail_unknown",
      "The caller's creds grant no way to the signer's rail (they are not a supervisor's of this space, or were signed before the rail had a token); sign them again (cotal up does, as does the signer at its start).",
    );
  }
  return token;
}

/**
 * Asks the space's signer for each JWT.
 *
 * @example
 * ```ts
 * const signer = remoteSigner({ nc, space, principal, creds: () => myCreds });
 * const creds = await mintWith(signer, newIdentity(), "agent", { lifecycleUid, principal });
 * ```
 */
export function remoteSigner(opts: RemoteSignerOptions): RemoteSigner {
  const root = spaceNames(opts.space).root;
  const { owner, actor } = opts.principal;
  const timeoutMs = opts.timeoutMs ?? SIGN_TIMEOUT_MS;
  const waiting = new Map<string, (body: unknown) => void>();
  // The reply rail names the rail's token, which the caller learns from its own creds' grants
  // (lib/trust/sign_rail_token.ts); subscribed on the first request, again if the token changes
  // (the space's signing key was rotated).
  let rail: { token: string; sub: { unsubscribe(): void } } | undefined;
  let closed = false;
  const railFor = async (creds: string): Promise<string> => {
    const token = await railTokenOf(creds, root);
    if (rail?.token === token) return token;
    rail?.sub.unsubscribe();
    const replyPrefix = `${root}.sign.reply.${token}.${owner}.${actor}.`;
    const sub = opts.nc.subscribe(signRail.reply(root, token, owner, actor, "*"), {
      callback: (_err, m) => {
        const done = waiting.get(m.subject.slice(replyPrefix.length));
        if (!done) return;
        try {
          done(JSON.parse(new TextDecoder().decode(m.data)));
        } catch {
          // Not an answer of the signer's: keep waiting for the real one.
        }
      },
    });
    rail = { token, sub };
    return token;
  };

  // The caller's key, imported once per creds text (they change only on renewal).
  let prover: { creds: string; prover: Promise<RequestProver> } | undefined;
  const proverFor = (creds: string) => {
    if (prover?.creds !== creds) prover = { creds, prover: requestProver(creds) };
    return prover.prover;
  };

  const sign = async (req: SignRequest): Promise<string> => {
    const { expiresAt, connId, ...rest } = req.opts ?? {};
    if (connId !== undefined && connId !== req.publicKey) {
      throw new CotalError(
        "signer_bad_request",
        "A remote signer signs creds whose inbox is their own key; drop the connId option.",
      );
    }
    const wireOpts = expiresAt === undefined
      ? rest
      : { ...rest, expiresInSeconds: expiresAt - Math.floor(Date.now() / 1000) };
    const body: SignWireRequest = {
      v: 1,
      publicKey: req.publicKey,
      profile: req.profile,
      opts: wireOpts,
    };
    const data = new TextEncoder().encode(JSON.stringify(body));
    const nonces: string[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    let resend: ReturnType<typeof setInterval> | undefined;
    try {
      const answer = await new Promise<unknown>((resolve, reject) => {
        const send = async () => {
          if (closed) return;
          const creds = await opts.creds();
          const token = await railFor(creds);
          const nonce = crypto.randomUUID().replaceAll("-", "");
          const subject = signRail.request(root, token, owner, actor, nonce);
          nonces.push(nonce);
          waiting.set(nonce, resolve);
          const headers = await proveRequest(
            await proverFor(creds),
            SIGN_CONTEXT,
            subject,
            data,
          );
          opts.nc.publish(subject, data, { headers });
        };
        timer = setTimeout(
          () =>
            reject(
              new CotalError(
                "signer_unreachable",
                `The signer of space ${
                  JSON.stringify(opts.space)
                } did not answer within ${timeoutMs} ms; check that cotal-signer runs (cotal status).`,
              ),
            ),
          timeoutMs,
        );
        resend = setInterval(() => void send().catch(() => {}), SIGN_RESEND_MS);
        send().catch(reject);
      });
      const a = answer as {
        ok?: boolean;
        jwt?: unknown;
        error?: { code?: unknown; message?: unknown };
      };
      if (a.ok === true && typeof a.jwt === "string") return a.jwt;
      throw new CotalError(
        codeFrom(a.error?.code, "signer_failed"),
        typeof a.error?.message === "string"
          ? a.error.message
          : "The signer answered without a JWT.",
      );
    } finally {
      clearTimeout(timer);
      clearInterval(resend);
      for (const n of nonces) waiting.delete(n);
    }
  };

  return {
    space: opts.space,
    where: "remote",
    sign,
    close: () => {
      closed = true;
      rail?.sub.unsubscribe();
    },
  };
}
