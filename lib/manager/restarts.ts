/**
 * What happens when an agent's runner exits on its own: restarted with a growing pause while
 * its crash budget lasts, retired (and its footprint removed) once it is spent.
 *
 * @module
 */
import type { RuntimeExit } from "../registry.ts";
import { errorText } from "../wire/mod.ts";
import type { ManagedAgent } from "./managed_agent.ts";
import { describeExit, recordCrash } from "./readiness.ts";

/** What the restart policy needs from its manager. */
export interface RestartHooks {
  /** True while the manager serves (no restart once it stops). */
  running(): boolean;
  startRunner(agent: ManagedAgent): Promise<void>;
  /** Removes the agent's footprint (durables, ACL row, creds, dir). */
  teardown(agent: ManagedAgent): Promise<unknown>;
  saveIndex(): Promise<void>;
  /** Tracks background work so a stop waits for it. */
  track<T>(p: Promise<T>): Promise<T>;
  log(line: string): void;
}

/** Handles one runner exit under the agent's restart budget. */
export function onRunnerExit(agent: ManagedAgent, exit: RuntimeExit, h: RestartHooks): void {
  if (agent.status === "stopping" || agent.status === "starting" || !h.running()) return;
  agent.endSessions("process-exit");
  const how = agent.hung ? `${describeExit(exit)}: ${agent.hung}` : describeExit(exit);
  const overBudget = recordCrash(agent, exit, Date.now());
  if (overBudget) {
    agent.status = "retired";
    agent.reason = overBudget;
    clearTimeout(agent.renewTimer);
    h.log(`manager: ${agent.plan.name} ${agent.reason}`);
    h.track(
      (async () => {
        await agent.sandbox?.close();
        agent.slot = undefined;
        await h.teardown(agent);
        await h.saveIndex();
      })().catch(() => {}),
    );
    return;
  }
  agent.status = "restarting";
  agent.restartsUsed++;
  agent.reason = `restarted after ${how}`;
  h.log(`manager: ${agent.plan.name} exited (${how}); restarting`);
  h.track((async () => {
    await new Promise((r) => setTimeout(r, 200 * agent.crashes.length));
    if (agent.status !== "restarting" || !h.running()) return;
    try {
      await h.startRunner(agent);
      agent.status = "running";
      await h.saveIndex();
    } catch (err) {
      agent.status = "retired";
      agent.reason = `retired: restart failed (${errorText(err)})`;
      await agent.sandbox?.close();
      agent.slot = undefined;
      await h.teardown(agent);
    }
  })());
}
