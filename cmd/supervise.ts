/**
 * cotal-supervise: the agent lifecycle (spawn, despawn, attach) for one space on this machine.
 * A thin composition root: parse the flags, build a Manager, run until SIGINT or SIGTERM.
 * @module
 */
import type { CommandSpec } from "../lib/cli/mod.ts";
import { daemonMain } from "../lib/cli/mod.ts";
import { CotalError } from "../lib/errors.ts";
import {
  ISOLATION_MODES,
  type IsolationMode,
  Manager,
  parseIdRange,
  parseLimitsFlag,
} from "../lib/manager/mod.ts";

const command: CommandSpec = {
  name: "supervise",
  summary: "the agent lifecycle (spawn, despawn, attach) for one space on this machine",
  flags: {
    root: {
      type: "string",
      required: true,
      value: "dir",
      description: "the state directory (its secret store holds the space's signer)",
    },
    space: { type: "string", required: true, description: "the space to supervise" },
    server: {
      type: "string",
      value: "url",
      description: "broker URL(s), comma separated (default nats://127.0.0.1:4222)",
    },
    isolation: {
      type: "string",
      value: "mode",
      description: `how agents are isolated: ${ISOLATION_MODES.join(" or ")} (default bwrap)`,
    },
    runtime: { type: "string", description: "the spawn backend (default pty)" },
    signer: {
      type: "string",
      value: "where",
      description:
        "local (this process loads the space's signer records) or remote (the space's cotal-signer signs; no seed here); default local",
    },
    "auth-service": {
      type: "string",
      value: "url",
      description:
        "user mode: the space's cotal-auth-service (http://127.0.0.1:<port>), which grants each agent its ledger row and bearers; its agents get no static creds",
    },
    "agent-limits": {
      type: "string",
      value: "name=value,...",
      description: "this space's agent limits, within the frozen bounds (e.g. memory=2G)",
    },
    "agent-ids": {
      type: "string",
      value: "first-last",
      description: "uids given to agents when running as root (first is their group)",
    },
  },
};

/** `--auth-service`: an http URL of a loopback address, the only place the auth service listens. */
function authServiceUrl(text: string): string {
  let u: URL | undefined;
  try {
    u = new URL(text);
  } catch {
    // Refused below.
  }
  if (
    !u || u.protocol !== "http:" || !["127.0.0.1", "[::1]", "localhost"].includes(u.hostname) ||
    (u.pathname !== "/" && u.pathname !== "") || u.search || u.username
  ) {
    throw new CotalError(
      "usage",
      `--auth-service must be the auth service's loopback URL like http://127.0.0.1:8081, not ${
        JSON.stringify(text.slice(0, 80))
      }.`,
    );
  }
  return u.origin;
}

Deno.exit(
  await daemonMain({
    program: "cotal-supervise",
    command,
    async start({ values }) {
      const isolation = (values.isolation ?? "bwrap") as IsolationMode;
      if (!ISOLATION_MODES.includes(isolation)) {
        throw new CotalError("usage", `--isolation must be ${ISOLATION_MODES.join(" or ")}.`);
      }
      const signer = String(values.signer ?? "local");
      if (signer !== "local" && signer !== "remote") {
        throw new CotalError("usage", "--signer must be local or remote.");
      }
      const root = String(values.root);
      const manager = new Manager({
        signer,
        space: String(values.space),
        workspaceRoot: root.startsWith("/") ? root : `${Deno.cwd()}/${root}`,
        servers: values.server ? String(values.server).split(",") : undefined,
        isolation,
        // A daemon outlives its broker's restarts, and may start before it.
        waitForBroker: true,
        runtime: values.runtime ? String(values.runtime) : undefined,
        ...(values["agent-limits"]
          ? { agentLimits: parseLimitsFlag(String(values["agent-limits"])) }
          : {}),
        ...(values["agent-ids"] ? { agentIds: parseIdRange(String(values["agent-ids"])) } : {}),
        ...(values["auth-service"]
          ? { userAuth: { url: authServiceUrl(String(values["auth-service"])) } }
          : {}),
      });
      await manager.start();
      // A stop of the service (down, systemctl stop, a restart) keeps the roster: the agents
      // come back at the next start. 'cotal down' despawns them first unless told to keep them.
      return { stop: () => manager.stop({ keepAgents: true }) };
    },
  }, Deno.args),
);
