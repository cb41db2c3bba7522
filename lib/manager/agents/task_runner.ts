/**
 * The task runner, a built-in agent: it answers anycast tasks for its role by running one
 * declared command with the task's text on stdin and posting the result as a DM to the sender
 * (never to another principal the task names), threaded under the task by `replyTo`. Commands
 * run one at a time with bounded output and a timeout.
 *
 * A task is acknowledged when it is taken: a runner that dies mid-command does not run it again
 * on another holder, because a command is not assumed to be idempotent.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import type { CotalEndpoint, CotalMessageEvent } from "../../endpoint/mod.ts";
import type { CotalMessage, JsonValue } from "../../wire/mod.ts";
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
 * Where a task's result goes: its sender, always. A task once named another principal in a
 * `{ "replyTo": ... }` data part: red team 26 had the runner deliver "NOTICE FROM THE OPERATOR"
 * to a third agent under the runner's name, and filled that agent's unread cap from the runner
 * so a genuine result to it was refused. A sender who wants a result elsewhere passes it on.
 */
export function resultRecipient(task: CotalMessage): string {
  return task.from.id;
}

function taskText(task: CotalMessage): string {
  return task.parts.filter((p) => p.kind === "text").map((p) => (p as { text: string }).text)
    .join("\n");
}

async function answer(
  ep: CotalEndpoint,
  cfg: TaskRunnerConfig,
  task: CotalMessage,
  ctx: AgentContext,
): Promise<void> {
  ep.setStatus("working");
  // The sender's id, which the broker bound to it, never the name it wrote itself.
  ep.setActivity(`task ${task.id.slice(0, 8)} from ${task.from.id}`);
  let result: TaskResult | undefined;
  let failure: string | undefined;
  try {
    result = await runTaskCommand({
      command: cfg.command,
      args: cfg.args,
      cwd: ctx.agentDir,
      input: taskText(task),
      timeoutMs: cfg.timeoutMs,
      maxOutputBytes: cfg.maxOutputBytes,
    }, { signal: ctx.signal });
  } catch (err) {
    failure = `${(err as CotalError).code ?? "error"}: ${(err as Error).message}`;
  }
  const to = resultRecipient(task);
  const text = result ? resultText(result) : `task failed: ${failure}`;
  const data: { [key: string]: JsonValue } = result
    ? {
      task: task.id,
      code: result.code,
      signal: result.signal,
      stdout: result.stdout,
      stderr: result.stderr,
      truncated: result.truncated,
      timedOut: result.timedOut,
    }
    : { task: task.id, error: failure ?? "error" };
  try {
    await ep.unicast(to, text, { replyTo: task.id, parts: [{ kind: "data", data }] });
    ctx.log(`task ${task.id} from ${task.from.id}: ${result ? `exit ${result.code}` : failure}`);
  } catch (err) {
    ctx.log(`task ${task.id}: could not post the result to ${to}: ${(err as Error).message}`);
  } finally {
    ep.setActivity(undefined);
    ep.setStatus("idle");
  }
}

/**
 * The agent entry point: validates its configuration, connects, then answers every anycast
 * task for its role, one at a time, until stopped. DMs are not tasks (a result DM from another
 * task runner would otherwise bounce between them forever).
 */
export async function run(ctx: AgentContext): Promise<number> {
  const spec = ctx.launch.agent;
  const cfg = parseTaskRunnerConfig(
    spec.kind === "program" ? undefined : spec.program,
    spec.kind === "builtin" ? spec.config : undefined,
  );
  const ep = await ctx.endpoint();
  let queue = Promise.resolve();
  ep.addEventListener("message", (ev: CotalMessageEvent) => {
    if (ev.meta.source !== "anycast") return;
    const task = ev.message;
    queue = queue.then(() => answer(ep, cfg, task, ctx));
  });
  ctx.log(`task runner ${ctx.launch.card.name} ready: role ${ctx.launch.card.role ?? "(none)"}`);
  if (!ctx.signal.aborted) {
    await new Promise<void>((resolve) =>
      ctx.signal.addEventListener("abort", () => resolve(), { once: true })
    );
  }
  await queue;
  return 0;
}

/**
 * The text of a task's answer: its stdout; with none, how it ended and what it said on stderr
 * (newcomer pass 10 read "(exit 3, no output)" for a command that had printed "oops" there).
 */
export function resultText(r: Pick<TaskResult, "stdout" | "stderr" | "code" | "signal">): string {
  if (r.stdout) return r.stdout;
  const err = r.stderr.trim();
  return `(exit ${r.code ?? r.signal}, no output${err ? `; stderr: ${err}` : ""})`;
}
