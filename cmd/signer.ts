/**
 * cotal-signer: the one process that holds a space's signing seeds; every other component asks
 * it for user JWTs over the broker (lib/signer). A thin composition root: parse the flags, load
 * the space's trust records, serve until SIGTERM.
 * @module
 */
import type { CommandSpec } from "../lib/cli/mod.ts";
import { daemonMain } from "../lib/cli/mod.ts";
import { runSigner, signerAuditPath } from "../lib/signer/mod.ts";
import { DAEMON_REMINT_INTERVAL_MS } from "../lib/manager/mod.ts";
import {
  getSpaceAuth,
  nextResignDelayMs,
  remintDaemonCreds,
  SUPERVISOR_CRED,
  workspaceSecretStore,
} from "../lib/workspace/mod.ts";

const command: CommandSpec = {
  name: "signer",
  summary: "signs a space's user JWTs for the components its policy admits; holds the seeds",
  flags: {
    space: { type: "string", required: true, description: "the space whose account signs" },
    server: {
      type: "string",
      description: "broker URL(s), comma separated (default nats://127.0.0.1:4222)",
      value: "url",
    },
    root: {
      type: "string",
      required: true,
      description: "the state directory whose secret store holds the space's trust records",
      value: "dir",
    },
    audit: {
      type: "string",
      description: "the audit trail (default <root>/audit/signer.space.<space key>.audit.jsonl)",
      value: "file",
    },
  },
};

Deno.exit(
  await daemonMain({
    program: "cotal-signer",
    command,
    async start(args) {
      const root = String(args.values.root).replace(/\/+$/, "");
      const space = String(args.values.space);
      const servers = String(args.values.server ?? "nats://127.0.0.1:4222").split(",");
      const auth = await getSpaceAuth(workspaceSecretStore(root), space);
      const signer = await runSigner({
        auth,
        servers,
        auditPath: args.values.audit ? String(args.values.audit) : signerAuditPath(root, space),
      });
      const resign = await keepDaemonCredsSigned(root, space);
      return {
        async stop() {
          resign.stop();
          await signer.stop();
        },
      };
    },
  }, Deno.args),
);

/**
 * The space's standing daemon creds (delivery, membership) and the supervisor's own are
 * re-signed here, with the same keys, now and on the schedule the supervisor kept while it held
 * the seeds: a supervisor down longer than its cred's day starts again from it. Again at half
 * the life the shortest has left (at least every 6 h), sooner after a failure.
 */
async function keepDaemonCredsSigned(root: string, space: string): Promise<{ stop(): void }> {
  const remint = async () => {
    const results = await remintDaemonCreds(root, space, undefined, { also: [SUPERVISOR_CRED] });
    for (const r of results) {
      if (r.ok) console.error(`${new Date().toISOString()} re-signed ${r.file}`);
      else if (r.error) {
        console.error(`${new Date().toISOString()} ${r.file} not re-signed: ${r.error.message}`);
      }
    }
    return results;
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let over = false;
  const tick = async () => {
    const results = await remint().catch(() => []);
    if (!over) {
      timer = setTimeout(tick, nextResignDelayMs(results, { maxMs: DAEMON_REMINT_INTERVAL_MS }));
    }
  };
  await tick();
  return {
    stop() {
      over = true;
      clearTimeout(timer);
    },
  };
}
