/**
 * The task runner, a built-in agent: it answers anycast tasks for its role by running one
 * declared command with the task's text on stdin and posting the result. This file holds the
 * command execution (bounded output, timeout, stop on request); answering tasks over the broker
 * arrives with the endpoint.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import type { JsonValue } from "../../wire/envelope.ts";
import type { AgentContext } from "../runner.ts";

/** Caps no configuration may exceed. */
export const TASK_RUNNER_LIMITS: Readonly<{
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
  defaultOutputBytes: number;
  maxOutputBytes: number;
  maxInputBytes: number;
}> = Object.freeze({
  defaultTimeoutMs: 60_000,
  maxTimeoutMs: 30 * 60_000,
  defaultOutputBytes: 64 * 1024,
  maxOutputBytes: 1024 * 1024,
  maxInputBytes: 1024 * 1024,
});

/** One command execution. */
export interface TaskCommand {
  readonly command: string;
  readonly args?: readonly string[];
  readonly cwd?: string;
  /** Written to the command's stdin, then stdin is closed. */
  readonly input?: string;
  /** After this long the command is sent SIGTERM, then SIGKILL. */
  readonly timeoutMs?: number;
  /** Per stream; bytes past it are read and dropped so the command never blocks on a pipe. */
  readonly maxOutputBytes?: number;
}

/** How a command ended and what it printed (each stream cut at the byte limit). */
export interface TaskResult {
  readonly code: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Whether either stream went past the limit. */
  readonly truncated: boolean;
  readonly timedOut: boolean;
  /** Whether it was stopped by the caller's signal. */
  readonly aborted: boolean;
}

function bounded(n: number | undefined, def: number, max: number, what: string): number {
  const v = n ?? def;
  if (!Number.isInteger(v) || v <= 0 || v > max) {
    throw new CotalError(
      "task_bad_limit",
      `The task runner's ${what} must be a whole number from 1 to ${max}; lower it.`,
    );
  }
  return v;
}

async function collect(stream: ReadableStream<Uint8Array>, limit: number, stop: Promise<void>) {
  const reader = stream.getReader();
  const kept: Uint8Array[] = [];
  let size = 0;
  let over = false;
  // A grandchild that inherited the pipe can hold it open after the command exits; stop then.
  stop.then(() => reader.cancel().catch(() => {}));
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      const room = limit - size;
      if (value.length > room) over = true;
      if (room > 0) {
        kept.push(value.subarray(0, room));
        size += Math.min(room, value.length);
      }
    }
  } catch {
    // Cancelled after exit: keep what arrived.
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const k of kept) {
    out.set(k, at);
    at += k.length;
  }
  return { text: new TextDecoder().decode(out), over };
}

/** Runs one command with bounded output and a timeout; never throws for a failing command. */
export async function runTaskCommand(
  task: TaskCommand,
  opts: { signal?: AbortSignal } = {},
): Promise<TaskResult> {
  const timeoutMs = bounded(
    task.timeoutMs,
    TASK_RUNNER_LIMITS.defaultTimeoutMs,
    TASK_RUNNER_LIMITS.maxTimeoutMs,
    "timeoutMs",
  );
  const limit = bounded(
    task.maxOutputBytes,
    TASK_RUNNER_LIMITS.defaultOutputBytes,
    TASK_RUNNER_LIMITS.maxOutputBytes,
    "maxOutputBytes",
  );
  const input = new TextEncoder().encode(task.input ?? "");
  if (input.length > TASK_RUNNER_LIMITS.maxInputBytes) {
    throw new CotalError(
      "task_input_too_big",
      `The task's input is ${input.length} bytes, over ${TASK_RUNNER_LIMITS.maxInputBytes}; send less.`,
    );
  }
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(task.command, {
      args: [...(task.args ?? [])],
      cwd: task.cwd,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    throw new CotalError(
      "task_spawn_failed",
      `Could not start ${task.command} (${(err as Error).name}); check the task runner's command.`,
    );
  }
  let timedOut = false;
  let aborted = false;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const stop = (why: "timeout" | "abort") => {
    if (why === "timeout") timedOut = true;
    else aborted = true;
    try {
      child.kill("SIGTERM");
    } catch {
      return;
    }
    killTimer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch {
        // Gone after SIGTERM.
      }
    }, 2_000);
  };
  const timer = setTimeout(() => stop("timeout"), timeoutMs);
  const onAbort = () => stop("abort");
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  if (opts.signal?.aborted) onAbort();
  let exited!: () => void;
  const drainDeadline = new Promise<void>((resolve) => (exited = resolve));
  const writing = (async () => {
    const w = child.stdin.getWriter();
    try {
      await w.write(input);
      await w.close();
    } catch {
      // The command closed stdin early (or exited): its choice.
    }
  })();
  const out = collect(child.stdout, limit, drainDeadline);
  const err = collect(child.stderr, limit, drainDeadline);
  const status = await child.status;
  clearTimeout(timer);
  clearTimeout(killTimer);
  opts.signal?.removeEventListener("abort", onAbort);
  const grace = setTimeout(exited, 500);
  const [o, e] = await Promise.all([out, err, writing]);
  clearTimeout(grace);
  return {
    code: status.signal ? null : status.code,
    signal: status.signal ?? null,
    stdout: o.text,
    stderr: e.text,
    truncated: o.over || e.over,
    timedOut,
    aborted,
  };
}

/** The task runner's validated configuration (from its launch spec). */
export interface TaskRunnerConfig {
  readonly command: string;
  readonly args: readonly string[];
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
}

/**
 * Validates the task runner's launch spec: the command is the agent's declared `program` (the
 * one the runner's `--allow-run` grants), `config` may give `args`, `timeoutMs`, `maxOutputBytes`.
 */
export function parseTaskRunnerConfig(
  program: string | undefined,
  config: { readonly [key: string]: JsonValue } = {},
): TaskRunnerConfig {
  if (!program) {
    throw new CotalError(
      "task_no_program",
      "The task runner needs a declared program (the command it runs); set agent.program.",
    );
  }
  for (const k of Object.keys(config)) {
    if (!["args", "timeoutMs", "maxOutputBytes"].includes(k)) {
      throw new CotalError(
        "task_bad_config",
        `The task runner's config has an unknown key "${
          k.slice(0, 40)
        }"; use args, timeoutMs or maxOutputBytes.`,
      );
    }
  }
  const args = config.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== "string")) {
    throw new CotalError("task_bad_config", "The task runner's args must be a list of strings.");
  }
  const num = (v: JsonValue | undefined) => (typeof v === "number" ? v : undefined);
  if (
    (config.timeoutMs !== undefined && typeof config.timeoutMs !== "number") ||
    (config.maxOutputBytes !== undefined && typeof config.maxOutputBytes !== "number")
  ) {
    throw new CotalError("task_bad_config", "The task runner's limits must be numbers.");
  }
  return {
    command: program,
    args: args as string[],
    timeoutMs: bounded(
      num(config.timeoutMs),
      TASK_RUNNER_LIMITS.defaultTimeoutMs,
      TASK_RUNNER_LIMITS.maxTimeoutMs,
      "timeoutMs",
    ),
    maxOutputBytes: bounded(
      num(config.maxOutputBytes),
      TASK_RUNNER_LIMITS.defaultOutputBytes,
      TASK_RUNNER_LIMITS.maxOutputBytes,
      "maxOutputBytes",
    ),
  };
}

/**
 * The agent entry point. It validates its configuration, then stops with `agent_needs_endpoint`:
 * answering tasks needs the broker endpoint, which the runner does not provide yet.
 */
export function run(ctx: AgentContext): number {
  const spec = ctx.launch.agent;
  parseTaskRunnerConfig(
    spec.kind === "program" ? undefined : spec.program,
    spec.kind === "builtin" ? spec.config : undefined,
  );
  throw new CotalError(
    "agent_needs_endpoint",
    "The task runner answers anycast tasks through the broker endpoint, which this build of cotal-agent does not have yet.",
  );
}
