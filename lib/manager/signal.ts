/**
 * Signalling an agent's runner. Deno's `Deno.kill` (and so node-pty's `kill`, which swallows
 * the refusal) needs an *unscoped* `--allow-run`; the supervisor's row grants only exact
 * programs. So when `Deno.kill` is refused, the signal goes through `/usr/bin/kill`, which the
 * row names among `supervisorPrograms`: signalling stays possible without granting every
 * program.
 *
 * @module
 */
import { CotalError } from "../errors.ts";

/** The kill program the supervisor's row must allow (`supervisorPrograms`). */
export const KILL_PROGRAM = "/usr/bin/kill";

/** Sends `signal` to `pid`; false when the process is already gone. */
export async function sendSignal(pid: number, signal: Deno.Signal): Promise<boolean> {
  try {
    Deno.kill(pid, signal);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    if (
      !(err instanceof Deno.errors.NotCapable) && !(err instanceof Deno.errors.PermissionDenied)
    ) {
      return false;
    }
  }
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(KILL_PROGRAM, {
      args: ["-s", signal.replace(/^SIG/, ""), String(pid)],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
  } catch (err) {
    throw new CotalError(
      "signal_refused",
      `Could not signal process ${pid}: Deno.kill needs unscoped --allow-run and ${KILL_PROGRAM} ` +
        `is not allowed either (${
          (err as Error).name
        }); add ${KILL_PROGRAM} to supervisorPrograms.`,
    );
  }
  return out.success;
}
