/**
 * Real brokers for tests: each call starts its own nats-server on a free loopback port with its
 * own temp store dir, and tears both down on every exit path (`await using`, an explicit
 * `stop()`, the test process exiting, or the test process being killed).
 */
import { type BrokerProcess, ensureServer, startBrokerProcess } from "../../lib/broker/mod.ts";

/** What a config renderer is given. */
export interface BrokerContext {
  port: number;
  storeDir: string;
}

/** Options for {@linkcode startTestBroker}. */
export interface TestBrokerOptions {
  /** Renders the config text; default: plain JetStream, no auth. */
  config?: (ctx: BrokerContext) => string;
  /** Use this port instead of a free one (a restart on the same port). */
  port?: number;
  /** Reuse this store dir (a restart keeping JetStream state); not removed on stop. */
  storeDir?: string;
}

/** A running test broker. */
export interface TestBroker {
  url: string;
  port: number;
  storeDir: string;
  configPath: string;
  process: BrokerProcess;
  /** Rewrites the config (when given) and reloads the broker in place. */
  reload(config?: string): Promise<void>;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const tempDirs = new Set<string>();
globalThis.addEventListener("unload", () => {
  for (const d of tempDirs) {
    try {
      Deno.removeSync(d, { recursive: true });
    } catch {
      // Already removed.
    }
  }
});

/** A loopback port nothing listens on right now (a race is retried by the caller). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The default test config: JetStream, no auth, loopback only. */
export function plainConfig(ctx: BrokerContext): string {
  return [
    `listen: "127.0.0.1:${ctx.port}"`,
    `jetstream { store_dir: ${JSON.stringify(ctx.storeDir)} }`,
    "",
  ].join("\n");
}

let serverPath: Promise<string> | undefined;
/** The nats-server binary tests use (installed into the project cache when absent). */
export function natsServerPath(): Promise<string> {
  serverPath ??= ensureServer().then((s) => s.path);
  return serverPath;
}

/** Makes a temp dir removed when the test process exits, whatever the path out. */
export async function tempDir(prefix = "cotal-test-"): Promise<string> {
  const d = await Deno.makeTempDir({ prefix });
  tempDirs.add(d);
  return d;
}

/** Removes a temp dir made by {@linkcode tempDir} now. */
export async function removeTempDir(d: string): Promise<void> {
  tempDirs.delete(d);
  await Deno.remove(d, { recursive: true }).catch(() => {});
}

/** Starts a real nats-server for one test; `await using` stops it and removes its files. */
export async function startTestBroker(opts: TestBrokerOptions = {}): Promise<TestBroker> {
  const binary = await natsServerPath();
  const render = opts.config ?? plainConfig;
  const dir = await tempDir("cotal-broker-");
  const storeDir = opts.storeDir ?? `${dir}/js`;
  const configPath = `${dir}/nats.conf`;
  let lastErr: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = opts.port ?? freePort();
    await Deno.writeTextFile(configPath, render({ port, storeDir }));
    let proc: BrokerProcess;
    try {
      proc = await startBrokerProcess({ binary, configPath });
    } catch (err) {
      lastErr = err;
      // Another process took the port between freePort() and the bind: try another one.
      if (!opts.port && /address already in use/i.test(String(err))) continue;
      await removeTempDir(dir);
      throw err;
    }
    let stopped: Promise<void> | undefined;
    const broker: TestBroker = {
      url: `nats://127.0.0.1:${port}`,
      port,
      storeDir,
      configPath,
      process: proc,
      async reload(config?: string) {
        if (config !== undefined) await Deno.writeTextFile(configPath, config);
        await proc.reload();
      },
      stop() {
        stopped ??= proc.stop().then(() => removeTempDir(dir));
        return stopped;
      },
      [Symbol.asyncDispose]() {
        return broker.stop();
      },
    };
    return broker;
  }
  await removeTempDir(dir);
  throw lastErr;
}

let counter = 0;
/** A space name no other test uses. */
export function uniqueSpace(prefix = "t"): string {
  const rand = crypto.getRandomValues(new Uint8Array(4));
  const hex = [...rand].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${prefix}-${hex}-${++counter}`;
}

/** Polls `fn` until it is true, bounded; the error says what was awaited. */
export async function waitFor(
  fn: () => boolean | Promise<boolean>,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  for (;;) {
    if (await fn()) return;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${opts.timeoutMs ?? 10_000} ms waiting for ${opts.what ?? "a condition"}`,
      );
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 25));
  }
}

/**
 * One `reader.read()` that fails after `timeoutMs` (the reader is cancelled, so nothing is left
 * pending): every read of a child's output or a socket in the suite has a deadline.
 */
export async function readWithin<T>(
  reader: ReadableStreamDefaultReader<T>,
  timeoutMs: number,
  what: string,
): Promise<ReadableStreamReadResult<T>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reader.cancel().catch(() => {});
      reject(new Error(`timed out after ${timeoutMs} ms reading ${what}`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([reader.read(), late]);
  } finally {
    clearTimeout(timer);
  }
}
