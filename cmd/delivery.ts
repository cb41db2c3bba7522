/**
 * cotal-delivery: the durable backstop for one space (fan-out writer and trusted reader).
 * A thin composition root: its flags, and the daemon started under the shared daemon main
 * (lib/cli/daemon_main.ts: signals, heartbeat, exit codes).
 * @module
 */
import type { CommandSpec } from "../lib/cli/mod.ts";
import { daemonMain } from "../lib/cli/mod.ts";
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

Deno.exit(
  await daemonMain({
    program: "cotal-delivery",
    command,
    async start(args) {
      const daemon = await runDelivery(args);
      // A lost lease or broker ends the daemon with its own code.
      return { stop: () => daemon.stop(), ended: daemon.closed.then((exit) => exit.code) };
    },
  }, Deno.args),
);
