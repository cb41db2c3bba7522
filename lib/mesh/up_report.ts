/**
 * What `up` says and prints once the stack runs: what the bring-back of each supervisor it
 * started did, and where the broker, its monitor and the state are.
 *
 * @module
 */
import { safeText } from "../safe_text.ts";
import { errorText } from "../wire/mod.ts";
import type { BringBackReport } from "../manager/mod.ts";
import { ManagerClient } from "../manager/mod.ts";
import { mintForRoot } from "./ops.ts";
import type { MeshRecord } from "./stack.ts";

/** How long `up` waits for a fresh supervisor to bring back the agents a down kept. */
export const BRING_BACK_WAIT_MS = 90_000;

/** The lines `up` says after it started or found the stack: what runs, and where. */
export function sayWhatIsUp(
  opts: { say(line: string): void; root: string },
  rec: MeshRecord,
  spaces: readonly string[],
  { started, healthy }: { started: readonly string[]; healthy: readonly string[] },
): void {
  // Over a running stack, say what was already up (and what this up started), not a fresh start.
  if (healthy.length) {
    opts.say(`already up: ${healthy.join(", ")}`);
    if (started.length) opts.say(`started: ${started.join(", ")}`);
  }
  // A wildcard listen address is no address to dial: say the loopback one and what it serves.
  const wildcard = /^nats:\/\/(0\.0\.0\.0|\[::\])(:\d+)$/.exec(rec.url);
  opts.say(
    wildcard
      ? `broker:  nats://127.0.0.1${wildcard[2]} (listening on every interface, ${wildcard[1]}; ` +
        `remote clients dial this machine's address)`
      : `broker:  ${rec.url}`,
  );
  // Said when this up started the broker, not again by every up over a running one.
  const port = Number(/:(\d+)$/.exec(rec.url)?.[1]);
  const ephemeral = started.includes("nats-server") ? ephemeralPortWarning(port) : undefined;
  if (ephemeral) opts.say(ephemeral);
  if (rec.monitor) opts.say(`monitor: http://${rec.monitor}/ (varz, connz, jsz)`);
  opts.say(`spaces:  ${spaces.join(", ")}`);
  opts.say(`state:   ${opts.root}`);
}

/**
 * A warning when the broker's port lies in the kernel's ephemeral range (read from
 * `/proc/sys/net/ipv4/ip_local_port_range` unless given). An agent on the host's network may
 * bind no IP port (its bind guard), but a socket that listens unbound is given a free port from
 * that range: while the broker restarts, one in a loop could be given the broker's.
 */
export function ephemeralPortWarning(port: number, rangeText?: string): string | undefined {
  let text = rangeText;
  if (text === undefined) {
    try {
      text = Deno.readTextFileSync("/proc/sys/net/ipv4/ip_local_port_range");
    } catch {
      return undefined;
    }
  }
  const [low, high] = text.trim().split(/\s+/).map(Number);
  if (!Number.isInteger(port) || !(port >= low && port <= high)) return undefined;
  return `warning: the broker's port ${port} is in the kernel's ephemeral range (${low}-${high}), ` +
    `which a process listening without a port of its own may be given while the broker ` +
    `restarts; choose one below ${low} (cotal down, then cotal up --port <n>).`;
}

/**
 * What a fresh supervisor's bring-back did, once it is done (or {@linkcode BRING_BACK_WAIT_MS}
 * passed): the agents back, each one it could not bring back and why (it removed them), and
 * any still on their way. Nothing when it kept no agents.
 */
export async function bringBackLines(root: string, space: string, url: string): Promise<string[]> {
  const deadline = Date.now() + BRING_BACK_WAIT_MS;
  let report: BringBackReport | undefined;
  try {
    const creds = await mintForRoot(root, space, {
      profile: "control-caller",
      actor: "status",
      expiresInSeconds: Math.ceil(BRING_BACK_WAIT_MS / 1000) + 60,
    });
    await using ctl = await ManagerClient.connect({ servers: url, space, creds });
    for (;;) {
      report = (await ctl.request<{ bringBack?: BringBackReport }>("status", {}, {
        timeoutMs: 5_000,
      })).bringBack;
      if (!report || report.done || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
  } catch (err) {
    return [
      `warning: could not ask space '${space}''s supervisor what it brought back (${
        safeText(errorText(err))
      }); 'cotal ps --space ${space}' shows its agents`,
    ];
  }
  if (!report) return [];
  const out: string[] = [];
  if (report.back.length) out.push(`agents:  brought back ${report.back.join(", ")} (${space})`);
  for (const f of report.failed) {
    out.push(
      `warning: could not bring back ${f.name} in space '${space}' (${
        safeText(f.reason)
      }); it was removed`,
    );
  }
  if (report.pending.length) {
    out.push(`agents:  still bringing back ${report.pending.join(", ")} (${space}; cotal ps)`);
  }
  return out;
}
