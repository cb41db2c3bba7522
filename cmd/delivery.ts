/**
 * cotal-delivery: the durable backstop for one space (fan-out writer and trusted reader).
 * A thin composition root: parse the flags, run the daemon, map its end to an exit code.
 * @module
 */
import { type CommandSpec, helpRequested, helpText, parseCommandArgs } from "../lib/cli/mod.ts";
import { isCotalError } from "../lib/errors.ts";
import { startHeartbeat } from "../lib/heartbeat.ts";
import { runDelivery } from "../lib/delivery/mod.ts";

const command: CommandSpec = {
  name: "delivery",
  summary: "the durable backstop for one space: fan-out writer and trusted reader",
  flags: {
    space: { type: "string", required: true, description: "the space to serve" },
    server: {
      type: "string",
      description: "broker URL(s), comma separated (default nats://127.0.0.1:4222)",
      value: "url",
    },
    root: {
      type: "string",
      description: "the state directory whose secret store holds the space's creds",
      value: "dir",
    },
    creds: {
      type: "string",
      description: "a delivery creds file (instead of the store's delivery key)",
      value: "file",
    },
    "creds-dir": {
      type: "string",
      description:
        "a directory holding the space's creds as files named by kind, delivery.creds and the membership feed's (systemd's $CREDENTIALS_DIRECTORY)",
      value: "dir",
    },
    "lock-file": {
      type: "string",
      description:
        "a file this daemon holds locked for its life, so a successor can prove it died and take its lease at once",
      value: "file",
    },
    "lease-wait": {
      type: "string",
      description: "seconds to keep retrying a lease another daemon holds (default 0)",
      value: "s",
    },
  },
};

// npm:nats builds a throwaway Error (a "cancelled" rejection) for every settled request, and
// capturing its stack was a quarter of the daemon's CPU per copy. The daemon logs messages,
// never stacks, so this process captures none.
Error.stackTraceLimit = 0;

/** How long a stop asked for during start-up waits for the start to finish. */
const BOOT_STOP_GRACE_MS = 10_000;

async function main(argv: string[]): Promise<number> {
  if (helpRequested(command, argv)) {
    // The daemon is its own executable: drop the subcommand word the shared help adds.
    console.log(
      helpText(command, "cotal-delivery").replaceAll("cotal-delivery delivery", "cotal-delivery"),
    );
    return 0;
  }
  // Beats while its event loop turns: the stack's watchdog restarts it when the beat stops.
  startHeartbeat();
  // Listen before starting: a SIGTERM that lands while the daemon boots (a fast 'cotal down')
  // must still stop it gracefully and release its lease, not kill it with the lease held.
  let stopRequested = false;
  let daemon: Awaited<ReturnType<typeof runDelivery>> | undefined;
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      stopRequested = true;
      void daemon?.stop();
      // A start stuck on the broker (every wait inside has its own deadline, but a stop must
      // not depend on them): the process goes anyway, and its lease row ages out by its TTL.
      if (!daemon) {
        setTimeout(() => {
          console.error("cotal-delivery: stopped while still starting");
          Deno.exit(1);
        }, BOOT_STOP_GRACE_MS);
      }
    });
  }
  try {
    daemon = await runDelivery(parseCommandArgs(command, argv, { program: "cotal-delivery" }));
  } catch (err) {
    const text = isCotalError(err) ? err.message : String(err);
    console.error(
      `cotal-delivery: ${text.replaceAll("cotal-delivery delivery", "cotal-delivery")}`,
    );
    return isCotalError(err, "usage") ? 2 : 1;
  }
  if (stopRequested) void daemon.stop();
  const exit = await daemon.closed;
  return exit.code;
}

Deno.exit(await main(Deno.args));
