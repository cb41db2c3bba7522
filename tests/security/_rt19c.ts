/** Shared helpers of red team 19c's tests (not a test file). */
import { headers, type MsgHdrs, type NatsConnection } from "nats";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import type { Agent } from "../delivery/_helpers.ts";

/** A header block nats.js refuses to decode on first read (a key with a space). */
export function badHeaders(extra: Record<string, string> = {}): MsgHdrs {
  const h = headers();
  for (const [k, v] of Object.entries(extra)) h.set(k, v);
  (h as unknown as { headers: Map<string, string[]> }).headers.set("Bad Key", ["x"]);
  return h;
}

/** Publishes `data` on `subject` with undecodable headers, `n` times. */
export async function sendBad(
  nc: NatsConnection,
  subject: string,
  data: Uint8Array = new TextEncoder().encode("{}"),
  n = 1,
): Promise<void> {
  for (let i = 0; i < n; i++) nc.publish(subject, data, { headers: badHeaders() });
  await nc.flush();
}

/** An endpoint for `a` that records the texts it surfaces and the codes of its warnings. */
export function recordingEndpoint(
  url: string,
  space: string,
  a: Agent,
  opts: { channels?: string[]; role?: string } = {},
): { ep: CotalEndpoint; got: string[]; warnings: string[] } {
  const ep = new CotalEndpoint({
    servers: url,
    space,
    // The role a member serves is on its card: it is what binds the role's task consumer.
    card: { name: a.name, ...(opts.role ? { role: opts.role } : {}) },
    creds: a.creds,
    lifecycleUid: a.uid,
    channels: opts.channels ?? [],
  });
  const got: string[] = [];
  const warnings: string[] = [];
  ep.addEventListener("message", (ev) => {
    const p = ev.message.parts[0];
    if (p?.kind === "text") got.push((p as { text: string }).text);
  });
  ep.addEventListener("error", (ev) => {
    warnings.push(String((ev as unknown as { error?: { code?: string } }).error?.code ?? "error"));
  });
  ep.addEventListener("warning", (ev) => {
    warnings.push(
      String((ev as unknown as { error?: { code?: string } }).error?.code ?? "warning"),
    );
  });
  return { ep, got, warnings };
}
