/**
 * User mode: a supervisor's agents reach the broker through the space's auth callout, on
 * bearers the auth service issues, instead of creds the supervisor mints. For each agent the
 * supervisor asks the auth service (`POST /agents`, proven by its own cred) for a ledger row
 * under the owner the service keeps for supervised agents, then for bearers of that row, which
 * it keeps in memory and renews at half their life. The agent's relay presents the current one
 * at each connect (lib/manager/sandbox/protocol_guard.ts, `bearer`): no bearer, and no cred that
 * connects, is ever written to disk or handed to the agent.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { TokenBuckets } from "../rate.ts";
import { createAccount, encodeJwt, parseCreds, renderCreds, seedSigner } from "../nats/mod.ts";
import {
  AGENT_BEARER_PATH,
  type AgentBearerHello,
  type AgentBearerIssued,
  BEARER_CONNECT_RATE,
  nonceProver,
  type Principal,
  principalTags,
  proveAgentBearerRequest,
  type RequestProver,
} from "../trust/mod.ts";
import type { JsonObject } from "./control_rail.ts";
import type { AgentPlan } from "./managed_agent.ts";
import { spaceKeyHex } from "../workspace/mod.ts";

/** How long one request to the auth service may take. */
export const AGENT_BEARER_REQUEST_TIMEOUT_MS = 10_000;
/** A bearer is renewed at this fraction of its life, so the relay always holds a fresh one. */
export const AGENT_BEARER_RENEW_FRACTION = 0.5;
/** A bearer this close to its expiry is not presented (the broker's user would die at once). */
export const AGENT_BEARER_MIN_LEFT_MS = 5_000;
/** A failed renewal is tried again after this long, doubling up to a minute. */
export const AGENT_BEARER_RETRY_MS = 2_000;

/** Where a user-mode manager's auth service answers. */
export interface ManagerUserAuth {
  /** The auth service's loopback URL (`http://127.0.0.1:<port>`). */
  readonly url: string;
}

/**
 * The user mode a workspace root asks for when the embedder passes none: a root with the
 * user-auth marker (`<root>/user-auth.json`, what `cotal up --user-auth` writes) runs its agents
 * on the auth service's bearers, at the URL the space's running auth service wrote in its
 * discovery file (`<root>/run/space.<hex>/auth-service.json`); a root without the marker,
 * undefined (static creds). A marked root whose auth service is not running is refused: its
 * agents must not fall back to creds the operator chose not to use.
 */
export async function userAuthOfRoot(
  root: string,
  space: string,
): Promise<ManagerUserAuth | undefined> {
  try {
    await Deno.lstat(`${root}/user-auth.json`);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  const file = `${root}/run/space.${spaceKeyHex(space)}/auth-service.json`;
  let url: unknown;
  try {
    url = JSON.parse(await Deno.readTextFile(file))?.url;
  } catch {
    // Reported below.
  }
  if (typeof url !== "string" || !/^http:\/\/(127\.0\.0\.1|\[::1\]):\d{1,5}$/.test(url)) {
    throw new CotalError(
      "agent_bearer_unavailable",
      `${root} runs user auth (user-auth.json), but space ${
        JSON.stringify(space)
      }'s auth service is not running (no ${file}); start it (cotal up), or pass userAuth.`,
    );
  }
  return { url };
}

interface Held {
  readonly lifecycleUid: string;
  token?: string;
  /** Epoch ms. */
  exp: number;
  timer?: ReturnType<typeof setTimeout>;
  inflight?: Promise<void>;
  retryMs: number;
}

/** The options of {@linkcode AgentBearers.open}. */
export interface AgentBearersOptions extends ManagerUserAuth {
  /** The supervisor's principal (its cred's tags name it). */
  readonly principal: Principal;
  /** A prover of the supervisor's current cred. */
  readonly prover: () => Promise<RequestProver>;
  readonly log: (line: string) => void;
}

/** A user-mode supervisor's client of its auth service, and its agents' bearers in memory. */
export class AgentBearers {
  /** The owner every agent of this supervisor is granted under. */
  readonly owner: string;
  readonly #opts: AgentBearersOptions;
  readonly #sentinelJwt: string;
  readonly #sentinel: { sign(nonce: string): string };
  readonly #held = new Map<string, Held>();
  #closed = false;

  private constructor(
    opts: AgentBearersOptions,
    hello: AgentBearerHello,
    sentinel: { jwt: string; seed: string },
  ) {
    this.#opts = opts;
    this.owner = hello.owner;
    this.#sentinelJwt = sentinel.jwt;
    this.#sentinel = nonceProver(sentinel.seed);
  }

  /** Asks the auth service for its agents' owner and the sentinel creds. */
  static async open(opts: AgentBearersOptions): Promise<AgentBearers> {
    let url: URL;
    try {
      url = new URL(AGENT_BEARER_PATH, opts.url);
    } catch {
      throw new CotalError(
        "agent_bearer_unavailable",
        `The auth service URL ${JSON.stringify(opts.url)} is not a URL; pass its http://host:port.`,
      );
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new CotalError(
        "agent_bearer_unavailable",
        `The auth service URL must be http(s), not ${JSON.stringify(url.protocol)}.`,
      );
    }
    const hello = await ask(opts, { op: "hello" }) as unknown as AgentBearerHello;
    if (typeof hello?.owner !== "string" || typeof hello?.sentinelCreds !== "string") {
      throw new CotalError(
        "agent_bearer_unavailable",
        "The auth service's hello answer is not {owner, sentinelCreds}; check its version.",
      );
    }
    return new AgentBearers(opts, hello, await parseCreds(hello.sentinelCreds));
  }

  /**
   * Grants `plan`'s agent its ledger row (its lifecycle, its channels, its role) and takes its
   * first bearer: after this its relay can connect it.
   */
  async grant(plan: AgentPlan): Promise<void> {
    await ask(this.#opts, {
      op: "grant",
      actor: plan.principal.actor,
      lifecycleUid: plan.lifecycleUid,
      grant: {
        subscribe: [...plan.channels.subscribe],
        allowSubscribe: [...plan.channels.allowSubscribe],
        allowPublish: [...plan.channels.allowPublish],
        ...(plan.role ? { role: plan.role } : {}),
      },
    });
    this.#drop(plan.principal.actor);
    const held: Held = { lifecycleUid: plan.lifecycleUid, exp: 0, retryMs: AGENT_BEARER_RETRY_MS };
    this.#held.set(plan.principal.actor, held);
    await this.#renew(plan.principal.actor, held);
    if (held.token === undefined) {
      this.#drop(plan.principal.actor);
      throw new CotalError(
        "agent_bearer_unavailable",
        `The auth service issued no bearer for ${plan.principal.actor}; see the log above.`,
      );
    }
  }

  /**
   * The agent's bearer now, or undefined while none is fresh (a renewal is then under way);
   * with `lifecycleUid`, only that lifecycle's (a relay never presents its name's next one).
   */
  current(actor: string, lifecycleUid?: string): string | undefined {
    const held = this.#held.get(actor);
    if (!held || (lifecycleUid !== undefined && held.lifecycleUid !== lifecycleUid)) {
      return undefined;
    }
    if (held.token !== undefined && held.exp - Date.now() > AGENT_BEARER_MIN_LEFT_MS) {
      return held.token;
    }
    void this.#renew(actor, held);
    return undefined;
  }

  /** What the agent's relay presents for it (see `GuardPolicy.bearer`). */
  presenter(plan: AgentPlan): {
    sentinelJwt: string;
    sign(nonce: string): string;
    current(): string | undefined;
    admit(): boolean;
    connId: string;
  } {
    const actor = plan.principal.actor;
    // Per agent lifecycle: what its connects may cost the callout.
    const connects = new TokenBuckets(BEARER_CONNECT_RATE, { maxKeys: 1 });
    return {
      sentinelJwt: this.#sentinelJwt,
      sign: (nonce: string) => this.#sentinel.sign(nonce),
      current: () => this.current(actor, plan.lifecycleUid),
      admit: () => connects.take(actor),
      connId: plan.identity.id,
    };
  }

  /** Stops renewing the agent's bearers and removes its row (if still this lifecycle's). */
  async revoke(actor: string, lifecycleUid: string): Promise<void> {
    const held = this.#held.get(actor);
    if (held?.lifecycleUid === lifecycleUid) this.#drop(actor);
    await ask(this.#opts, { op: "revoke", actor, lifecycleUid });
  }

  /** Stops every renewal (the rows stay: a kept agent comes back under its own). */
  close(): void {
    this.#closed = true;
    for (const actor of [...this.#held.keys()]) this.#drop(actor);
  }

  #drop(actor: string): void {
    const held = this.#held.get(actor);
    if (held?.timer !== undefined) clearTimeout(held.timer);
    this.#held.delete(actor);
  }

  #renew(actor: string, held: Held): Promise<void> {
    held.inflight ??= (async () => {
      try {
        const out = await ask(this.#opts, {
          op: "bearer",
          actor,
          lifecycleUid: held.lifecycleUid,
        }) as unknown as AgentBearerIssued;
        if (typeof out?.token !== "string" || !Number.isSafeInteger(out?.exp)) {
          throw new CotalError("agent_bearer_unavailable", "The bearer answer is malformed.");
        }
        held.token = out.token;
        held.exp = out.exp * 1000;
        held.retryMs = AGENT_BEARER_RETRY_MS;
        this.#schedule(actor, held, (held.exp - Date.now()) * AGENT_BEARER_RENEW_FRACTION);
      } catch (err) {
        this.#opts.log(
          `manager: could not renew ${actor}'s bearer (${(err as Error).message.slice(0, 200)})`,
        );
        this.#schedule(actor, held, held.retryMs);
        held.retryMs = Math.min(60_000, held.retryMs * 2);
      } finally {
        held.inflight = undefined;
      }
    })();
    return held.inflight;
  }

  #schedule(actor: string, held: Held, ms: number): void {
    if (this.#closed || this.#held.get(actor) !== held) return;
    if (held.timer !== undefined) clearTimeout(held.timer);
    held.timer = setTimeout(() => void this.#renew(actor, held), Math.max(1_000, ms));
  }
}

/**
 * The agent's launch JWT in user mode: it names the agent (its key, its principal in the tags,
 * its inbox in the sub allow list) for the runner and the agent's endpoint, and is signed by
 * a throwaway account key no operator trusts (forgotten at once): the broker admits the agent
 * only through its relay, which presents the sentinel creds and the bearer in its place.
 */
export async function agentDescriptorCreds(plan: AgentPlan): Promise<string> {
  const signer = await seedSigner((await createAccount()).seed);
  const jwt = await encodeJwt({
    sub: plan.identity.id,
    name: "agent",
    nats: {
      type: "user",
      pub: { allow: [] },
      sub: { allow: [`_INBOX_${plan.identity.id}.>`] },
      tags: principalTags(plan.principal),
    },
  }, signer);
  return await renderCreds(jwt, plan.identity.seed);
}

async function ask(
  opts: AgentBearersOptions,
  req: JsonObject,
): Promise<Record<string, unknown>> {
  const body = new TextEncoder().encode(JSON.stringify({
    ...req,
    caller: { owner: opts.principal.owner, actor: opts.principal.actor },
    nonce: crypto.randomUUID(),
  }));
  const headers = await proveAgentBearerRequest(await opts.prover(), body);
  headers.set("content-type", "application/json");
  let res: Response;
  try {
    res = await fetch(new URL(AGENT_BEARER_PATH, opts.url), {
      method: "POST",
      headers,
      body,
      signal: AbortSignal.timeout(AGENT_BEARER_REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    throw new CotalError(
      "agent_bearer_unavailable",
      `The auth service at ${opts.url} did not answer (${
        (err as Error).name
      }); check that cotal-auth-service runs for this space.`,
    );
  }
  const text = await res.text().catch(() => "");
  let doc: Record<string, unknown> = {};
  try {
    doc = JSON.parse(text);
  } catch {
    // Reported below.
  }
  if (!res.ok) {
    const code = typeof doc.code === "string" ? doc.code.slice(0, 64) : `http_${res.status}`;
    const why = typeof doc.error === "string" ? doc.error.slice(0, 300) : `HTTP ${res.status}`;
    throw new CotalError(
      "agent_bearer_unavailable",
      `The auth service refused the ${String(req.op)} request (${code}): ${why}`,
    );
  }
  return doc;
}
