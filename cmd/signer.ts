/**
 * cotal-signer: the one process that holds a space's signing seeds; every other component asks
 * it for user JWTs over the broker (lib/signer). A thin composition root: parse the flags, load
 * the space's trust records, serve until SIGTERM.
 * @module
 */
import { type CommandSpec, helpRequested, helpText, parseCommandArgs } from "../lib/cli/mod.ts";
import { isCotalError } from "../lib/errors.ts";
import { startHeartbeat } from "../lib/heartbeat.ts";
import { runSigner, signerAuditPath } from "../lib/signer/mod.ts";
import { DAEMON_REMINT_INTERVAL_MS } from "../lib/manager/manager_types.ts";
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

async function main(argv: string[]): Promise<number> {
  if (helpRequested(command, argv)) {
    console.log(
      helpText(command, "cotal-signer").replaceAll("cotal-signer signer", "cotal-signer"),
    );
    return 0;
  }
  // Beats while its event loop turns: the stack's watchdog restarts it when the beat stops.
  startHeartbeat();
  let stopRequested = false;
  let signer: Awaited<ReturnType<typeof runSigner>> | undefined;
  let done: () => void = () => {};
  const stopped = new Promise<void>((r) => (done = r));
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      stopRequested = true;
      void signer?.stop().finally(done);
    });
  }
  try {
    const args = parseCommandArgs(command, argv, { program: "cotal-signer" });
    const root = String(args.values.root).replace(/\/+$/, "");
    const space = String(args.values.space);
    const servers = String(args.values.server ?? "nats://127.0.0.1:4222").split(",");
    const auth = await getSpaceAuth(workspaceSecretStore(root), space);
    signer = await runSigner({
      auth,
      servers,
      auditPath: args.values.audit ? String(args.values.audit) : signerAuditPath(root, space),
    });
    // The space's standing daemon creds (delivery, membership) and the supervisor's own are
    // re-signed here, with the same keys, now and on the schedule the supervisor kept while it
    // held the seeds: a supervisor down longer than its cred's day starts again from it.
    // Again at half the life the shortest has left (at least every 6 h), sooner after a failure.
    const remint = async () => {
      const results = await remintDaemonCreds(root, space, undefined, {
        also: [SUPERVISOR_CRED],
      });
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
        timer = setTimeout(
          tick,
          nextResignDelayMs(results, { maxMs: DAEMON_REMINT_INTERVAL_MS }),
        );
      }
    };
    await tick();
    stopped.then(() => {
      over = true;
      clearTimeout(timer);
    });
  } catch (err) {
    const text = isCotalError(err) ? err.message : String(err);
    console.error(`cotal-signer: ${text}`);
    return isCotalError(err, "usage") ? 2 : 1;
  }
  if (stopRequested) await signer.stop().finally(done);
  await stopped;
  return 0;
}

Deno.exit(await main(Deno.args));
