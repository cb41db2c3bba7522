/**
 * What the storage warden knows of one of DM or TASK: every **genuine** message it has read
 * there (its subject, sequence, size and message id), subject by subject, in stream order.
 *
 * Genuine means what a receiver would accept (`decodeMessage`): a member's envelope whose
 * sender is the subject's, not a broker answer. The broker checks no reply subject, so a member
 * can aim JetStream API answers at another pair's subject, and redeliveries of what it may read
 * land under their original subjects again; neither is ever the named sender's write, so the
 * warden deletes them as it reads them and counts nothing of them against anyone. A message id
 * seen before in the same pair is such a replay too (receivers surface an id once).
 *
 * @module
 */
import type { StoredMsg } from "./warden_plan.ts";

/**
 * Message ids remembered per subject, newest kept. A replay needs its original still unacked in
 * the replaying member's durable, so still stored: a pair holds at most 256, and an id falls
 * out only after 512 newer messages of the same pair.
 */
export const IDS_PER_SUBJECT = 512;

/**
 * A 53-bit hash of a message id (cyrb53): ids are member-chosen strings of any length, and only
 * a sender's own genuine ids are ever compared with each other, so a fixed-size hash bounds the
 * memory without giving anyone a collision to aim.
 */
export function idHash(id: string): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

interface SubjectLog {
  seqs: number[];
  sizes: number[];
  ids: Set<number>;
}

/** The genuine messages of one stream, as the warden's reads found them. */
export class StoreIndex {
  readonly #subjects = new Map<string, SubjectLog>();
  #count = 0;

  /** Messages indexed. */
  get size(): number {
    return this.#count;
  }

  /** True when `subject` has genuine messages indexed. */
  has(subject: string): boolean {
    return (this.#subjects.get(subject)?.seqs.length ?? 0) > 0;
  }

  /** True when `id` was already stored on `subject` (a replay, not a new message). */
  seen(subject: string, id: string): boolean {
    return this.#subjects.get(subject)?.ids.has(idHash(id)) ?? false;
  }

  /** Adds one genuine message (sequences arrive in increasing order). */
  add(subject: string, seq: number, bytes: number, id: string): void {
    let log = this.#subjects.get(subject);
    if (!log) this.#subjects.set(subject, log = { seqs: [], sizes: [], ids: new Set() });
    log.seqs.push(seq);
    log.sizes.push(bytes);
    log.ids.add(idHash(id));
    // A Set iterates in insertion order: the first is the oldest id.
    if (log.ids.size > IDS_PER_SUBJECT) log.ids.delete(log.ids.values().next().value!);
    this.#count++;
  }

  /**
   * Brings the index in line with what the stream holds now (`counts`: messages per subject):
   * what recipients read left the stream oldest first, so each subject keeps its newest
   * `count` entries, and a subject the stream no longer has is forgotten. Ids are kept as long
   * as the subject is (a replay of a read message is still a replay).
   */
  reconcile(counts: Readonly<Record<string, number>>): void {
    for (const [subject, log] of this.#subjects) {
      const n = counts[subject] ?? 0;
      if (n === 0) {
        this.#count -= log.seqs.length;
        this.#subjects.delete(subject);
      } else if (log.seqs.length > n) {
        const drop = log.seqs.length - n;
        log.seqs.splice(0, drop);
        log.sizes.splice(0, drop);
        this.#count -= drop;
      }
    }
  }

  /** Forgets the messages of `subject` below `before` (the warden purged them). */
  cut(subject: string, before: number): void {
    const log = this.#subjects.get(subject);
    if (!log) return;
    let i = 0;
    while (i < log.seqs.length && log.seqs[i] < before) i++;
    log.seqs.splice(0, i);
    log.sizes.splice(0, i);
    this.#count -= i;
  }

  /** Every indexed message, subject by subject, each subject in stream order. */
  *messages(): IterableIterator<StoredMsg> {
    for (const [subject, log] of this.#subjects) {
      for (let i = 0; i < log.seqs.length; i++) {
        yield { subject, seq: log.seqs[i], bytes: log.sizes[i] };
      }
    }
  }
}
