/**
 * A small progress reporter for long steps (starting a broker, provisioning a space). It
 * writes to stderr only: on a terminal one live line per step that updates in place, and
 * elsewhere (logs, CI, pipes) exactly one line per finished step.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import type { CliIo } from "./output.ts";

/** Runs labelled steps and reports each. */
export interface Progress {
  /**
   * Run `fn` as one step called `label`; `update(detail)` refreshes the live line on a
   * terminal. Resolves or rejects with `fn`'s outcome after reporting it.
   */
  step<T>(label: string, fn: (update: (detail: string) => void) => Promise<T>): Promise<T>;
}

/** Options for {@linkcode createProgress}. */
export interface ProgressOptions {
  /** Milliseconds clock, for elapsed times (injectable so tests are deterministic). */
  readonly now?: () => number;
}

const CLEAR_LINE = "\r\x1b[2K";

function elapsed(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)}ms` : `${(ms / 1000).toFixed(1)}s`;
}

function reason(err: unknown): string {
  if (err instanceof CotalError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

/** A {@linkcode Progress} writing to `io.stderr`. */
export function createProgress(io: CliIo, options?: ProgressOptions): Progress {
  const now = options?.now ?? (() => performance.now());
  const tty = io.stderrIsTerminal;
  return {
    async step<T>(label: string, fn: (update: (detail: string) => void) => Promise<T>) {
      const started = now();
      if (tty) io.stderr(`... ${label}`);
      const update = (detail: string) => {
        if (tty) io.stderr(`${CLEAR_LINE}... ${label}: ${detail}`);
      };
      try {
        const result = await fn(update);
        io.stderr(`${tty ? CLEAR_LINE : ""}ok   ${label} (${elapsed(now() - started)})\n`);
        return result;
      } catch (err) {
        io.stderr(`${tty ? CLEAR_LINE : ""}fail ${label}: ${reason(err)}\n`);
        throw err;
      }
    },
  };
}

/** A live status line: what a long command is doing now. */
export interface LiveLine {
  /** Shows `text` in place of the last one. */
  (text: string): void;
  /** Clears the line (call before the command prints its result). */
  done(): void;
}

/**
 * A live status line on stderr, only when stderr is a terminal and the output is not `--json`:
 * logs, pipes and CI get nothing, so a command's output stays exactly its result. Untrusted
 * text is the caller's to sanitize.
 */
export function liveLine(io: CliIo, opts: { json?: boolean } = {}): LiveLine {
  const on = io.stderrIsTerminal && opts.json !== true;
  let shown = false;
  const line = ((text: string) => {
    if (!on) return;
    io.stderr(`${CLEAR_LINE}... ${text.slice(0, 200)}`);
    shown = true;
  }) as LiveLine;
  line.done = () => {
    if (on && shown) io.stderr(CLEAR_LINE);
    shown = false;
  };
  return line;
}
