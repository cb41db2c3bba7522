/**
 * Red team 48's shared pieces: the real auth-service daemon (tests/auth/_service_mesh.ts) and a
 * client of its `POST /agents` rail that can send anything, proven by any cred or by none.
 */
import { supervisedOwner } from "../../lib/auth/agent_bearers.ts";
import {
  AGENT_BEARER_PATH,
  mintCreds,
  newIdentity,
  proveAgentBearerRequest,
  type RequestProver,
  requestProver,
} from "../../lib/trust/mod.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { type ServiceMesh, type ServiceProcess, startServiceMesh } from "../auth/_service_mesh.ts";

export const SUPERVISOR = { owner: "local", actor: "manager_rt48" } as const;

/** A user-auth space with its daemon running, and the supervisor's prover. */
export interface Rt48Mesh {
  mesh: ServiceMesh;
  svc: ServiceProcess;
  /** The owner supervised agents are granted under. */
  owner: string;
  supervisor: RequestProver;
  /** The supervisor's creds text. */
  supervisorCreds: string;
  close(): Promise<void>;
}

export async function startRt48(opts: { streams?: boolean } = {}): Promise<Rt48Mesh> {
  const mesh = await startServiceMesh({ streams: opts.streams ?? false });
  try {
    const svc = await mesh.start();
    const supervisorCreds = await mintCreds(mesh.auth, newIdentity(), "supervisor", {
      principal: SUPERVISOR,
    });
    return {
      mesh,
      svc,
      owner: await supervisedOwner(mesh.ownerSecret),
      supervisor: await requestProver(supervisorCreds),
      supervisorCreds,
      close: () => mesh.close(),
    };
  } catch (err) {
    await mesh.close();
    throw err;
  }
}

export interface AskResult {
  status: number;
  body: Record<string, unknown>;
  ms: number;
}

/**
 * One `POST /agents`: `doc` gets `caller` and `nonce` unless it has them; proven by `prover`
 * (none: no proof headers). `raw` sends the given body and headers exactly.
 */
export async function ask(
  url: string,
  doc: Record<string, unknown>,
  prover: RequestProver | undefined,
  o: { caller?: { owner: string; actor: string }; timeoutMs?: number } = {},
): Promise<AskResult> {
  const body = new TextEncoder().encode(JSON.stringify({
    caller: o.caller ?? SUPERVISOR,
    nonce: crypto.randomUUID(),
    ...doc,
  }));
  const headers = prover ? await proveAgentBearerRequest(prover, body) : new Headers();
  headers.set("content-type", "application/json");
  return await post(url, body, headers, o.timeoutMs);
}

export async function post(
  url: string,
  body: Uint8Array,
  headers: Headers,
  timeoutMs = 15_000,
): Promise<AskResult> {
  const t0 = performance.now();
  const res = await fetch(new URL(AGENT_BEARER_PATH, url), {
    method: "POST",
    headers,
    body: body as BodyInit,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed, ms: Math.round(performance.now() - t0) };
}

/** A lifecycle uid in the ledger's grammar. */
export function uid(): string {
  return newLifecycleUid();
}

export const OPEN_GRANT = {
  subscribe: ["general"],
  allowSubscribe: ["general"],
  allowPublish: ["general"],
} as const;

/**
 * `connected`, or `refused: <why>`. A refused connect's stray ECONNRESET/EPIPE (npm:nats's Node
 * transport under Deno) is swallowed while it runs, as tests/_harness/refused.ts does.
 */
export async function tryConnect(mesh: ServiceMesh, bearer: string): Promise<string> {
  const swallow = (e: ErrorEvent) => {
    if (/ECONNRESET|EPIPE/.test(String(e.error))) e.preventDefault();
  };
  globalThis.addEventListener("error", swallow);
  try {
    return await mesh.connectUser(bearer).then(async (nc) => {
      await nc.close();
      return "connected";
    }, async (e) => {
      await new Promise((r) => setTimeout(r, 50));
      return `refused: ${(e as Error).message}`;
    });
  } finally {
    globalThis.removeEventListener("error", swallow);
  }
}
