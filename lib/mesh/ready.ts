/**
 * Bounded readiness waits: the broker accepting connections, a line appearing in a log.
 *
 * @module
 */
import { wholeLinesFrom } from "../broker/mod.ts";
import { CotalError } from "../errors.ts";

/**
 * Waits until a NATS server answers on `host:port` with its INFO line, bounded. Reading INFO
 * (not just a TCP accept) proves the broker is serving, not merely bound.
 */
export async function waitBrokerReady(
  host: string,
  port: number,
  timeoutMs = 10_000,
  alive?: () => boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (alive && !alive()) {
      throw new CotalError("broker_exited", `nats-server exited before it served ${host}:${port}.`);
    }
    const answer = await brokerGreets(host, port, 1_000);
    if (answer === "greeted") return;
    last = answer === "silent" ? "no INFO line" : answer.refused;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new CotalError(
    "broker_not_ready",
    `nats-server did not answer on ${host}:${port} within ${timeoutMs} ms (${last}); see its log.`,
  );
}

/**
 * One look at a broker's client port: `greeted` when it sends its INFO line within `timeoutMs`,
 * `silent` when it accepts the connection but says nothing (a frozen broker: the kernel still
 * completes the handshake), `refused` (with why) when nothing accepts. Closes what it opened.
 */
export async function brokerGreets(
  host: string,
  port: number,
  timeoutMs: number,
): Promise<"greeted" | "silent" | { refused: string }> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), timeoutMs));
  const dial = Deno.connect({ hostname: host, port });
  try {
    const conn = await Promise.race([dial, late]).catch((err: Error) => ({ refused: err.message }));
    if (conn === "late") {
      // A connect still pending at the deadline is closed when it lands.
      dial.then((c) => c.close(), () => {});
      return "silent";
    }
    if ("refused" in conn) return conn;
    try {
      const buf = new Uint8Array(16);
      const n = await Promise.race([conn.read(buf).catch(() => null), late]);
      if (n === "late" || n === null) return "silent";
      return new TextDecoder().decode(buf.subarray(0, n)).startsWith("INFO") ? "greeted" : "silent";
    } finally {
      try {
        conn.close();
      } catch {
        // Already closed.
      }
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Waits for a line matching `re` to be appended to `logFile` after byte `from`, bounded.
 * Returns the line.
 */
export async function waitLogLine(
  logFile: string,
  from: number,
  re: RegExp,
  timeoutMs = 10_000,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  const ino = await Deno.stat(logFile).then((s) => s.ino, () => undefined);
  while (Date.now() < deadline) {
    const now = await Deno.stat(logFile).then((s) => s.ino, () => undefined);
    const data = await Deno.readFile(logFile).catch(() => new Uint8Array());
    // Another file under the name, or one shorter than `from`, was rotated in since: its lines
    // start at 0. Only whole lines are read, from a line's start (lib/broker/log_lines.ts).
    const rotated = now !== ino || data.length < from;
    const line = wholeLinesFrom(data, rotated ? 0 : from).lines.find((l) => re.test(l));
    if (line) return line;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new CotalError(
    "log_wait_timeout",
    `${logFile} showed no line matching ${re} within ${timeoutMs} ms.`,
  );
}

/** The current size of a file (0 when absent): where new log lines will start. */
export async function fileSize(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).size;
  } catch {
    return 0;
  }
}
