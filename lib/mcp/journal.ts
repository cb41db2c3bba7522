/**
 * The MCP server's inbox: what reached the agent, kept on disk until the harness has read it.
 * A copy the broker holds for the agent (a DM, a task, a durable channel copy) is acked only once
 * the harness read it (`collectInto` in server.ts, through {@linkcode InboxJournal.onRead}), so
 * the broker keeps it until then and a `cotal mcp` restarted with an empty inbox (a sandbox's RAM
 * home) gets it again. A completed write is in the kernel's page cache, which outlives the
 * process; the line is not synced per message (that sync was 3 ms of every delivery,
 * `tests/bench/mcp_bench.ts`). What `inbox` or `wait`
 * returned is handed out: not returned again by this server, and marked read on disk at the
 * client's next request, which shows it took the answer. A server killed before that returns it
 * again after its restart: a client that died with an answer in its pipe lost it before (fault
 * pass 8); one that read it sees it twice, by the same id. Lines are JSON (`{n, at, kind, message}`), in `inbox.jsonl`; the read marks are lines
 * appended to `read.log` (a cursor below which everything is read, and the numbers read out of
 * order; the last whole line counts), rewritten as one line once it grows. Both files stay
 * open for appending: opening and closing them, and renaming a marks file into place, were a
 * third of what a `wait` cost (`tests/bench/mcp_bench.ts`). A `read.json` of an older inbox is
 * read when there is no log.
 *
 * @module
 */
import { seenKey } from "../endpoint/mod.ts";
import type { CotalMessage } from "../wire/mod.ts";
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";

/** How a message reached the agent. */
export type InboxKind = "channel" | "dm" | "task";

/** One entry of the inbox. */
export interface InboxEntry {
  /** Its number in this inbox, from 1, in arrival order. */
  readonly n: number;
  /** Epoch ms of its arrival here. */
  readonly at: number;
  readonly kind: InboxKind;
  readonly message: CotalMessage;
}

interface ReadMarks {
  /** Every entry up to and including this one is read. */
  cursor: number;
  /** Entries above the cursor read out of order (a task's awaited reply). */
  extra: number[];
  /** The next entry's number, kept here so numbering survives dropping the read lines. */
  next?: number;
}

/** Read entries are dropped from the file once it is over this and all of it is read. */
const COMPACT_BYTES = 1024 * 1024;
/** The marks log is rewritten as its last line once it is over this. */
const MARKS_COMPACT_BYTES = 64 * 1024;
/** Message ids remembered to drop a second copy (a live post and its durable copy). */
const SEEN_IDS = 10_000;
/** Ids of read messages whose senders `reply` remembers (a few MiB at most). */
const READ_IDS = 100_000;

/** The inbox of one agent, in `dir` (created 0700). */
export class InboxJournal {
  readonly dir: string;
  #entries: InboxEntry[] = [];
  #marks: ReadMarks = { cursor: 0, extra: [] };
  #next = 1;
  #seen = new Set<string>();
  /**
   * The senders of each id the harness has read, kept past the compaction and past the
   * arrivals that push ids out of `#seen` (red team 31 sent 10,050 one-character posts for
   * that); only more reads push an id out, past {@linkcode READ_IDS}.
   */
  #readSenders = new Map<string, Set<string>>();
  #bytes = 0;
  #waiters = new Set<() => void>();
  #writing: Promise<void> = Promise.resolve();
  /** The inbox file and the marks log, open for appending (reopened after a rewrite). */
  #inboxFile?: Deno.FsFile;
  #marksLog?: Deno.FsFile;
  #marksBytes = 0;

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** Opens (or creates) the inbox in `dir`. */
  static async open(dir: string): Promise<InboxJournal> {
    const j = new InboxJournal(dir);
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
    await j.#load();
    return j;
  }

  get #file(): string {
    return `${this.dir}/inbox.jsonl`;
  }

  get #marksFile(): string {
    return `${this.dir}/read.log`;
  }

  /** Where an inbox written before the marks log kept its marks. */
  get #legacyMarksFile(): string {
    return `${this.dir}/read.json`;
  }

  async #load(): Promise<void> {
    const text = await Deno.readTextFile(this.#file).catch((err) => {
      if (err instanceof Deno.errors.NotFound) return "";
      throw new CotalError("mcp_inbox_unreadable", `The inbox ${this.#file} cannot be read.`);
    });
    this.#bytes = new TextEncoder().encode(text).length;
    // A torn last line (a kill mid-write) is closed, so the next line starts on its own.
    if (text !== "" && !text.endsWith("\n")) {
      await Deno.writeTextFile(this.#file, "\n", { append: true });
      this.#bytes++;
    }
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      try {
        const e = JSON.parse(line) as InboxEntry;
        if (typeof e.n !== "number" || typeof e.message?.id !== "string") continue;
        this.#entries.push(e);
        this.#remember(seenKey(e.message));
        this.#next = Math.max(this.#next, e.n + 1);
      } catch {
        // A line cut short by a kill mid-write was never acked: the broker delivers its
        // message again.
      }
    }
    const log = await Deno.readTextFile(this.#marksFile).catch(() => "");
    this.#marksBytes = new TextEncoder().encode(log).length;
    // As for the inbox: a torn last line is closed, so the next one is whole.
    if (log !== "" && !log.endsWith("\n")) {
      await Deno.writeTextFile(this.#marksFile, "\n", { append: true });
      this.#marksBytes++;
    }
    // The last whole line counts (one cut short by a kill was never answered from).
    let marks = log.split("\n").reverse().map((l) => {
      try {
        return l.trim() ? JSON.parse(l) : undefined;
      } catch {
        return undefined;
      }
    }).find((m) => m !== undefined);
    marks ??= await Deno.readTextFile(this.#legacyMarksFile).then(JSON.parse, () => undefined);
    if (marks && typeof marks.cursor === "number" && Array.isArray(marks.extra)) {
      this.#marks = { cursor: marks.cursor, extra: marks.extra.filter(Number.isInteger) };
      if (Number.isInteger(marks.next)) this.#next = Math.max(this.#next, marks.next);
    }
    this.#next = Math.max(this.#next, this.#marks.cursor + 1);
    for (const e of this.#entries) if (this.#isRead(e.n)) this.#rememberRead(e.message);
  }

  #rememberRead(m: CotalMessage): void {
    const senders = this.#readSenders.get(m.id) ?? new Set<string>();
    this.#readSenders.delete(m.id);
    this.#readSenders.set(m.id, senders.add(m.from.id));
    if (this.#readSenders.size > READ_IDS) {
      this.#readSenders.delete(this.#readSenders.keys().next().value!);
    }
  }

  #remember(key: string): void {
    this.#seen.add(key);
    if (this.#seen.size > SEEN_IDS) this.#seen.delete(this.#seen.values().next().value!);
  }

  #isRead(n: number): boolean {
    return n <= this.#marks.cursor || this.#marks.extra.includes(n);
  }

  /** Whether this message (its sender and id) is already in the inbox (read or not). */
  has(message: CotalMessage): boolean {
    return this.#seen.has(seenKey(message));
  }

  /** Whether this message is in the inbox and read (or compacted away, all read). */
  isRead(message: CotalMessage): boolean {
    const key = seenKey(message);
    if (!this.#seen.has(key)) return false;
    const e = this.#entries.find((x) => seenKey(x.message) === key);
    return e === undefined || this.#isRead(e.n);
  }

  /** Called with the entries each {@linkcode markRead} marked read, once that is on disk. */
  onRead?: (entries: readonly InboxEntry[]) => void;

  /**
   * Writes `message` to the inbox (whole, before it resolves); resolves false for an id already
   * held.
   * Only after it resolves may a copy the broker holds be acked.
   */
  append(kind: InboxKind, message: CotalMessage): Promise<boolean> {
    const run = this.#writing.then(async () => {
      if (this.#seen.has(seenKey(message))) return false;
      const entry: InboxEntry = { n: this.#next, at: Date.now(), kind, message };
      const line = new TextEncoder().encode(`${JSON.stringify(entry)}\n`);
      this.#inboxFile ??= await Deno.open(this.#file, { append: true, create: true, mode: 0o600 });
      await writeWhole(this.#inboxFile, line);
      this.#next++;
      this.#bytes += line.length;
      this.#entries.push(entry);
      this.#remember(seenKey(message));
      for (const w of this.#waiters) w();
      return true;
    });
    this.#writing = run.then(() => {}, () => {});
    return run;
  }

  /** The unread entries not handed out, oldest first (at most `max`), without marking them. */
  unread(max = Infinity): InboxEntry[] {
    const out: InboxEntry[] = [];
    for (const e of this.#entries) {
      if (out.length >= max) break;
      if (!this.#isRead(e.n) && !this.#handedOut.has(e.n)) out.push(e);
    }
    return out;
  }

  /** Entries returned to the client whose receipt its next request has not shown yet. */
  readonly #handedOut = new Map<number, InboxEntry>();

  /**
   * Records `entries` as returned to the client: never returned again by this server, marked
   * read by {@linkcode settleHandedOut} (the client's next request), returned again by a
   * restarted one if that never came.
   */
  handOut(entries: readonly InboxEntry[]): void {
    for (const e of entries) this.#handedOut.set(e.n, e);
  }

  /** Marks read, durably, what was handed out: the client's next request shows it took it. */
  async settleHandedOut(): Promise<void> {
    if (this.#handedOut.size === 0) return;
    const entries = [...this.#handedOut.values()];
    this.#handedOut.clear();
    await this.markRead(entries);
  }

  /**
   * The senders of message `id` this inbox held: its entries, and those read and dropped from
   * the file since (within the last 10,000 messages). A compaction must not make an id look
   * like one sender's again (red team 30 padded the inbox past its compaction, then reused a
   * read post's id).
   */
  sendersOf(id: string): string[] {
    const out: string[] = [...this.#readSenders.get(id) ?? []];
    for (const key of this.#seen) {
      const at = key.indexOf(" ");
      if (key.slice(at + 1) === id) out.push(key.slice(0, at));
    }
    return out;
  }

  /**
   * The entries holding message `id`, read or not. A sender picks its message ids, so two
   * senders can share one (a member can copy a channel post's id onto its own DM).
   */
  findAll(id: string): InboxEntry[] {
    return this.#entries.filter((e) => e.message.id === id);
  }

  /** Marks `entries` read, durably. */
  async markRead(entries: readonly InboxEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const extra = new Set([...this.#marks.extra, ...entries.map((e) => e.n)]);
    let cursor = this.#marks.cursor;
    while (extra.has(cursor + 1)) extra.delete(++cursor);
    this.#marks = { cursor, extra: [...extra].filter((n) => n > cursor).sort((a, b) => a - b) };
    const run = this.#writing.then(() => this.#saveMarks());
    this.#writing = run.then(() => {}, () => {});
    await run;
    for (const e of entries) this.#rememberRead(e.message);
    this.onRead?.(entries);
    await this.#compact();
  }

  /** Resolves when an entry arrives, or after `ms`. */
  arrival(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
    });
  }

  /** Appends the marks (on the write chain); past its bound the log becomes its last line. */
  async #saveMarks(): Promise<void> {
    const line = `${JSON.stringify({ ...this.#marks, next: this.#next })}\n`;
    if (this.#marksBytes > MARKS_COMPACT_BYTES) {
      this.#marksLog?.close();
      this.#marksLog = undefined;
      await writeFileAtomic(this.#marksFile, line, { what: "The inbox's read marks" });
      this.#marksBytes = line.length;
      return;
    }
    this.#marksLog ??= await Deno.open(this.#marksFile, {
      append: true,
      create: true,
      mode: 0o600,
    });
    const bytes = new TextEncoder().encode(line);
    await writeWhole(this.#marksLog, bytes);
    this.#marksBytes += bytes.length;
  }

  #compact(): Promise<void> {
    // On the write chain, so no append lands between the check and the rewrite.
    const run = this.#writing.then(async () => {
      if (this.#bytes < COMPACT_BYTES || this.unread(1).length > 0) return;
      // Everything is read: drop the lines. The marks (with the next number) are written
      // first, so a crash between the two writes leaves read lines, never renumbered ones.
      await this.#saveMarks();
      // The rewrite replaces the file: appends go to the new one.
      this.#inboxFile?.close();
      this.#inboxFile = undefined;
      await writeFileAtomic(this.#file, "", { what: "The inbox" });
      this.#entries = [];
      this.#bytes = 0;
    });
    this.#writing = run.then(() => {}, () => {});
    return run;
  }
}

/** Writes all of `bytes` (a short write is continued). */
async function writeWhole(f: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.length) done += await f.write(bytes.subarray(done));
}
