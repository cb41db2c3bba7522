/**
 * Reading nats-server's log for the server's own verdicts. The broker writes a line about a
 * client connection (a route, a leaf, a gateway) with the connection's address and id first,
 * and such a line carries what that client sent: its CONNECT `name`, which may be any text. A
 * member who named its connection "x: no space left on device" made the watchdog restart the
 * broker, and one named "Failed to reload" failed the operator's `space add` (red team 26).
 * Every pattern Cotal looks for in the log is matched on the server's own lines only.
 *
 * @module
 */

/** The start of a connection's line: `[ERR] 127.0.0.1:53211 - cid:7 - ...` (rid, lid, gid...). */
const CONNECTION_LINE = String.raw`.*\[(?:TRC|DBG|INF|WRN|ERR|FTL)\] \S+ - [a-z]{1,3}id:\d+`;

/** True for a line the broker wrote about one connection (its text may be the client's). */
export function isConnectionLine(line: string): boolean {
  return new RegExp(`^${CONNECTION_LINE}`).test(line);
}

/** `re`, matching only on the server's own lines (never on a connection's). */
export function serverLine(re: RegExp): RegExp {
  return new RegExp(`^(?!${CONNECTION_LINE}).*(?:${re.source})`, re.flags.replace("g", ""));
}

/**
 * The whole lines of `data` that start at or after byte `from`: a line `from` falls inside is
 * skipped (its end, read alone, would lack the connection prefix that marks a client's text:
 * red team 27 started a reader mid-line), and so is an unfinished last line (the broker is
 * still writing it). `end` is where the next read starts.
 */
export function wholeLinesFrom(data: Uint8Array, from: number): { lines: string[]; end: number } {
  let start = Math.max(0, Math.min(from, data.length));
  if (start > 0 && data[start - 1] !== 0x0a) {
    const nl = data.indexOf(0x0a, start);
    if (nl < 0) return { lines: [], end: start };
    start = nl + 1;
  }
  const last = data.lastIndexOf(0x0a);
  if (last < start) return { lines: [], end: start };
  const text = new TextDecoder().decode(data.subarray(start, last));
  return { lines: text.split("\n"), end: last + 1 };
}
