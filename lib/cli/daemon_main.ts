/**
 * The one `main` of Cotal's daemons (delivery, signer, supervisor, auth service): help, the
 * heartbeat the watchdog reads, SIGINT/SIGTERM, and one exit-code rule:
 *
 * - 0: stopped by a signal (or the daemon ended cleanly);
 * - 2: the daemon refused its inputs (a usage error, or a refusal the daemon names as one):
 *   restarting it unchanged cannot help, the operator must fix a flag or the state;
 * - 1: anything else (a lost broker or lease, a failure while running): a restart may help;
 * - a code the daemon itself ends with (a lost delivery lease ends with 1).
 *
 * A refusal prints `<program>: <sentence> [<code>]` on stderr; a non-Cotal failure its stack.
 *
 * @module
 */
import type { CommandSpec, ParsedArgs } from "../command_types.ts";
import { helpText } from "./help.ts";
import { helpRequested, parseCommandArgs } from "./parse.ts";
import { type CotalError, isCotalError } from "../errors.ts";
import { startHeartbeat } from "../heartbeat.ts";

/** A started daemon. */
export interface RunningDaemon {
  /** Stops it (a signal asked); resolves once it is down. */
  stop(): Promise<unknown>;
  /**
   * Resolves with an exit code when the daemon ends by itself, rejects when it fails while
   * running; absent for one that runs until stopped.
   */
  readonly ended?: Promise<number>;
}

/** What {@linkcode daemonMain} runs. */
export interface DaemonMainOptions {
  /** The executable's name (`cotal-delivery`), the prefix of every line it prints. */
  program: string;
  command: CommandSpec;
  /** The program `--help` and usage name, when it is a CLI verb's (default `program`). */
  helpProgram?: string;
  /** Starts the daemon from its parsed flags; a throw ends the process with the rule above. */
  start(args: ParsedArgs): Promise<RunningDaemon>;
  /** True for a refusal of the daemon's inputs (exit 2); default: a `usage` error only. */
  refusesInput?(err: CotalError): boolean;
}

/**
 * How long a stop asked for during start-up waits for the start to finish: a start stuck on the
 * broker (every wait inside has its own deadline, but a stop must not depend on them) ends the
 * process anyway.
 */
export const BOOT_STOP_GRACE_MS = 10_000;

/** Runs a daemon to its end; resolves with the process's exit code. */
export async function daemonMain(o: DaemonMainOptions, argv: string[]): Promise<number> {
  const helpProgram = o.helpProgram ?? o.program;
  // A daemon named as its own executable drops the subcommand word the shared help adds; one
  // named as a CLI verb (`cotal auth-service`) keeps it.
  const own = (text: string) =>
    o.helpProgram ? text : text.replaceAll(`${o.program} ${o.command.name}`, o.program);
  if (helpRequested(o.command, argv)) {
    console.log(own(helpText(o.command, helpProgram)));
    return 0;
  }
  // Beats while its event loop turns: the stack's watchdog restarts it when the beat stops.
  startHeartbeat();
  const failed = (err: unknown): number => {
    if (isCotalError(err)) {
      console.error(`${o.program}: ${own(err.message)} [${err.code}]`);
      return (o.refusesInput ?? ((e) => e.code === "usage"))(err) ? 2 : 1;
    }
    console.error(`${o.program}: failed: ${(err as Error)?.stack ?? err}`);
    return 1;
  };
  // Listen before starting: a SIGTERM that lands while the daemon boots (a fast 'cotal down')
  // must still stop it gracefully (a delivery daemon releases its lease), not kill it.
  const signalled = Promise.withResolvers<void>();
  let daemon: RunningDaemon | undefined;
  let grace: ReturnType<typeof setTimeout> | undefined;
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      signalled.resolve();
      if (daemon || grace) return;
      grace = setTimeout(() => {
        console.error(`${o.program}: stopped while still starting`);
        Deno.exit(1);
      }, BOOT_STOP_GRACE_MS);
    });
  }
  try {
    daemon = await o.start(parseCommandArgs(o.command, argv, { program: helpProgram }));
    clearTimeout(grace);
    const running = daemon;
    const stopped = signalled.promise.then(async () => {
      await running.stop();
      return running.ended ? await running.ended : 0;
    });
    return await (running.ended ? Promise.race([stopped, running.ended]) : stopped);
  } catch (err) {
    return failed(err);
  }
}
