/**
 * The built-in runtimes: `pty` runs a launch spec on a real pseudo-terminal through
 * `@lydell/node-pty` (a Node-API addon: needs `--allow-ffi`, and under Deno 2.9 unscoped
 * `--allow-read` and `--allow-write`, because `node:tty.ReadStream` on the pty's fd checks them);
 * `process` runs it with plain pipes (headless agents, tests). Both self-register on import.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import {
  type LaunchSpec,
  registry,
  type Runtime,
  type RuntimeExit,
  type RuntimeHandle,
  type SpawnOptions,
} from "../registry.ts";

/** The terminal size a spawn gets unless it asks for another. */
export const DEFAULT_PTY_SIZE: Readonly<{ cols: number; rows: number }> = Object.freeze({
  cols: 120,
  rows: 32,
});

const SIGNALS: Record<number, string> = {
  1: "SIGHUP",
  2: "SIGINT",
  3: "SIGQUIT",
  6: "SIGABRT",
  9: "SIGKILL",
  13: "SIGPIPE",
  14: "SIGALRM",
  15: "SIGTERM",
};

/** Listener lists with unsubscribe, and exit replayed to late listeners. */
class Events {
  readonly data = new Set<(d: Uint8Array) => void>();
  readonly exit = new Set<(e: RuntimeExit) => void>();
  ended: RuntimeExit | undefined;

  emitData(d: Uint8Array): void {
    for (const fn of this.data) fn(d);
  }
  emitExit(e: RuntimeExit): void {
    if (this.ended) return;
    this.ended = e;
    for (const fn of this.exit) fn(e);
  }
  onData(fn: (d: Uint8Array) => void): () => void {
    this.data.add(fn);
    return () => this.data.delete(fn);
  }
  onExit(fn: (e: RuntimeExit) => void): () => void {
    if (this.ended) {
      const e = this.ended;
      queueMicrotask(() => fn(e));
      return () => {};
    }
    this.exit.add(fn);
    return () => this.exit.delete(fn);
  }
}

function checkSpec(spec: LaunchSpec): void {
  if (typeof spec.command !== "string" || spec.command === "") {
    throw new CotalError("runtime_bad_spec", "A launch spec needs a command; name the program.");
  }
}

type PtyModule = typeof import("@lydell/node-pty");
let ptyModule: Promise<PtyModule> | undefined;

function loadPty(): Promise<PtyModule> {
  // Loaded on first use so importing this module (and registering) needs no FFI permission.
  ptyModule ??= import("@lydell/node-pty");
  return ptyModule;
}

async function spawnPty(spec: LaunchSpec, options: SpawnOptions = {}): Promise<RuntimeHandle> {
  checkSpec(spec);
  const pty = await loadPty();
  const events = new Events();
  const enc = new TextEncoder();
  const term = pty.spawn(spec.command, [...spec.args], {
    name: "xterm-256color",
    cols: options.cols ?? DEFAULT_PTY_SIZE.cols,
    rows: options.rows ?? DEFAULT_PTY_SIZE.rows,
    cwd: spec.cwd,
    // Exactly the spec's env: the supervisor's own environment never reaches an agent.
    env: { ...(spec.env ?? {}) },
    encoding: null,
  });
  term.onData((d: string | Uint8Array) => {
    events.emitData(typeof d === "string" ? enc.encode(d) : new Uint8Array(d));
  });
  term.onExit(({ exitCode, signal }) => {
    events.emitExit(
      signal ? { code: null, signal: SIGNALS[signal] ?? `signal ${signal}` } : {
        code: exitCode,
        signal: null,
      },
    );
  });
  return {
    pid: term.pid,
    write(data) {
      if (events.ended) return;
      term.write(typeof data === "string" ? data : new TextDecoder().decode(data));
    },
    resize(cols, rows) {
      if (!events.ended) term.resize(cols, rows);
    },
    kill(signal = "SIGTERM") {
      if (!events.ended) term.kill(signal);
    },
    onData: (fn) => events.onData(fn),
    onExit: (fn) => events.onExit(fn),
  };
}

/** The pty runtime: one pseudo-terminal per agent. */
export const ptyRuntime: Runtime = Object.freeze({
  kind: "runtime",
  name: "pty",
  async available() {
    try {
      await loadPty();
      return true;
    } catch {
      return false;
    }
  },
  spawn: spawnPty,
});

async function pump(
  stream: ReadableStream<Uint8Array>,
  events: Events,
  exited: Promise<void>,
): Promise<void> {
  const reader = stream.getReader();
  // A grandchild that inherited the pipe can hold it open after the child exits: once the
  // child is gone, give the pipe a moment to drain, then stop reading.
  exited.then(() => setTimeout(() => reader.cancel().catch(() => {}), 500));
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) return;
      events.emitData(value);
    }
  } catch {
    // Cancelled.
  }
}

// deno-lint-ignore require-await
async function spawnProcess(spec: LaunchSpec, _options: SpawnOptions = {}): Promise<RuntimeHandle> {
  checkSpec(spec);
  const events = new Events();
  const child = new Deno.Command(spec.command, {
    args: [...spec.args],
    cwd: spec.cwd,
    env: { ...(spec.env ?? {}) },
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  const exited = child.status.then(() => {});
  const pumped = Promise.all([
    pump(child.stdout, events, exited),
    pump(child.stderr, events, exited),
  ]);
  child.status.then(async (st) => {
    await pumped.catch(() => {});
    writer.close().catch(() => {});
    events.emitExit({ code: st.signal ? null : st.code, signal: st.signal ?? null });
  });
  return {
    pid: child.pid,
    write(data) {
      if (events.ended) return;
      writer.write(typeof data === "string" ? new TextEncoder().encode(data) : data).catch(
        () => {},
      );
    },
    resize() {
      // No terminal: nothing to resize.
    },
    kill(signal = "SIGTERM") {
      if (events.ended) return;
      try {
        child.kill(signal);
      } catch {
        // Already gone.
      }
    },
    onData: (fn) => events.onData(fn),
    onExit: (fn) => events.onExit(fn),
  };
}

/** The process runtime: plain pipes, stdout and stderr interleaved into `onData`. */
export const processRuntime: Runtime = Object.freeze({
  kind: "runtime",
  name: "process",
  available: () => Promise.resolve(true),
  spawn: spawnProcess,
});

registry.register([ptyRuntime, processRuntime]);

/**
 * Resolves a runtime by name through the registry (`pty` built in, `process` for pipes); an
 * unknown name throws `registry_unknown`, and one that cannot run here `runtime_unavailable`.
 * Never a silent fallback to another runtime.
 */
export async function createRuntime(name = "pty"): Promise<Runtime> {
  const runtime = registry.resolve("runtime", name);
  if (!(await runtime.available())) {
    throw new CotalError(
      "runtime_unavailable",
      `The ${name} runtime cannot run here; for pty, run with --allow-ffi and a glibc Linux (the addon is prebuilt for glibc).`,
    );
  }
  return runtime;
}
