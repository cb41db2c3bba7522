/**
 * The contract between a user-mode supervisor and its space's auth service: how the supervisor
 * asks for its agents' ledger rows and bearers. The auth service takes a request on
 * `POST {@linkcode AGENT_BEARER_PATH}` only when it carries a request proof
 * (lib/trust/request_proof.ts) by a `supervisor` credential of the space, fresh and used once;
 * everything it grants is for the one owner it keeps for supervised agents, so a supervisor can
 * never speak as an IdP user.
 *
 * Both ends import this module: the auth service (lib/auth) and the manager (lib/manager) are
 * siblings that may not import each other.
 *
 * @module
 */
import type { MsgHdrs } from "nats";
import { headers as natsHeaders } from "nats";
import { proveRequest, type RequestProver, type RequestRail } from "./request_proof.ts";

/** The auth service's path for supervisor requests. */
export const AGENT_BEARER_PATH = "/agents";

/** The rail's proof rule: its signing context, the one profile admitted, and its refusal. */
export const AGENT_BEARER_RAIL: RequestRail = Object.freeze({
  context: "cotal-agent-bearer-request-v1",
  profiles: Object.freeze(["supervisor"]),
  code: "agent_bearer_refused",
  what: "agent bearer request",
  hint: "Only the space's supervisor asks for its agents' bearers, with its own cred.",
});

/** What the subject of the signature is for every request (HTTP carries no NATS subject). */
export const AGENT_BEARER_SUBJECT = `POST ${AGENT_BEARER_PATH}`;

/**
 * Connects one bearer principal is admitted (frozen): 64 at once, then 64 a minute. The auth
 * callout holds every principal to it, and a user-mode agent's relay holds its agent to it
 * before a connect reaches the broker, so a hostile agent's reconnect loop costs the callout
 * (which every human's login shares) nothing past it.
 */
export const BEARER_CONNECT_RATE: Readonly<{ perSecond: number; burst: number }> = Object.freeze({
  perSecond: 64 / 60,
  burst: 64,
});

/** Largest request body the auth service reads on this path, in bytes. */
export const MAX_AGENT_BEARER_BODY_BYTES = 32 * 1024;

/** The channel grants of one supervised agent, as its ledger row holds them. */
export interface AgentBearerGrant {
  readonly subscribe: readonly string[];
  readonly allowSubscribe: readonly string[];
  readonly allowPublish: readonly string[];
  readonly role?: string;
}

/**
 * One request. `hello` answers the owner the service keeps for supervised agents and the
 * sentinel creds a bearer rides on; `grant` writes (or rewrites) an agent's row for one
 * lifecycle; `bearer` issues a bearer for the row of that lifecycle; `revoke` removes the row
 * if it is still that lifecycle's.
 */
export type AgentBearerRequest =
  & {
    /** The supervisor's principal (its cred's tags must name it). */
    readonly caller: { readonly owner: string; readonly actor: string };
    /** Unique per request: a copy is refused. */
    readonly nonce: string;
  }
  & (
    | { readonly op: "hello" }
    | {
      readonly op: "grant";
      readonly actor: string;
      readonly lifecycleUid: string;
      readonly grant: AgentBearerGrant;
    }
    | { readonly op: "bearer" | "revoke"; readonly actor: string; readonly lifecycleUid: string }
  );

/** `hello`'s answer. */
export interface AgentBearerHello {
  /** The owner every supervised agent of this space is granted under. */
  readonly owner: string;
  /** The callout account's sentinel creds: a bearer is presented with them. */
  readonly sentinelCreds: string;
}

/** `bearer`'s answer: the bearer and when it expires (Unix seconds). */
export interface AgentBearerIssued {
  readonly token: string;
  readonly exp: number;
}

const PROOF_NAMES = ["Cotal-Caller-Jwt", "Cotal-Ts", "Cotal-Sig"] as const;

/** The HTTP headers proving `prover` sends `body` on the rail now. */
export async function proveAgentBearerRequest(
  prover: RequestProver,
  body: Uint8Array,
  now = Date.now(),
): Promise<Headers> {
  const h = await proveRequest(prover, AGENT_BEARER_RAIL.context, AGENT_BEARER_SUBJECT, body, now);
  const out = new Headers();
  for (const name of PROOF_NAMES) out.set(name, h.get(name));
  return out;
}

/** The proof headers of an HTTP request, in the form the request verifier reads. */
export function proofHeadersOf(h: Headers): MsgHdrs {
  const out = natsHeaders();
  for (const name of PROOF_NAMES) {
    const v = h.get(name);
    if (v !== null) out.set(name, v);
  }
  return out;
}
