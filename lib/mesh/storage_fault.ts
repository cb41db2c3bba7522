/**
 * A broker whose JetStream can no longer write. After a full disk, nats-server keeps failing
 * writes even once space is free again ("Critical write error", "no space left on device"),
 * and one that started on a too-full disk sized its JetStream from the little that was free and
 * never looks again ("insufficient storage resources available", "JetStream file resource
 * limits exceeded for server"); each needs a restart once space is back. The watchdog reads the
 * broker's log as it grows and restarts the broker on such a line (with its usual backoff, so a
 * disk that stays full is retried at most every 30 s); `status` reports the line.
 *
 * @module
 */

import { serverLine, wholeLinesFrom } from "../broker/mod.ts";

/**
 * Broker log lines that mean JetStream cannot write: the server's own lines only, never one
 * about a connection, whose text a member chooses (lib/broker/log_lines.ts). A write that failed
 * for want of descriptors ("too many open files") is no storage fault: those go to connections,
 * which a restart does not end, and red team 30's `--net host` agent, holding them, took the
 * broker's port while the watchdog restarted it. The connection cap (`max_connections`) keeps
 * descriptors for JetStream.
 */
export const STORAGE_FAULT_RE = serverLine(
  /no space left on device|Critical write error(?!.*too many open files)|insufficient storage resources available|JetStream (file|memory) resource limits exceeded for server/,
);

const START_RE = serverLine(/Starting nats-server/);
/** How much of a log's end `status` reads for the current broker's lines. */
const TAIL_BYTES = 256 * 1024;

/** The last line matching `re` that the broker logged since it last started (in the log's tail). */
async function lastSinceStart(logFile: string, re: RegExp): Promise<string | undefined> {
  let data: Uint8Array;
  try {
    data = await Deno.readFile(logFile);
  } catch {
    return undefined;
  }
  const { lines } = wholeLinesFrom(data, data.length - TAIL_BYTES);
  let found: string | undefined;
  for (const line of lines) {
    if (START_RE.test(line)) found = undefined;
    else if (re.test(line)) found = line;
  }
  return found;
}

/** The last storage-fault line the broker logged since it last started, or undefined. */
export async function lastStorageFault(logFile: string): Promise<string | undefined> {
  return (await lastSinceStart(logFile, STORAGE_FAULT_RE))?.trim();
}

/**
 * Follows a broker log as it grows: `poll()` returns the last storage-fault line logged since
 * the broker last started (a later start line clears it) until `clear()` is called.
 */
export class StorageFaultReader {
  readonly #logFile: string;
  #at: number | undefined;
  #ino: number | null | undefined;
  #fault: string | undefined;

  constructor(logFile: string) {
    this.#logFile = logFile;
  }

  /** Reads what was added since the last poll; the first poll looks at the log's tail. */
  async poll(): Promise<string | undefined> {
    let data: Uint8Array;
    let ino: number | null;
    try {
      ino = (await Deno.stat(this.#logFile)).ino;
      data = await Deno.readFile(this.#logFile);
    } catch {
      return this.#fault;
    }
    // Another file under the name (the broker rotated its log), or one shorter than where we
    // were: its lines start again at 0. Only whole lines are read, from a line's start.
    const rotated = this.#at !== undefined && (ino !== this.#ino || data.length < this.#at);
    const from = this.#at === undefined ? data.length - TAIL_BYTES : rotated ? 0 : this.#at;
    this.#ino = ino;
    const { lines, end } = wholeLinesFrom(data, from);
    this.#at = end;
    for (const line of lines) {
      if (START_RE.test(line)) this.#fault = undefined;
      else if (STORAGE_FAULT_RE.test(line)) this.#fault = line.trim();
    }
    return this.#fault;
  }

  /** Forgets the current fault (the broker was told to stop). */
  clear(): void {
    this.#fault = undefined;
  }
}

const OUT_OF_DESCRIPTORS_RE = serverLine(/too many open files/);
const LOG_TIME_RE = /(\d{4})\/(\d\d)\/(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3})/;

/**
 * Whether the current broker logged, within `withinMs` of `now`, that it ran out of descriptors
 * (an accept or a JetStream open failing with "too many open files"). Such a broker answers no
 * new connection, which the watchdog's probe reads as a hang; but the descriptors are held by
 * connections, a restart does not free them for long, and it lets go of the port: red team 31
 * flooded the monitoring port until the probe went silent, and took the client port in the
 * gap the kill opened.
 */
export async function outOfDescriptors(
  logFile: string,
  now = Date.now(),
  withinMs = 60_000,
): Promise<boolean> {
  const line = await lastSinceStart(logFile, OUT_OF_DESCRIPTORS_RE);
  const m = line === undefined ? null : LOG_TIME_RE.exec(line);
  if (!m) return false;
  const [y, mo, d, h, mi, s, ms] = m.slice(1).map(Number);
  return now - new Date(y, mo - 1, d, h, mi, s, ms).getTime() <= withinMs;
}
