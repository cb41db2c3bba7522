/**
 * Spawn readiness: an agent is ready when its presence row (with its own lifecycle uid) is
 * seen; exiting first is a failed spawn, not a crash for the restart policy.
 *
 * @module
 */
import type { CotalEndpoint } from "../endpoint/mod.ts";
import { CotalError } from "../errors.ts";
import type { RuntimeExit } from "../registry.ts";
import type { ManagedAgent } from "./managed_agent.ts";

/** `exit code 3` or `signal SIGKILL`, for messages. */
export function describeExit(e: RuntimeExit): string {
  return e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
}

/**
 * Records a crash against the agent's restart budget (crashes within its window); returns the
 * retirement reason when the budget is spent, undefined when it may restart.
 */
export function recordCrash(
  agent: ManagedAgent,
  exit: RuntimeExit,
  now: number,
): string | undefined {
  const { restarts, windowMs } = agent.plan.restart;
  agent.crashes.push(now);
  while (agent.crashes.length && agent.crashes[0] < now - windowMs) agent.crashes.shift();
  if (agent.crashes.length <= restarts) return undefined;
  // What it last printed is often the why (a harness that cannot reach its provider): kept with
  // the reason, since its terminal is gone once it is retired.
  const said = agent.lastLines(3).slice(-300);
  return `retired: exited ${agent.crashes.length} times within ${
    Math.round(windowMs / 1000)
  } s, over its limit of ${restarts} restarts (last: ${describeExit(exit)}${
    said ? `; its last output: ${said}` : ""
  })`;
}

/**
 * Resolves once `present()` holds for a starting agent (marking it running), rejects with
 * `spawn_not_ready` after `timeoutMs` or `spawn_failed` when it exits first.
 */
export function awaitPresence(
  agent: ManagedAgent,
  ep: CotalEndpoint,
  present: () => boolean,
  timeoutMs: number,
  stopping?: AbortSignal,
): Promise<void> {
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  // A manager that stops does not wait out a readiness window (an agent can hold itself in
  // "starting"): the spawn fails at once and is undone like any other failed spawn.
  const onStop = () =>
    reject(
      new CotalError("unavailable", `The manager is stopping; ${agent.plan.name} was not started.`),
    );
  if (stopping?.aborted) onStop();
  stopping?.addEventListener("abort", onStop, { once: true });
  const check = () => {
    if (agent.status !== "starting" || !present()) return;
    // Synchronously: an exit from here on is a crash for the restart policy, not a failed spawn.
    agent.status = "running";
    resolve();
  };
  ep.addEventListener("presence", check);
  const timer = setTimeout(() => {
    reject(
      new CotalError(
        "spawn_not_ready",
        `Agent ${agent.plan.name} did not appear in presence within ${
          Math.round(timeoutMs / 1000)
        } s; it was stopped and deprovisioned (last output: ${agent.lastLines() || "none"}).`,
      ),
    );
  }, timeoutMs);
  agent.exited().then((e) => {
    if (agent.status !== "starting") return;
    reject(
      new CotalError(
        "spawn_failed",
        `Agent ${agent.plan.name} exited (${describeExit(e)}) before it appeared in presence; ` +
          `last output: ${agent.lastLines() || "none"}.`,
      ),
    );
  });
  check();
  return promise.finally(() => {
    clearTimeout(timer);
    ep.removeEventListener("presence", check);
    stopping?.removeEventListener("abort", onStop);
  });
}
