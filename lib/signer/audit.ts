/**
 * The signer's audit trail: one JSON line per decision (caller, the profile asked for, the
 * subject public key, the TTL, allowed or refused and why), appended to a file only the signer
 * writes. What others send cannot flood it: a refusal is written at most a few times per caller
 * and code each minute and then summed up; allowed signatures are bounded by the caller's rate;
 * and the file is rotated at {@linkcode AUDIT_MAX_BYTES} (one previous file kept).
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { type LimitedLog, limitLog } from "../log_limit.ts";

/** The size at which the trail is rotated to `<file>.1`. */
export const AUDIT_MAX_BYTES = 16 * 1024 * 1024;
/** How many rotated files are kept (`<file>.1` newest … `<file>.<n>` oldest). */
export const AUDIT_KEEP_FILES = 4;

const UNPROVEN = "(unproven)";

/** One decision of the signer. */
export interface AuditEntry {
  /** ISO time of the decision. */
  readonly at: string;
  /** `<owner>.<actor>` the request's subject named. */
  readonly caller: string;
  /** The caller's verified profile, when its proof verified. */
  readonly callerProfile?: string;
  /** Set on a refusal before the proof verified: `caller` is only what the subject named. */
  readonly unproven?: boolean;
  /** The principal (`<owner>.<actor>`) the credential speaks for, when the request named one. */
  readonly principal?: string;
  /** The profile asked for. */
  readonly profile?: string;
  /** The public key the credential is for. */
  readonly subject?: string;
  /** The TTL signed (or asked for), seconds. */
  readonly ttlSeconds?: number;
  /** Whether the JWT was signed. */
  readonly decision: "allowed" | "refused";
  /** The refusal's code. */
  readonly code?: string;
  /** A summary line: how many refusals of this caller and code were not written. */
  readonly notWritten?: number;
  /**
   * `cli` when the operator's CLI signed it with the root's seeds (`cotal mint`), not
   * `cotal-signer`: recorded so every credential handed out is in one trail.
   */
  readonly via?: "cli";
}

/** Appends decisions to `path` (0600). */
export class AuditLog {
  readonly path: string;
  readonly #refusals: LimitedLog;
  #size: number;
  #rotationFailed = false;
  readonly #maxBytes: number;
  /** Signatures per caller in the current minute, said in the signer's own log each minute. */
  #tally = new Map<string, number>();
  #tallySince = Date.now();

  /**
   * Opens (creates, 0600, in a 0700 dir) the trail at `path`; a trail it cannot write is
   * refused. `maxBytes` (default {@linkcode AUDIT_MAX_BYTES}) is where it rotates.
   */
  constructor(path: string, opts: { maxBytes?: number } = {}) {
    this.path = path;
    this.#maxBytes = opts.maxBytes ?? AUDIT_MAX_BYTES;
    try {
      Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")) || "/", { recursive: true, mode: 0o700 });
      Deno.writeFileSync(path, new Uint8Array(), { append: true, mode: 0o600 });
    } catch (err) {
      throw new CotalError(
        "audit_unwritable",
        `The signer's audit trail ${path} cannot be written (${
          (err as Error).message
        }); give the signer a writable log directory.`,
      );
    }
    try {
      this.#size = Deno.statSync(path).size;
    } catch {
      this.#size = 0;
    }
    this.#refusals = limitLog((line) => this.#write(line), {
      summary: (key, notWritten) => {
        const [caller, code] = key.split(" ");
        const unproven = caller === UNPROVEN;
        return JSON.stringify({
          at: new Date().toISOString(),
          caller: unproven ? "*" : caller,
          ...(unproven ? { unproven } : {}),
          decision: "refused",
          code,
          notWritten,
        });
      },
    });
  }

  /** Writes `entry` (a refusal through the per caller-and-code limit). */
  record(entry: Omit<AuditEntry, "at">): void {
    const line = JSON.stringify({ at: new Date().toISOString(), ...entry });
    if (entry.decision === "allowed") {
      this.#write(line);
      this.#count(entry.caller);
    } // A refusal before the proof names a caller nobody proved: all of them share one limit,
    // or a member could write five lines a minute under each name it makes up.
    else this.#refusals(`${entry.unproven ? UNPROVEN : entry.caller} ${entry.code}`, line);
  }

  /** Writes the summaries of refusals still only counted, and the minute's tally. */
  flush(): void {
    this.#refusals.flush();
    this.#sayTally();
  }

  // The trail keeps its last files only, so a caller signing at its full rate for long enough
  // pushes its own older lines out. The signer's log (the journal, under systemd) keeps a line
  // per caller and minute with how many it was signed, which no flood can push out of the file.
  #count(caller: string): void {
    this.#tally.set(caller, (this.#tally.get(caller) ?? 0) + 1);
    if (Date.now() - this.#tallySince >= 60_000) this.#sayTally();
  }

  #sayTally(): void {
    const since = new Date(this.#tallySince).toISOString();
    for (const [caller, n] of this.#tally) {
      console.error(
        `${new Date().toISOString()} signed ${n} credential(s) for ${caller} since ${since}`,
      );
    }
    this.#tally = new Map();
    this.#tallySince = Date.now();
  }

  #write(line: string): void {
    const bytes = new TextEncoder().encode(`${line}\n`);
    if (this.#size + bytes.length > this.#maxBytes) {
      try {
        // The oldest file goes; each other moves one down.
        for (let i = AUDIT_KEEP_FILES - 1; i >= 1; i--) {
          try {
            Deno.renameSync(`${this.path}.${i}`, `${this.path}.${i + 1}`);
          } catch (err) {
            if (!(err instanceof Deno.errors.NotFound)) throw err;
          }
        }
        Deno.renameSync(this.path, `${this.path}.1`);
        this.#size = 0;
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) this.#size = 0;
        else if (!this.#rotationFailed) {
          // Said once: the trail keeps growing past its cap until rotation works again.
          this.#rotationFailed = true;
          console.error(
            `${new Date().toISOString()} the audit trail ${this.path} could not be rotated (${
              (err as Error).name
            }); it grows past ${this.#maxBytes} bytes until it can.`,
          );
        }
      }
    }
    try {
      Deno.writeFileSync(this.path, bytes, { append: true, mode: 0o600 });
      this.#size += bytes.length;
    } catch {
      // A full disk must not stop the signer; the broker's own limits still hold.
    }
  }
}

/** Every entry of the trail at `path` (the rotated files first), oldest first. */
export async function readAudit(path: string): Promise<AuditEntry[]> {
  const out: AuditEntry[] = [];
  const rotated = Array.from(
    { length: AUDIT_KEEP_FILES },
    (_, i) => `${path}.${AUDIT_KEEP_FILES - i}`,
  );
  for (const file of [...rotated, path]) {
    let text: string;
    try {
      text = await Deno.readTextFile(file);
    } catch {
      continue;
    }
    for (const line of text.split("\n")) {
      if (!line) continue;
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch {
        // A torn last line after a crash.
        continue;
      }
      // Only what the signer writes: an object with a caller and a decision.
      const e = v as Partial<AuditEntry>;
      if (
        typeof v === "object" && v !== null && !Array.isArray(v) &&
        typeof e.caller === "string" && (e.decision === "allowed" || e.decision === "refused")
      ) out.push(e as AuditEntry);
    }
  }
  return out;
}

/**
 * Appends one decision another signer than `cotal-signer` made (the operator's `cotal mint`) to
 * the trail at `path`, creating it (0600, in a 0700 dir) when missing. A trail it cannot write
 * is refused (`audit_unwritable`): a credential handed out unrecorded is what the trail is for.
 */
export function appendAudit(path: string, entry: AuditEntry): void {
  try {
    Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")) || "/", { recursive: true, mode: 0o700 });
    Deno.writeFileSync(path, new TextEncoder().encode(JSON.stringify(entry) + "\n"), {
      append: true,
      mode: 0o600,
    });
  } catch (err) {
    throw new CotalError(
      "audit_unwritable",
      `The audit trail ${path} cannot be written (${
        (err as Error).message
      }); nothing was handed out. Fix its directory's owner or mode and retry.`,
    );
  }
}
