/**
 * Each running agent's creds are re-minted at a fraction of their life and written to its
 * launch file (and the store), so a running agent never meets an expiry.
 *
 * @module
 */
import { CREDENTIAL_LIFETIMES } from "../trust/mod.ts";
import { errorText } from "../wire/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { writeLaunch } from "./agent_setup.ts";
import { type LifecycleContext, mintAgentCreds } from "./lifecycle.ts";
import type { ManagedAgent } from "./managed_agent.ts";
import { AGENT_REMINT_FRACTION } from "./manager_types.ts";

/** Re-mints `agent`'s creds on a timer (kept in `agent.renewTimer`) until it stops. */
export function scheduleAgentRenewal(
  agent: ManagedAgent,
  opts: {
    ctx: LifecycleContext;
    store: SecretStore;
    servers: string[];
    ttlSeconds?: number;
    log: (line: string) => void;
  },
): void {
  const ttl = (opts.ttlSeconds ?? CREDENTIAL_LIFETIMES.agent.defaultTtlSeconds) * 1000;
  agent.renewTimer = setTimeout(async () => {
    if (agent.status === "retired" || agent.status === "stopping") return;
    try {
      const creds = await mintAgentCreds(opts.ctx, agent.plan, opts.ttlSeconds);
      await opts.store.put(agent.plan.credsKey, creds);
      await writeLaunch(opts.ctx, agent, opts.servers, creds);
    } catch (err) {
      opts.log(`manager: could not renew ${agent.plan.name}'s cred (${errorText(err)})`);
    }
    scheduleAgentRenewal(agent, opts);
  }, Math.max(1_000, ttl * AGENT_REMINT_FRACTION));
}
