/**
 * The storage warden's arithmetic (`./warden.ts` runs it): which stored DMs and tasks a trim
 * cuts, and which DLV members yield. Pure functions over what a scan of the stream found.
 *
 * DM and TASK are cut **by sender, in bytes**. A member can only ever publish under its own
 * sender tokens (its credential pins them), so however many colluders flood, each of them
 * holds bytes under its own name only: the senders holding the most bytes are cut down to one
 * level, the highest that brings the stream to its target, and never below
 * {@linkcode PROTECTED_SENDER_BYTES}. An honest sender's DMs to an offline peer are never
 * trimmed while they are under the level — and the level stays above 4 MiB per sender however
 * many colluders there are. Inside a sender its largest pairs (one recipient each) yield
 * first, and inside a pair its oldest messages.
 *
 * Counting messages instead would let 64 KiB floods keep sixty times the bytes of an honest
 * sender's 1 KiB DMs at the same level; grouping by recipient would let colluders add senders
 * to an honest recipient's group until an honest sender's share of it was cut.
 *
 * @module
 */

/**
 * Bytes of unread DMs (or tasks) a sender keeps whatever the pressure: the warden never trims a
 * sender below this (sixty-four 64 KiB messages, or thousands of short ones).
 */
export const PROTECTED_SENDER_BYTES = 4 * 1024 * 1024;

/**
 * A backlog (copies per DLV member lifecycle) that never yields: 64 copies of at most 64 KiB.
 */
export const PROTECTED_BACKLOG = 64;

/**
 * The highest level `L ≥ floor` at which `Σ min(v, L)` fits in `budget`: `floor` when even that
 * does not fit, `Infinity` when everything fits.
 */
export function waterLevel(values: readonly number[], budget: number, floor: number): number {
  const total = values.reduce((a, c) => a + c, 0);
  if (total <= budget) return Infinity;
  const sum = (level: number) => values.reduce((a, c) => a + Math.min(c, level), 0);
  if (sum(floor) > budget) return floor;
  let lo = floor; // fits
  let hi = Math.max(...values); // does not fit (total > budget)
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (sum(mid) <= budget) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** One stored message, as a scan of the stream found it (in stream order). */
export interface StoredMsg {
  subject: string;
  seq: number;
  /** Its stored size: subject, headers and payload. */
  bytes: number;
}

/** The sender and recipient a DM or task subject names. */
export interface Pair {
  /** `<owner>.<actor>` of the member that published it. */
  sender: string;
  /** `<owner>.<actor>` of a DM's recipient, or a task's role. */
  recipient: string;
}

/** One pair's oldest messages to purge: every message of `subject` below `before`. */
export interface TrimStep extends Pair {
  subject: string;
  /** Purge the subject's messages with a sequence below this one. */
  before: number;
  /** How many of the scanned messages that removes, and their bytes. */
  messages: number;
  bytes: number;
  /** The first and last sequence removed. */
  firstSeq: number;
  lastSeq: number;
}

interface PairBacklog extends Pair {
  subject: string;
  msgs: StoredMsg[];
  bytes: number;
}

/**
 * The trims that remove at least `excess` bytes of `msgs` (stream order), the largest
 * senders first as the module doc says. Subjects `pairOf` does not know are left alone.
 */
export function planTrim(
  msgs: Iterable<StoredMsg>,
  pairOf: (subject: string) => Pair | undefined,
  excess: number,
): TrimStep[] {
  const senders = new Map<string, Map<string, PairBacklog>>();
  let total = 0;
  for (const m of msgs) {
    const pair = pairOf(m.subject);
    if (!pair) continue;
    const pairs = senders.get(pair.sender) ?? new Map<string, PairBacklog>();
    senders.set(pair.sender, pairs);
    const p = pairs.get(m.subject) ?? { ...pair, subject: m.subject, msgs: [], bytes: 0 };
    pairs.set(m.subject, p);
    p.msgs.push(m);
    p.bytes += m.bytes;
    total += m.bytes;
  }
  if (!(excess > 0)) return [];
  const list = [...senders.values()].map((pairs) => [...pairs.values()]);
  const bytesOf = (ps: PairBacklog[]) => ps.reduce((a, p) => a + p.bytes, 0);
  const level = waterLevel(list.map(bytesOf), total - excess, PROTECTED_SENDER_BYTES);
  const steps: TrimStep[] = [];
  for (const pairs of list) {
    if (bytesOf(pairs) <= level) continue;
    const pairLevel = waterLevel(pairs.map((p) => p.bytes), level, 0);
    for (const p of pairs) {
      if (p.bytes <= pairLevel) continue;
      const step = cutOldest(p, pairLevel);
      if (step) steps.push(step);
    }
  }
  return steps;
}

/** The oldest messages of `p` to purge so that its newest, within `keep` bytes, stay. */
function cutOldest(p: PairBacklog, keep: number): TrimStep | undefined {
  const { msgs } = p;
  let kept = 0;
  let i = msgs.length; // msgs[i..] are kept
  while (i > 0 && kept + msgs[i - 1].bytes <= keep) kept += msgs[--i].bytes;
  if (i === 0) return undefined;
  return {
    sender: p.sender,
    recipient: p.recipient,
    subject: p.subject,
    before: i < msgs.length ? msgs[i].seq : msgs[msgs.length - 1].seq + 1,
    messages: i,
    bytes: p.bytes - kept,
    firstSeq: msgs[0].seq,
    lastSeq: msgs[i - 1].seq,
  };
}

/** The DLV members whose backlog (copies per subject) is above the water level: they yield. */
export function yieldingGroups(
  counts: Readonly<Record<string, number>>,
  budget: number,
): Set<string> {
  const entries = Object.entries(counts);
  const level = waterLevel(entries.map(([, n]) => n), budget, PROTECTED_BACKLOG);
  return new Set(entries.filter(([, n]) => n >= level).map(([s]) => s));
}
