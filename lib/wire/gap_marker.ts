/**
 * The gap marker: what a member finds in its DLV subject when copies meant for it were refused
 * because its backlog of unread copies was full. It carries how many, and the first and last
 * of them (message id, channel, CHAT sequence, time), under the `Cotal-Gap: 1` header; it is
 * never a message, and the endpoint surfaces it as a `gap` event.
 *
 * @module
 */

/** The header that marks a gap marker (its value is the marker version). */
export const GAP_MARKER_HEADER = "Cotal-Gap";

/** One end of a gap's range. */
export interface GapEnd {
  /** The message id of the copy that was refused. */
  msgId: string;
  /** Its channel and its CHAT sequence. */
  channel: string;
  /** The stream sequence where the gap ends. */
  seq: number;
  /** When it was refused (epoch ms). */
  at: number;
}

/** A member lifecycle's missed copies. */
export interface GapMarker {
  version: 1;
  /** `<owner>.<actor>` */
  member: string;
  lifecycleUid: string;
  /**
   * Set when the missed messages are DMs of this sender (`<owner>.<actor>`) that the storage
   * warden trimmed before they were read; `first` and `last` then carry DM stream sequences
   * and an empty message id and channel.
   */
  from?: string;
  count: number;
  first: GapEnd;
  last: GapEnd;
}

function isEnd(v: unknown): v is GapEnd {
  const e = v as GapEnd;
  return typeof e === "object" && e !== null && typeof e.msgId === "string" &&
    typeof e.channel === "string" && Number.isInteger(e.seq) && Number.isFinite(e.at);
}

/** Parses a gap marker's body; undefined when it is not one. */
export function parseGapMarker(data: Uint8Array): GapMarker | undefined {
  try {
    const v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
    if (
      v?.version === 1 && typeof v.member === "string" && typeof v.lifecycleUid === "string" &&
      Number.isInteger(v.count) && v.count > 0 && isEnd(v.first) && isEnd(v.last) &&
      (v.from === undefined || typeof v.from === "string")
    ) return v as GapMarker;
  } catch {
    // Not a marker.
  }
  return undefined;
}
