import { serverLine } from "./log_lines.ts";
import { CotalError } from "../errors.ts";

/** Options for {@linkcode startBrokerProcess}. */
export interface StartBrokerOptions {
  /** The nats-server binary (see `findServer`/`ensureServer`). */
  binary: string;
  /** The config file to start from. */
  configPath: string;
  /** How long to wait for "Server is ready" before giving up. Default 10 s. */
  readyTimeoutMs?: number;
  /** How many of the broker's last log lines to keep for error messages. Default 40. */
  keepLines?: number;
  /** Also append every log line to this file. */
  logFile?: string;
}

/** A running nats-server child process. */
export interface BrokerProcess {
  readonly pid: number;
  /** The last lines the broker logged. */
  logTail(): string[];
  /** Resolves with the exit status once the process is gone. */
  readonly exited: Promise<Deno.CommandStatus>;
  /** Asks the broker to re-read its config (SIGHUP) and waits for it to say it did. */
  reload(timeoutMs?: number): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs` (default 5 s). Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

const live = new Set<Deno.ChildProcess>();
let exitHookInstalled = false;

// A parent that exits normally or on SIGINT/SIGTERM takes its brokers with it; a parent killed
// outright is covered by the child's parent-death signal (setpriv --pdeathsig).
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  const killAll = () => {
    for (const child of live) {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    }
  };
  globalThis.addEventListener("unload", killAll);
}

let setprivPath: string | null | undefined;
function findSetpriv(): string | null {
  if (setprivPath !== undefined) return setprivPath;
  setprivPath = null;
  for (const p of ["/usr/bin/setpriv", "/bin/setpriv"]) {
    try {
      if (Deno.statSync(p).isFile) setprivPath = p;
      break;
    } catch {
      // Try the next.
    }
  }
  return setprivPath;
}

/**
 * Starts nats-server from a config file and waits, bounded, until it reports ready. On failure
 * the error carries the broker's own last log lines, which name the real cause.
 */
export async function startBrokerProcess(opts: StartBrokerOptions): Promise<BrokerProcess> {
  const setpriv = findSetpriv();
  const [cmd, args] = setpriv
    ? [setpriv, ["--pdeathsig", "SIGKILL", "--", opts.binary, "-c", opts.configPath]]
    : [opts.binary, ["-c", opts.configPath]];
  const child = new Deno.Command(cmd, {
    args,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  installExitHook();
  live.add(child);
  const exited = child.status.finally(() => live.delete(child));
  const out = new BrokerOutput(
    opts.keepLines ?? 40,
    opts.logFile ? await Deno.open(opts.logFile, { append: true, create: true }) : null,
    exited,
  );
  const pumps = Promise.all([out.pump(child.stdout), out.pump(child.stderr)]).finally(() =>
    out.close()
  );
  const waitLine = (re: RegExp, timeoutMs: number, what: string) =>
    out.waitLine(re, timeoutMs, what);

  let stopping: Promise<void> | undefined;
  const proc: BrokerProcess = {
    pid: child.pid,
    logTail: () => out.tail(),
    exited,
    async reload(timeoutMs = 10_000) {
      const seen = waitLine(
        serverLine(/Reloaded server configuration|Failed to reload/),
        timeoutMs,
        "reload its configuration",
      );
      child.kill("SIGHUP");
      const line = await seen;
      if (/Failed to reload/.test(line)) {
        throw new CotalError(
          "broker_reload_failed",
          `nats-server refused the new configuration: ${line.replace(/^.*Failed/, "Failed")}`,
        );
      }
    },
    stop(graceMs = 5_000) {
      stopping ??= (async () => {
        try {
          child.kill("SIGTERM");
        } catch {
          // Already exited.
        }
        let timer: ReturnType<typeof setTimeout> | undefined;
        const killed = new Promise<void>((r) => {
          timer = setTimeout(() => {
            try {
              child.kill("SIGKILL");
            } catch {
              // Exited in the meantime.
            }
            r();
          }, graceMs);
        });
        await Promise.race([exited, killed]);
        await exited;
        clearTimeout(timer);
        await pumps;
      })();
      return stopping;
    },
  };
  try {
    await waitLine(serverLine(/Server is ready/), opts.readyTimeoutMs ?? 10_000, "report ready");
  } catch (err) {
    await proc.stop(1_000);
    throw err;
  }
  return proc;
}

/**
 * What nats-server prints, line by line: the last `keep` lines (for errors), a copy in its log
 * file, and waits for a line (readiness, a reload's outcome) that end if the process exits.
 */
class BrokerOutput {
  readonly #lines: string[] = [];
  readonly #waiters: { re: RegExp; resolve: (line: string) => void }[] = [];

  constructor(
    readonly keep: number,
    readonly log: Deno.FsFile | null,
    readonly exited: Promise<Deno.CommandStatus>,
  ) {}

  tail(): string[] {
    return [...this.#lines];
  }

  close(): void {
    this.log?.close();
  }

  #onLine(line: string): void {
    this.#lines.push(line);
    if (this.#lines.length > this.keep) this.#lines.shift();
    this.log?.writeSync(new TextEncoder().encode(line + "\n"));
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      if (this.#waiters[i].re.test(line)) {
        this.#waiters[i].resolve(line);
        this.#waiters.splice(i, 1);
      }
    }
  }

  async pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    let buf = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        this.#onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    }
    if (buf) this.#onLine(buf);
  }

  /** The next line matching `re`, within `timeoutMs`, or a refusal naming what it waited for. */
  waitLine(re: RegExp, timeoutMs: number, what: string): Promise<string> {
    const waiters = this.#waiters;
    const last = () => this.#lines.slice(-8).join(" | ");
    return new Promise<string>((resolve, reject) => {
      // Set right below; a log line can only resolve the waiter on a later turn.
      // deno-lint-ignore prefer-const
      let timer: ReturnType<typeof setTimeout> | undefined;
      const w = {
        re,
        resolve: (line: string) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      waiters.push(w);
      timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(w), 1);
        reject(
          new CotalError(
            "broker_not_ready",
            `nats-server did not ${what} within ${timeoutMs} ms; its last lines: ${last()}`,
          ),
        );
      }, timeoutMs);
      this.exited.then((s) => {
        if (waiters.includes(w)) {
          clearTimeout(timer);
          waiters.splice(waiters.indexOf(w), 1);
          reject(
            new CotalError(
              "broker_exited",
              `nats-server exited with code ${s.code} before it was ready; its last lines: ${last()}`,
            ),
          );
        }
      });
    });
  }
}
